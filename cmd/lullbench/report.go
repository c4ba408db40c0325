package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

type row struct{ name, value string }

type section struct {
	title string
	rows  []row
}

// report collects the figures and writes docs/benchmarks.md.
type report struct {
	quick    bool
	sections []section
	rss      float64
	microOut string
}

func newReport(quick bool) *report { return &report{quick: quick} }

func (r *report) add(title string, rows []row) {
	r.sections = append(r.sections, section{title, rows})
	fmt.Fprintf(os.Stderr, "%s\n", title)
	for _, rw := range rows {
		fmt.Fprintf(os.Stderr, "  %s: %s\n", rw.name, rw.value)
	}
}

func (r *report) memory(mb float64) { r.rss = mb }

func (r *report) micro(s string) { r.microOut = s }

func (r *report) write(path string) error {
	var b strings.Builder
	cmd := "go run ./cmd/lullbench"
	if r.quick {
		cmd += " -quick"
	}
	fmt.Fprintf(&b, "# lull benchmarks\n\nWritten by `%s` (also `task bench`). Machine: %s.\n", cmd, machine())
	b.WriteString("PostgreSQL 15 runs locally with fsync on; lull runs as its own process with `LULL_WORKERS=100`, sending to an SMTP sink on loopback.\n")
	for _, s := range r.sections {
		fmt.Fprintf(&b, "\n## %s\n\n| measure | value |\n| --- | --- |\n", s.title)
		for _, rw := range s.rows {
			fmt.Fprintf(&b, "| %s | %s |\n", rw.name, rw.value)
		}
	}
	fmt.Fprintf(&b, "\n## Memory\n\n| measure | value |\n| --- | --- |\n| peak RSS of lull over all scenarios | %.0f MB (goal < 150 MB) |\n", r.rss)
	fmt.Fprintf(&b, "\n## Micro-benchmarks\n\n```\n%s\n```\n", r.microOut)
	os.MkdirAll(filepath.Dir(path), 0o755)
	return os.WriteFile(path, []byte(b.String()), 0o644)
}
