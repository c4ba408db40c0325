package main

import (
	"fmt"
	"net/http"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lull-dev/lull/db/dbtest"
	"github.com/lull-dev/lull/mail/smtptest"
)

// TestSoak runs lull for LULL_SOAK (a duration such as 5m) at a fixed
// ingest rate, LULL_SOAK_RATE events a second (default 100), with batches
// closing and emails going out over SMTP all along. It is opt-in: without
// LULL_SOAK it skips. It passes when every request was acknowledged, lull
// logged no error, every acknowledged event was delivered, no email went
// out twice, and lull's memory (RSS and live heap) and goroutine count in
// the last minute stayed within a tolerance of the first minute's, which
// is what a leak of connections, timers, goroutines or cached rows breaks.
func TestSoak(t *testing.T) {
	spec := os.Getenv("LULL_SOAK")
	if spec == "" {
		t.Skip("set LULL_SOAK to a duration (LULL_SOAK=5m) to run the soak test")
	}
	dur, err := time.ParseDuration(spec)
	if err != nil || dur < time.Minute {
		t.Fatalf("LULL_SOAK=%q: want a duration of at least 1m", spec)
	}
	rate := 100.0
	if r := os.Getenv("LULL_SOAK_RATE"); r != "" {
		if rate, err = strconv.ParseFloat(r, 64); err != nil || rate <= 0 {
			t.Fatalf("LULL_SOAK_RATE=%q: want events per second", r)
		}
	}
	// The window compared at both ends: a minute, or a quarter of a short
	// run.
	window := min(time.Minute, dur/4)

	smtp := smtptest.Start(t)
	dbURL := dbtest.NewURL(t)
	env := faultEnv(dbURL, smtp)
	// Production timeouts: nothing is killed here.
	delete(env, "LULL_JOB_TIMEOUT")
	delete(env, "LULL_RESCUE_AFTER")
	env["LULL_TEST_STATS"] = "5s"
	p := startProcess(t, env)
	p.post(t, "/api/v1/types/soak", faultAPIKey, cooldownType)
	load := newLoad("soak", 200, 2, p.base)

	start := time.Now()
	stop := load.start(16, rate)
	var rss series
	for time.Since(start) < dur {
		time.Sleep(5 * time.Second)
		rss = append(rss, sample{time.Now(), float64(residentBytes(t, p.cmd.Process.Pid))})
	}
	stop()
	end := time.Now()
	waitDrained(t, dbURL, 2*time.Minute)

	// No errors: every request acknowledged, nothing logged at ERROR.
	reqs := load.log()
	failed := 0
	for _, r := range reqs {
		if r.status != http.StatusAccepted && !r.canceled {
			if failed++; failed <= 10 {
				t.Errorf("%s: answered %d %q after %v", r.key, r.status, r.problem, r.took)
			}
		}
	}
	out := p.out.String()
	if n := strings.Count(out, "level=ERROR"); n > 0 {
		i := strings.Index(out, "level=ERROR")
		t.Errorf("lull logged %d errors, the first:\n%s", n, out[i:min(len(out), i+500)])
	}
	checkProcessLog(t, p)

	// Nothing lost, nothing twice.
	batches := load.checkAcknowledged(t, dbURL, "sent")
	sent := queryInt(t, dbURL, "SELECT count(*) FROM batches WHERE state = 'sent'")
	if got := smtp.Received(); got != sent {
		t.Errorf("the SMTP server received %d emails for %d sent batches", got, sent)
	}

	// Flat: compare the first and the last window.
	goroutines, heap := parseStats(out)
	type measure struct {
		name         string
		series       series
		ratio, slack float64
		of           func(series, time.Time, time.Time) float64
	}
	var report []string
	for _, m := range []measure{
		{"RSS", rss, 1.25, 16 << 20, series.mean},
		{"live heap", heap, 1.25, 8 << 20, series.mean},
		// Goroutines by their floor: requests and sends in flight come and
		// go with the machine's load, while leaked ones stay and raise it.
		{"goroutines", goroutines, 1.10, 20, series.floor},
	} {
		first, last := m.of(m.series, start, start.Add(window)), m.of(m.series, end.Add(-window), end)
		if first == 0 || last == 0 {
			t.Errorf("%s: no samples in the first or last %v", m.name, window)
			continue
		}
		if last > first*m.ratio+m.slack {
			t.Errorf("%s grew from %.0f in the first %v to %.0f in the last", m.name, first, window, last)
		}
		report = append(report, fmt.Sprintf("%s %s -> %s", m.name, human(m.name, first), human(m.name, last)))
		var steps []string
		for at := start; !at.Add(window).After(end); at = at.Add(window) {
			steps = append(steps, human(m.name, m.of(m.series, at, at.Add(window))))
		}
		t.Logf("%s by %v: %s", m.name, window, strings.Join(steps, ", "))
	}
	first, last := latencyP99(reqs, start, start.Add(window)), latencyP99(reqs, end.Add(-window), end)
	t.Logf("soak %v at %.0f events/s: %d events acknowledged, %d failed; %d batches, %d emails, all delivered once; %s; p99 ingest latency %v -> %v",
		dur, rate, load.ackedCount(), failed, len(batches), sent, strings.Join(report, ", "), first.Round(time.Millisecond), last.Round(time.Millisecond))
}

// sample is one measurement at a time.
type sample struct {
	at time.Time
	v  float64
}

type series []sample

// floor is the smallest sample taken in [from, to), 0 if none.
func (s series) floor(from, to time.Time) float64 {
	low := 0.0
	for _, x := range s {
		if !x.at.Before(from) && x.at.Before(to) && (low == 0 || x.v < low) {
			low = x.v
		}
	}
	return low
}

// mean is the average of the samples taken in [from, to).
func (s series) mean(from, to time.Time) float64 {
	var sum float64
	var n int
	for _, x := range s {
		if !x.at.Before(from) && x.at.Before(to) {
			sum += x.v
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return sum / float64(n)
}

var statsLine = regexp.MustCompile(`lull-test-stats t=(\d+) goroutines=(\d+) heap=(\d+)`)

// parseStats reads the lines reportStats printed.
func parseStats(out string) (goroutines, heap series) {
	for _, m := range statsLine.FindAllStringSubmatch(out, -1) {
		ms, _ := strconv.ParseInt(m[1], 10, 64)
		g, _ := strconv.ParseFloat(m[2], 64)
		h, _ := strconv.ParseFloat(m[3], 64)
		at := time.UnixMilli(ms)
		goroutines = append(goroutines, sample{at, g})
		heap = append(heap, sample{at, h})
	}
	return goroutines, heap
}

// residentBytes reads a process's resident set size from /proc.
func residentBytes(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("read the process's memory: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10
		}
	}
	t.Fatal("no VmRSS in /proc status")
	return 0
}

// latencyP99 is the 99th percentile of the answers to requests made in
// [from, to).
func latencyP99(reqs []request, from, to time.Time) time.Duration {
	var ds []time.Duration
	for _, r := range reqs {
		if !r.start.Before(from) && r.start.Before(to) && !r.canceled {
			ds = append(ds, r.took)
		}
	}
	if len(ds) == 0 {
		return 0
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[len(ds)*99/100]
}

func human(name string, v float64) string {
	if name == "goroutines" {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.1f MiB", v/(1<<20))
}
