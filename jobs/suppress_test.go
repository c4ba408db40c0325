package jobs_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lull-dev/lull/bounce"
	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/db/suppress"
)

// sink records reports on the test's database and clock.
func (b *testBundle) sink() *suppress.Sink {
	return &suppress.Sink{DB: b.db, Now: b.clock.Now}
}

func (b *testBundle) report(t *testing.T, r bounce.Report) {
	t.Helper()
	if err := b.sink().Record(context.Background(), r); err != nil {
		t.Fatalf("record %s: %v", r.Kind, err)
	}
}

func TestHardBounceSkipsTheNextBatchAsBounced(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.saveType(t, db.Type{Key: "comment", DefaultMode: "cooldown"})
	b.recipient(t, "bob", "UTC")
	first := b.post(t, "comment", "alice", "bob").Batches[0].ID
	b.clock.Advance(time.Hour)
	b.flushDue(t)
	id := b.post(t, "comment", "alice", "bob").Batches[0].ID
	// The bounce of the first email arrives while the next batch waits,
	// naming the address in another case than it was sent with.
	b.report(t, bounce.Report{Address: "BOB@Example.COM", Kind: bounce.Hard, Status: "5.1.1", BatchID: first, Source: "smtp"})
	b.clock.Advance(time.Hour)
	b.flushDue(t)
	if got := b.batch(t, id); got.State != db.StateCanceled || got.Reason != db.SkipBounced {
		t.Fatalf("batch %s (%q), want canceled as bounced", got.State, got.Reason)
	}
	if n := b.count(t, "SELECT count(*) FROM skips WHERE reason = $1 AND batch_id = $2", db.SkipBounced, id); n != 1 {
		t.Fatalf("skip log has %d bounced entries, want 1", n)
	}
	if got := len(b.outbox(t)); got != 1 {
		t.Fatalf("%d emails, want only the one that bounced", got)
	}
}

func TestSoftBouncesOverTheThresholdSuppress(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.saveType(t, db.Type{Key: "comment", DefaultMode: "cooldown"})
	b.recipient(t, "bob", "UTC")
	soft := func(batch int64) {
		// A service's webhook names its own message references; the
		// receiver's batch check (TestForgedBounceSuppressesNobody) is
		// not what this test is about.
		b.report(t, bounce.Report{Address: "bob@example.com", Kind: bounce.Soft, Status: "4.2.2", BatchID: batch, Source: "mailgun"})
	}
	// One report heard three times counts once.
	for range 3 {
		soft(1)
	}
	soft(2)
	id := b.post(t, "comment", "alice", "bob").Batches[0].ID
	b.clock.Advance(time.Hour)
	b.flushDue(t)
	if got := b.batch(t, id); got.State != db.StateSent {
		t.Fatalf("batch %s (%q) after two soft bounces, want sent", got.State, got.Reason)
	}
	soft(3)
	id = b.post(t, "comment", "alice", "bob").Batches[0].ID
	b.clock.Advance(time.Hour)
	b.flushDue(t)
	if got := b.batch(t, id); got.State != db.StateCanceled || got.Reason != db.SkipBounced {
		t.Fatalf("batch %s (%q) after three soft bounces, want canceled as bounced", got.State, got.Reason)
	}
}

func TestDecayedSoftBouncesDoNotSuppress(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.saveType(t, db.Type{Key: "comment", DefaultMode: "cooldown"})
	b.recipient(t, "bob", "UTC")
	for batch := range int64(5) {
		b.report(t, bounce.Report{Address: "bob@example.com", Kind: bounce.Soft, BatchID: batch + 1, Source: "mailgun"})
		b.clock.Advance(suppress.DefaultDecay + time.Hour)
	}
	id := b.post(t, "comment", "alice", "bob").Batches[0].ID
	b.clock.Advance(time.Hour)
	b.flushDue(t)
	if got := b.batch(t, id); got.State != db.StateSent {
		t.Fatalf("batch %s (%q) after soft bounces a decay apart, want sent", got.State, got.Reason)
	}
}

func TestComplaintKeepsRequiredTypesAndStopsOthers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.saveType(t, db.Type{Key: "security", DefaultMode: "daily", Required: true})
	b.saveType(t, db.Type{Key: "comment", DefaultMode: "daily"})
	b.saveType(t, db.Type{Key: "share", DefaultMode: "cooldown"})
	b.recipient(t, "bob", "UTC")
	digest := b.post(t, "comment", "alice", "bob").Batches[0].ID
	b.post(t, "security", "system", "bob")
	share := b.post(t, "share", "alice", "bob").Batches[0].ID
	b.report(t, bounce.Report{Address: "bob@example.com", Kind: bounce.Complaint, Status: "abuse", BatchID: digest, Source: "smtp"})

	b.clock.Advance(24 * time.Hour)
	b.flushDue(t)
	if got := b.batch(t, share); got.State != db.StateCanceled || got.Reason != db.SkipComplained {
		t.Fatalf("share batch %s (%q), want canceled as complained", got.State, got.Reason)
	}
	if got := b.batch(t, digest); got.State != db.StateSent {
		t.Fatalf("digest %s (%q), want sent with the security alert", got.State, got.Reason)
	}
	if n := b.count(t, "SELECT coalesce(sum(items), 0) FROM skips WHERE reason = $1 AND batch_id = $2 AND type_key = 'comment'", db.SkipComplained, digest); n != 1 {
		t.Fatalf("skip log has %d complained comments in the digest, want 1", n)
	}
	if n := b.count(t, "SELECT count(*) FROM recipients WHERE id = 'bob' AND unsubscribed"); n != 1 {
		t.Fatal("a complaint left the recipient subscribed")
	}
	if res := b.post(t, "security", "system", "bob"); res.Notifications != 1 {
		t.Fatal("a required type stopped arriving after a complaint")
	}
}

