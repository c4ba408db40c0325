// Command lullbench measures lull against a fresh database and a real SMTP
// sink on loopback, next to references measured in the same run on the
// same PostgreSQL, and writes docs/benchmarks.md.
//
//	go run ./cmd/lullbench -quick     # about two minutes
//	go run ./cmd/lullbench            # the full run
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lull-dev/lull/db/localpg"
)

// bench holds what every scenario shares.
type bench struct {
	quick  bool
	server string // maintenance database URL
	dbURL  string // the benchmark database
	lull   *lullProcess
	smtp   *sink
	conn   *pgx.Conn
	report *report
	pgBin  string
	// postmaster is the pid of the cluster's postmaster, for cpuSeconds.
	postmaster string
}

func main() {
	quick := flag.Bool("quick", false, "short runs (about two minutes in all)")
	out := flag.String("out", "docs/benchmarks.md", "where to write the report")
	workers := flag.Int("workers", 300, "LULL_WORKERS for lull")
	conns := flag.Int("smtp-connections", 100, "LULL_SMTP_CONNECTIONS for lull")
	only := flag.String("only", "", "run just these scenarios, comma-separated (ingest, fan-out, flush wave, render once, inline, overlap, shared flood, retraction, digest peak, mixed, scattered, growth), and print them")
	flag.Parse()
	if err := run(context.Background(), *quick, *workers, *conns, *only, *out); err != nil {
		fmt.Fprintln(os.Stderr, "lullbench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, quick bool, workers, conns int, only, out string) error {
	cwd, _ := os.Getwd()
	// A durable cluster (fsync on), so the figures and the pgbench
	// reference are what a real server gives.
	cluster, err := localpg.Ensure(ctx, localpg.DefaultDir(cwd, "benchpg"), false)
	if err != nil {
		return err
	}
	b := &bench{quick: quick, server: cluster.URL("postgres"), dbURL: cluster.URL("lull_bench"), report: newReport(quick, workers, conns),
		postmaster: postmasterPID(cluster.Dir)}
	b.pgBin = filepath.Dir(findPgbench())
	if err := b.freshDatabase(ctx); err != nil {
		return err
	}
	if b.smtp, err = listenSink(); err != nil {
		return err
	}
	defer b.smtp.Close()
	if b.lull, err = startLull(ctx, b.dbURL, b.smtp.URL(), workers, conns); err != nil {
		return err
	}
	defer b.lull.stop()
	if b.conn, err = pgx.Connect(ctx, b.dbURL); err != nil {
		return err
	}
	defer b.conn.Close(ctx)
	for _, sc := range []struct {
		name string
		fn   func(context.Context) error
	}{
		{"ingest", b.ingest},
		{"fan-out", b.fanOut},
		{"flush wave", b.flushWave},
		{"render once", b.renderOnce},
		{"inline", b.inline},
		{"overlap", b.overlap},
		{"shared flood", b.sharedFlood},
		{"retraction", b.retractionStorm},
		{"digest peak", b.digestPeak},
		{"mixed", b.mixedPreferences},
		{"scattered", b.scattered},
		{"growth", b.growth},
	} {
		if only != "" && !slices.Contains(strings.Split(only, ","), sc.name) {
			continue
		}
		fmt.Fprintf(os.Stderr, "== %s\n", sc.name)
		began := time.Now()
		if err := sc.fn(ctx); err != nil {
			return fmt.Errorf("%s: %w", sc.name, err)
		}
		fmt.Fprintf(os.Stderr, "  (took %s)\n", time.Since(began).Round(time.Second))
		b.report.memory(sc.name, b.lull.peakRSS())
	}
	if only != "" {
		return nil
	}
	b.report.micro(microBenchmarks(quick))
	return b.report.write(out)
}

func (b *bench) freshDatabase(ctx context.Context) error {
	c, err := pgx.Connect(ctx, b.server)
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	c.Exec(ctx, "DROP DATABASE IF EXISTS lull_bench WITH (FORCE)")
	_, err = c.Exec(ctx, "CREATE DATABASE lull_bench")
	return err
}

func findPgbench() string {
	if p, err := exec.LookPath("pgbench"); err == nil {
		return p
	}
	m, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pgbench")
	if len(m) > 0 {
		return m[len(m)-1]
	}
	return "pgbench"
}

// microBenchmarks runs the Go micro-benchmarks of the rules and rendering.
func microBenchmarks(quick bool) string {
	benchtime := "1s"
	if quick {
		benchtime = "300ms"
	}
	cmd := exec.Command("go", "test", "-run", "^$", "-bench", ".", "-benchtime", benchtime, "-benchmem", "./preferences/...", "./mailtemplates/...")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "micro-benchmarks failed: " + err.Error() + "\n" + string(out)
	}
	var keep []string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(l, "Benchmark") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

func machine() string {
	cpu := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "model name") {
				cpu = strings.TrimSpace(strings.SplitN(l, ":", 2)[1])
				break
			}
		}
	}
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		mem = strings.Fields(strings.SplitN(string(b), "\n", 2)[0])[1] + " kB RAM"
	}
	return fmt.Sprintf("%d cores (%s), %s, %s, %s", runtime.NumCPU(), cpu, mem, runtime.Version(), time.Now().UTC().Format("2006-01-02"))
}
