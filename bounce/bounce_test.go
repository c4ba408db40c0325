package bounce

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// recorder is a Sink that keeps what it is given.
type recorder struct {
	mu      sync.Mutex
	reports []Report
	err     error
}

func (r *recorder) Record(_ context.Context, rep Report) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return r.err
	}
	r.reports = append(r.reports, rep)
	return nil
}

func (r *recorder) all() []Report {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Report(nil), r.reports...)
}

var testVERP = VERP{Domain: "bounces.example.com", Secret: []byte("0123456789abcdef0123456789abcdef")}

var testNow = time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)

// sample reads a testdata email with {{RCPT}} replaced by rcpt.
func sample(t testing.TB, name, rcpt string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	s := strings.ReplaceAll(string(b), "{{RCPT}}", rcpt)
	return strings.ReplaceAll(strings.ReplaceAll(s, "\r\n", "\n"), "\n", "\r\n")
}