// TestBounceRacingAFlush: a hard bounce recorded while the batch's flush
// runs either lands before the flush looks (the batch is skipped) or
// after (the email goes); never both, never neither. Any flush after
// Record returned skips.
func TestBounceRacingAFlush(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.saveType(t, db.Type{Key: "comment", DefaultMode: "cooldown"})
	ctx := context.Background()
	for i := range 10 {
		rid := "r" + itoa(int64(i))
		b.recipient(t, rid, "UTC")
		first := b.post(t, "comment", "alice", rid).Batches[0].ID
		b.clock.Advance(time.Hour)
		var wg sync.WaitGroup
		wg.Go(func() {
			if err := b.sink().Record(ctx, bounce.Report{Address: rid + "@example.com", Kind: bounce.Hard, BatchID: first, Source: "smtp"}); err != nil {
				t.Error(err)
			}
		})
		wg.Go(func() {
			if err := b.work(ctx, first, 1); err != nil {
				t.Error(err)
			}
		})
		wg.Wait()
		got := b.batch(t, first)
		sent := b.count(t, "SELECT count(*) FROM outbox WHERE batch_id = $1", first)
		if !(got.State == db.StateSent && sent == 1) && !(got.State == db.StateCanceled && got.Reason == db.SkipBounced && sent == 0) {
			t.Fatalf("batch %s (%q) with %d emails", got.State, got.Reason, sent)
		}
		next := b.post(t, "comment", "alice", rid).Batches[0].ID
		b.clock.Advance(time.Hour)
		b.flushDue(t)
		if got := b.batch(t, next); got.Reason != db.SkipBounced {
			t.Fatalf("batch after the bounce %s (%q), want canceled as bounced", got.State, got.Reason)
		}
	}
}

func TestBadReportIsRefusedAndSuppressesNobody(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, r := range []bounce.Report{
		{Address: "", Kind: bounce.Hard},
		{Address: "not an address", Kind: bounce.Hard},
		{Address: "bob@example.com", Kind: "bogus"},
		{Address: "bob@example.com\x00", Kind: bounce.Hard},
		{Address: "bob@example.com\r\nbcc: x", Kind: bounce.Hard},
		{Address: "bob@\xff.com", Kind: bounce.Hard},
		{Address: strings.Repeat("a", 400) + "@example.com", Kind: bounce.Hard},
	} {
		if err := b.sink().Record(context.Background(), r); !errors.Is(err, db.ErrBadReport) {
			t.Errorf("report %+v: %v, want ErrBadReport", r, err)
		}
	}
	if n := b.count(t, "SELECT count(*) FROM suppressions"); n != 0 {
		t.Fatalf("%d suppressions from bad reports", n)
	}
}

// TestForgedBounceSuppressesNobody: a bounce heard over SMTP is held to
// the batch its signed return path names. Whoever got that email could
// name another address, or a batch no longer known; both are refused, and
// a complaint whose feedback loop removed the address gets the batch's.
func TestForgedBounceSuppressesNobody(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.saveType(t, db.Type{Key: "comment", DefaultMode: "cooldown"})
	b.recipient(t, "mallory", "UTC")
	b.recipient(t, "bob", "UTC")
	theirs := b.post(t, "comment", "alice", "mallory").Batches[0].ID
	ctx := context.Background()
	for _, r := range []bounce.Report{
		{Address: "bob@example.com", Kind: bounce.Hard, Status: "5.1.1", BatchID: theirs, Source: "smtp"},
		{Address: "bob@example.com", Kind: bounce.Complaint, BatchID: theirs, Source: "smtp"},
		{Address: "bob@example.com", Kind: bounce.Hard, BatchID: theirs + 1000, Source: "smtp"},
	} {
		if err := b.sink().Record(ctx, r); !errors.Is(err, bounce.ErrRefused) {
			t.Errorf("%+v: %v, want refused", r, err)
		}
	}
	if n := b.count(t, "SELECT count(*) FROM suppressions"); n != 0 {
		t.Fatalf("%d suppressions after forged reports", n)
	}
	b.report(t, bounce.Report{Kind: bounce.Complaint, Status: "abuse", BatchID: theirs, Source: "smtp"})
	if n := b.count(t, "SELECT count(*) FROM suppressions WHERE address = 'mallory@example.com' AND reason = 'complaint'"); n != 1 {
		t.Fatal("a complaint without an address did not suppress the batch's address")
	}
}
