package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lull-dev/lull/db/dbtest"
	"github.com/lull-dev/lull/db/localpg"
)

// syncBuffer is a bytes.Buffer safe for one writer and one reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

var listening = regexp.MustCompile(`listening on (http://\S+)`)

// boot runs "lull serve" in-process with env and returns its base URL;
// the server stops when the test ends.
func boot(t *testing.T, env map[string]string) string {
	t.Helper()
	return bootCommand(t, "serve", env)
}

// bootCommand is boot for "lull serve" or "lull demo".
func bootCommand(t *testing.T, command string, env map[string]string) string {
	t.Helper()
	base, _ := bootLogged(t, command, env)
	return base
}

// bootLogged is bootCommand that also returns what lull logs.
func bootLogged(t *testing.T, command string, env map[string]string) (string, *syncBuffer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var out syncBuffer
	logs := new(syncBuffer)
	done := make(chan error, 1)
	getenv := func(k string) string { return env[k] }
	go func() { done <- run(ctx, []string{command}, getenv, &out, logs) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("serve returned %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("serve did not stop within 30s after cancel")
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if m := listening.FindStringSubmatch(out.String()); m != nil {
			return m[1], logs
		}
		select {
		case err := <-done:
			t.Fatalf("serve exited: %v\n%s", err, logs.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	t.Fatalf("server did not start:\n%s", logs.String())
	return "", nil
}

func status(t *testing.T, url string) int {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

func TestServeAnswersHealthAndReady(t *testing.T) {
	t.Parallel()
	base := boot(t, map[string]string{"DATABASE_URL": dbtest.NewURL(t), "LULL_ADDR": "127.0.0.1:0"})
	for _, path := range []string{"/healthz", "/readyz"} {
		if got := status(t, base+path); got != http.StatusOK {
			t.Errorf("GET %s = %d, want 200", path, got)
		}
	}
}

// TestReadyzFollowsTheDatabase stops the database under a running lull:
// /readyz must answer 503 while it is down (and /healthz stay 200), then
// 200 again once it is back, without restarting lull.
func TestReadyzFollowsTheDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("lull-readyz-%d", time.Now().UnixNano()))
	cluster, err := localpg.Ensure(ctx, dir, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cluster.Stop(ctx); os.RemoveAll(dir) })
	if err := createDatabase(ctx, cluster.URL("postgres"), "lull"); err != nil {
		t.Fatal(err)
	}
	base := boot(t, map[string]string{"DATABASE_URL": cluster.URL("lull"), "LULL_ADDR": "127.0.0.1:0"})
	if got := status(t, base+"/readyz"); got != http.StatusOK {
		t.Fatalf("readyz = %d before the outage, want 200", got)
	}
	if err := cluster.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if got := status(t, base+"/readyz"); got != http.StatusServiceUnavailable {
		t.Fatalf("readyz = %d with the database down, want 503", got)
	}
	if got := status(t, base+"/healthz"); got != http.StatusOK {
		t.Fatalf("healthz = %d with the database down, want 200", got)
	}
	if err := cluster.Start(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for status(t, base+"/readyz") != http.StatusOK {
		if time.Now().After(deadline) {
			t.Fatal("readyz did not recover after the database came back")
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func TestConfigFlagsOverrideEnvironment(t *testing.T) {
	t.Parallel()
	env := map[string]string{"LULL_ADDR": ":1111", "LULL_DELIVERY": "at-most-once"}
	c, err := loadConfig([]string{"-LULL_ADDR=:2222"}, func(k string) string { return env[k] }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c.Addr != ":2222" || c.Delivery != "at-most-once" || c.MailFrom != "notifications@localhost" {
		t.Fatalf("config = %+v", c)
	}
	if _, err := loadConfig(nil, func(k string) string {
		return map[string]string{"LULL_DELIVERY": "sometimes"}[k]
	}, io.Discard); err == nil || !strings.Contains(err.Error(), "LULL_DELIVERY") {
		t.Fatalf("a bad LULL_DELIVERY gave %v, want an error naming it", err)
	}
}
