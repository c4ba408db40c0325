package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lull-dev/lull/db/dbtest"
	"github.com/lull-dev/lull/mail/smtptest"
)

// TestMain lets a test start this test binary as a real lull process (to
// kill it with SIGKILL) by setting LULL_TEST_SERVE.
func TestMain(m *testing.M) {
	if os.Getenv("LULL_TEST_SERVE") == "1" {
		// As main does: SIGTERM and Ctrl-C start a graceful shutdown.
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		if every, err := time.ParseDuration(os.Getenv("LULL_TEST_STATS")); err == nil {
			go reportStats(every)
		}
		if err := run(ctx, []string{"serve"}, os.Getenv, os.Stdout, os.Stderr); err != nil {
			fmt.Fprintln(os.Stderr, err)
			stop()
			os.Exit(1)
		}
		stop()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// reportStats prints the process's goroutines and live heap (after a
// collection) every interval, for the soak test to read from its output.
func reportStats(every time.Duration) {
	for range time.Tick(every) {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		fmt.Fprintf(os.Stderr, "lull-test-stats t=%d goroutines=%d heap=%d\n", time.Now().UnixMilli(), runtime.NumGoroutine(), m.HeapAlloc)
	}
}

// process is a lull started as a child process.
type process struct {
	cmd  *exec.Cmd
	out  *syncBuffer
	base string
}

func startProcess(t *testing.T, env map[string]string) *process {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "LULL_TEST_SERVE=1", "LULL_ADDR=127.0.0.1:0")
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	p := &process{cmd: cmd, out: &syncBuffer{}}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if m := listening.FindStringSubmatch(p.out.String()); m != nil {
			p.base = m[1]
			return p
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("lull did not start:\n%s", p.out.String())
	return nil
}

func (p *process) kill(t *testing.T) {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGKILL)
	p.cmd.Wait()
}

func (p *process) post(t *testing.T, path, key, body string) {
	t.Helper()
	req, _ := http.NewRequest("POST", p.base+path, strings.NewReader(body))
	if strings.HasPrefix(path, "/api/v1/types") || strings.HasPrefix(path, "/api/v1/recipients") {
		req.Method = "PUT"
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	resp.Body.Close()
	if resp.StatusCode >= 300 {
		t.Fatalf("%s: %d %s", path, resp.StatusCode, b.String())
	}
}

// crashMidSend starts lull with env plus an SMTP server that holds DATA,
// posts one immediate event, kills lull with SIGKILL while the email is in
// the middle of DATA (the server never gets it whole), and starts a new
// lull on the same database. It returns the SMTP server and the env used.
func crashMidSend(t *testing.T, env map[string]string) (*smtptest.Server, map[string]string) {
	t.Helper()
	smtp := smtptest.Start(t)
	smtp.Hold()
	env["DATABASE_URL"], env["LULL_SMTP_URL"], env["LULL_API_KEY"] = dbtest.NewURL(t), smtp.URL(), "crash-test-key"
	env["LULL_JOB_TIMEOUT"], env["LULL_RESCUE_AFTER"], env["LULL_MAIL_FROM"] = "5s", "6s", "lull@example.com"
	a := startProcess(t, env)
	a.post(t, "/api/v1/types/alert", "crash-test-key", `{"default_mode":"immediate"}`)
	a.post(t, "/api/v1/events", "crash-test-key", `{"type":"alert","recipients":[{"id":"bob","email":"bob@example.com"}]}`)
	waitUntil(t, 20*time.Second, "the email to be in flight", func() bool { return smtp.InFlight() == 1 })
	a.kill(t)
	smtp.Release(false)
	startProcess(t, env)
	return smtp, env
}

// TestCrashMidSendIsDeliveredAfterRestart: after a crash mid-send, the
// restarted process sends the batch (at-least-once) with its Message-ID.
func TestCrashMidSendIsDeliveredAfterRestart(t *testing.T) {
	t.Parallel()
	smtp, env := crashMidSend(t, map[string]string{})
	got := smtp.WaitFor(t, 1, 60*time.Second)
	if id := got[0].Header.Get("Message-Id"); !strings.HasPrefix(id, "<batch-") {
		t.Fatalf("Message-ID %q is not derived from the batch", id)
	}
	waitUntil(t, 10*time.Second, "the batch to be recorded sent", func() bool {
		return queryInt(t, env["DATABASE_URL"], "SELECT count(*) FROM batches WHERE state = 'sent'") == 1
	})
	if n := len(smtp.Messages()); n != 1 {
		t.Fatalf("%d emails delivered, want 1", n)
	}
}

// TestCrashMidSendAtMostOnceIsFlaggedPossiblyLost: the same crash with
// LULL_DELIVERY=at-most-once sends nothing twice and lists the delivery as
// possibly lost.
func TestCrashMidSendAtMostOnceIsFlaggedPossiblyLost(t *testing.T) {
	t.Parallel()
	smtp, env := crashMidSend(t, map[string]string{"LULL_DELIVERY": "at-most-once"})
	waitUntil(t, 60*time.Second, "the delivery to be flagged possibly lost", func() bool {
		return queryInt(t, env["DATABASE_URL"], "SELECT count(*) FROM deliveries WHERE possibly_lost") == 1
	})
	if n := len(smtp.Messages()); n != 0 {
		t.Fatalf("at-most-once sent %d emails after the crash, want 0", n)
	}
}

func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func queryInt(t *testing.T, url, sql string) int {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, sql).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
