package jobs_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/jobs"
	"github.com/lull-dev/lull/mail"
	"github.com/lull-dev/lull/mail/smtptest"
)

// running is a bundle whose flush jobs are worked by a started River
// client on real time, as in production, with a short retry backoff so an
// outage and its retries fit in seconds.
func running(t *testing.T, srv *smtptest.Server, retryBase time.Duration) *testBundle {
	t.Helper()
	b := setup(t)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	s, err := mail.NewSMTP(mail.SMTPConfig{URL: srv.URL()}, logger)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	b.withSender(s)
	b.flush.Now, b.engine.Now = nil, nil
	b.flush.RetryBase = retryBase
	client, err := jobs.NewClient(b.db, jobs.Config{
		Workers: 20, JobTimeout: 10 * time.Second, RescueAfter: time.Hour, SweepEvery: time.Hour,
		Retention: 720 * time.Hour, FetchCooldown: 10 * time.Millisecond, FetchPollInterval: 50 * time.Millisecond,
	}, b.flush, logger, false)
	if err != nil {
		t.Fatal(err)
	}
	if err := client.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		client.Stop(ctx)
	})
	b.client = client
	b.engine.Scheduler = &jobs.Scheduler{Client: client}
	return b
}

// TestSMTPOutageRetriesWithBackoffAndDrains takes the mail server down
// (connections refused) while emails are due, brings it back with a few
// 451 answers still to give, and keeps one mailbox refused with 550 for
// good. Every email must arrive exactly once after the outage, each having
// been retried with a growing backoff rather than dropped; the 451s must
// be retried too; and the 550 must fail its batch at once, with the
// server's answer on the batch and the delivery for operators to read.
func TestSMTPOutageRetriesWithBackoffAndDrains(t *testing.T) {
	t.Parallel()
	srv := smtptest.Start(t, smtptest.KeepAll())
	b := running(t, srv, 200*time.Millisecond)
	ctx := context.Background()
	b.saveType(t, db.Type{Key: "alert", DefaultMode: "immediate", BurstLimit: 100})
	const n = 20
	var good []int64
	srv.Down()
	for i := range n {
		rid := fmt.Sprintf("r%02d", i)
		b.recipient(t, rid, "UTC")
		good = append(good, b.post(t, "alert", "system", rid).Batches[0].ID)
	}
	b.recipient(t, "gone", "UTC")
	srv.RefuseRcpt("gone@example.com", 550, "5.1.1 no such user")
	bad := b.post(t, "alert", "system", "gone").Batches[0].ID

	// Down for 2.5 s: with a 200 ms base every email is tried about four
	// times, each refused.
	waitFor(t, 10*time.Second, "every delivery to be tried at least three times", func() bool {
		return b.count(t, "SELECT count(*) FROM deliveries WHERE attempts >= 3") == n+1
	})
	time.Sleep(2500*time.Millisecond - time.Since(b.firstAttempt(t)))
	if got := len(srv.Messages()); got != 0 {
		t.Fatalf("%d messages arrived while the server was down", got)
	}
	srv.FailNext(451, "4.3.0 try again later", 3)
	if err := srv.Up(); err != nil {
		t.Fatal(err)
	}

	waitFor(t, 30*time.Second, "the backlog to drain", func() bool {
		return b.count(t, "SELECT count(*) FROM batches WHERE state IN ('open', 'flushing')") == 0
	})
	counts := srv.BatchCounts()
	for _, id := range good {
		if got := counts[id]; got != 1 {
			t.Errorf("batch %d: %d emails after the outage, want 1", id, got)
		}
		bt := b.batch(t, id)
		d, err := db.GetDeliveryByBatch(ctx, b.db.Pool, id)
		if err != nil {
			t.Fatal(err)
		}
		if bt.State != db.StateSent || d.State != "sent" || d.Attempts < 3 {
			t.Errorf("batch %d is %s, delivery %s after %d attempts; want sent after at least 3", id, bt.State, d.State, d.Attempts)
		}
		b.checkBackoff(t, d.ID)
	}
	if len(counts) != n {
		t.Errorf("%d distinct emails arrived, want %d", len(counts), n)
	}
	if got := b.count(t, "SELECT count(*) FROM delivery_attempts WHERE answer LIKE '451%'"); got != 3 {
		t.Errorf("%d attempts logged the 451 answer, want 3 (each then retried)", got)
	}

	bt := b.batch(t, bad)
	d, err := db.GetDeliveryByBatch(ctx, b.db.Pool, bad)
	if err != nil {
		t.Fatal(err)
	}
	attempts, _ := db.DeliveryAttempts(ctx, b.db.Pool, d.ID)
	last := attempts[len(attempts)-1]
	if bt.State != db.StateFailed || !strings.Contains(bt.Reason, "550 5.1.1 no such user") ||
		d.State != "failed" || !strings.Contains(d.LastError, "550") || last.OK || !strings.HasPrefix(last.Answer, "550") {
		t.Fatalf("refused mailbox: batch %s (%q), delivery %s (%q), last attempt %+v; want failed with the 550 answer",
			bt.State, bt.Reason, d.State, d.LastError, last)
	}
	if got := b.count(t, "SELECT count(*) FROM river_job WHERE kind = 'flush_batch' AND state = 'cancelled' AND args->>'batch_id' = $1", itoa(bad)); got != 1 {
		t.Fatalf("the 550's flush job was not cancelled (%d), so it would be retried", got)
	}
	t.Logf("outage: %d emails delivered once each after %d refused attempts; 3 answers of 451 retried; 1 mailbox failed with %q after %d attempts",
		n, b.count(t, "SELECT count(*) FROM delivery_attempts WHERE NOT ok AND answer NOT LIKE '4%' AND answer NOT LIKE '5%'"), d.LastError, d.Attempts)
}

// firstAttempt is when the first SMTP attempt of the test was logged.
func (b *testBundle) firstAttempt(t *testing.T) time.Time {
	t.Helper()
	var at time.Time
	if err := b.db.Pool.QueryRow(context.Background(), "SELECT min(at) FROM delivery_attempts").Scan(&at); err != nil {
		t.Fatal(err)
	}
	return at
}

// checkBackoff checks that the attempts of a delivery came no sooner than
// the backoff allows: the wait after attempt n is at least RetryBase
// doubled n-1 times, less the 20% jitter (River may add to it, never take
// from it). A retry loop without backoff, or one at a fixed pace, fails.
func (b *testBundle) checkBackoff(t *testing.T, deliveryID int64) {
	t.Helper()
	attempts, err := db.DeliveryAttempts(context.Background(), b.db.Pool, deliveryID)
	if err != nil {
		t.Fatal(err)
	}
	if len(attempts) < 3 {
		t.Errorf("delivery %d: %d attempts, want retried failures", deliveryID, len(attempts))
	}
	for i := 1; i < len(attempts); i++ {
		gap := attempts[i].At.Sub(attempts[i-1].At)
		if least := b.flush.RetryBase << (i - 1) * 8 / 10; gap < least {
			t.Errorf("delivery %d: attempt %d came %v after the one before, want at least %v", deliveryID, i+1, gap, least)
		}
	}
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
