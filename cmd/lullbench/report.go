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
	workers  int
	conns    int
	sections []section
	rss      []row // peak RSS after each scenario
	microOut string
}

func newReport(quick bool, workers, conns int) *report {
	return &report{quick: quick, workers: workers, conns: conns}
}

func (r *report) add(title string, rows []row) {
	r.sections = append(r.sections, section{title, rows})
	fmt.Fprintf(os.Stderr, "%s\n", title)
	for _, rw := range rows {
		fmt.Fprintf(os.Stderr, "  %s: %s\n", rw.name, rw.value)
	}
}

func (r *report) memory(after string, mb float64) {
	r.rss = append(r.rss, row{"after " + after, fmt.Sprintf("%.0f MB", mb)})
	fmt.Fprintf(os.Stderr, "  lull peak RSS so far: %.0f MB\n", mb)
}

func (r *report) micro(s string) { r.microOut = s }

func (r *report) write(path string) error {
	var b strings.Builder
	cmd := "go run ./cmd/lullbench"
	if r.quick {
		cmd += " -quick"
	}
	if r.workers != 300 {
		cmd += fmt.Sprintf(" -workers %d", r.workers)
	}
	if r.conns != 100 {
		cmd += fmt.Sprintf(" -smtp-connections %d", r.conns)
	}
	fmt.Fprintf(&b, "# lull benchmarks\n\nWritten by `%s` (also `task bench`). Machine: %s.\n", cmd, machine())
	fmt.Fprintf(&b, "PostgreSQL 15 runs locally with fsync on; lull runs as its own process with `LULL_WORKERS=%d` and `LULL_SMTP_CONNECTIONS=%d`, sending to an SMTP sink on loopback that counts what it receives (`cmd/lullbench/sink.go`).\n", r.workers, r.conns)
	for _, s := range r.sections {
		fmt.Fprintf(&b, "\n## %s\n\n| measure | value |\n| --- | --- |\n", s.title)
		for _, rw := range s.rows {
			fmt.Fprintf(&b, "| %s | %s |\n", rw.name, rw.value)
		}
	}
	b.WriteString("\n## Memory: peak RSS of lull (goal < 150 MB)\n\n| measure | value |\n| --- | --- |\n")
	for _, rw := range r.rss {
		fmt.Fprintf(&b, "| %s | %s |\n", rw.name, rw.value)
	}
	fmt.Fprintf(&b, "\n## Micro-benchmarks\n\n```\n%s\n```\n", r.microOut)
	b.WriteString("\nWhat each figure costs, which goals are missed on this machine and what would meet them: [performance.md](performance.md).\n")
	os.MkdirAll(filepath.Dir(path), 0o755)
	return os.WriteFile(path, []byte(b.String()), 0o644)
}
