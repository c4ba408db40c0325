package mail

import (
	"context"
	"testing"
	"time"

	"github.com/lull-dev/lull/mail/smtptest"
	"github.com/lull-dev/lull/mailtemplates"
)

func TestIdleConnectionsClose(t *testing.T) {
	t.Parallel()
	srv := smtptest.Start(t)
	s, err := NewSMTP(SMTPConfig{URL: srv.URL(), Concurrency: 2}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	s.idleTimeout = 50 * time.Millisecond
	m := &mailtemplates.Message{From: "lull@example.com", To: "bob@example.com", Subject: "x", MessageID: "batch-1@example.com", Text: "x", HTML: "x"}
	if err := s.Send(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for srv.OpenConnections() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the idle connection is still open after %v", 5*time.Second)
		}
		time.Sleep(5 * time.Millisecond)
	}
	s.mu.Lock()
	idle := len(s.idle)
	s.mu.Unlock()
	if idle != 0 {
		t.Fatalf("%d connections left in the pool after they closed", idle)
	}
	if err := s.Send(context.Background(), m); err != nil {
		t.Fatalf("send after the idle connection closed: %v", err)
	}
	if c := srv.Connections(); c != 2 {
		t.Fatalf("%d connections, want 2", c)
	}
}

func TestLimiter(t *testing.T) {
	t.Parallel()
	l := newLimiter(100)
	start := time.Now()
	// The first 100 are the burst; the next 20 come at 100 a second.
	for range 120 {
		if err := l.wait(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if took := time.Since(start); took < 180*time.Millisecond {
		t.Fatalf("120 tokens at 100/s took %v, want at least 200ms", took)
	}
	slow := newLimiter(0.5)
	if err := slow.wait(context.Background()); err != nil {
		t.Fatalf("first token of a slow limiter: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := slow.wait(ctx); err != context.DeadlineExceeded {
		t.Fatalf("second token at 0.5/s within 20ms: %v, want the context's error", err)
	}
}
