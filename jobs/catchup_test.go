package jobs_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/preferences/batching"
)

// seen records a recipient's last visit days before the test clock.
func (b *testBundle) seen(t *testing.T, rid string, daysAgo int) {
	t.Helper()
	at := b.clock.Now().Add(-time.Duration(daysAgo) * 24 * time.Hour)
	if err := db.TouchSeen(context.Background(), b.db.Pool, rid, at); err != nil {
		t.Fatal(err)
	}
}

// batchOf is the batch res put rid's notification in.
func batchOf(t *testing.T, res *batching.IngestResult, rid string) batching.BatchRef {
	t.Helper()
	for _, ref := range res.Batches {
		if ref.Recipient == rid {
			return ref
		}
	}
	t.Fatalf("no batch for %s in %+v", rid, res.Batches)
	return batching.BatchRef{}
}

func catchUpBundle(t *testing.T) *testBundle {
	b := setup(t)
	week := 7
	b.saveType(t, db.Type{Key: "comment.created", DefaultMode: "daily", CatchUpDays: &week})
	b.saveType(t, db.Type{Key: "mention", DefaultMode: "daily"})
	for _, id := range []string{"ann", "bob", "cy"} {
		b.recipient(t, id, "UTC")
	}
	b.seen(t, "ann", 10) // absent past the type's 7 days
	b.seen(t, "bob", 1)  // active; cy was never seen
	return b
}

func TestCatchUpSlowsAnAbsentRecipientsDailyDigestToWeekly(t *testing.T) {
	b := catchUpBundle(t)
	res := b.post(t, "comment.created", "dan", "ann", "bob", "cy")
	ann, bob, cy := batchOf(t, res, "ann"), batchOf(t, res, "bob"), batchOf(t, res, "cy")
	if ann.BatchKey != "digest:weekly" || bob.BatchKey != "digest:daily" || cy.BatchKey != "digest:daily" {
		t.Fatalf("batch keys ann %s, bob %s, cy %s; want the weekly digest for ann alone", ann.BatchKey, bob.BatchKey, cy.BatchKey)
	}
	if res.Suppressed != 0 {
		t.Fatalf("suppressed %d; a slowed notification is delayed, not suppressed", res.Suppressed)
	}
	skips, err := db.ListSkips(context.Background(), b.db.Pool, 0, "ann", 10)
	if err != nil {
		t.Fatal(err)
	}
	since := b.clock.Now().Add(-10 * 24 * time.Hour)
	if len(skips) != 1 || skips[0].Reason != db.SlowedReason(since) || skips[0].EventID == nil || skips[0].BatchID == nil || *skips[0].BatchID != ann.ID {
		t.Fatalf("ann's skip log %+v; want one %q", skips, db.SlowedReason(since))
	}
	if !strings.HasPrefix(skips[0].Reason, "slowed: recipient absent since 2026-11-13") {
		t.Fatalf("reason %q", skips[0].Reason)
	}

	// A replay (the simulator) sees each recipient once: the slowed one
	// was delayed, not suppressed.
	var named []string
	err = db.StreamSimulationEvents(context.Background(), b.db.Pool, time.Time{}, time.Now().Add(time.Hour), func(ev *db.SimulationEvent) error {
		named = append(named, ev.Recipients...)
		return nil
	})
	if err != nil || strings.Join(named, ",") != "ann,bob,cy" {
		t.Fatalf("a replay names %v (%v), want ann, bob and cy once", named, err)
	}

	// At the daily digest time bob's email goes and ann's waits for her
	// weekly digest, which then carries it.
	b.clock.Set(bob.ClosesAt)
	if n := b.flushDue(t); n != 2 {
		t.Fatalf("flushed %d batches at the daily time, want bob's and cy's", n)
	}
	if !ann.ClosesAt.After(bob.ClosesAt.Add(24 * time.Hour)) {
		t.Fatalf("ann's digest closes %v, not later than a day after bob's %v", ann.ClosesAt, bob.ClosesAt)
	}
	b.clock.Set(ann.ClosesAt)
	if n := b.flushDue(t); n != 1 {
		t.Fatalf("flushed %d batches at the weekly time, want ann's", n)
	}
	if got := len(b.outbox(t)); got != 3 {
		t.Fatalf("%d emails, want 3", got)
	}
}

func TestCatchUpLeavesATypeWithoutItAlone(t *testing.T) {
	b := catchUpBundle(t)
	res := b.post(t, "mention", "dan", "ann")
	if k := batchOf(t, res, "ann").BatchKey; k != "digest:daily" {
		t.Fatalf("ann's mention went to %s, want the daily digest", k)
	}
	if skips, _ := db.ListSkips(context.Background(), b.db.Pool, 0, "ann", 10); len(skips) != 0 {
		t.Fatalf("skip log %+v, want none", skips)
	}
}

func TestCatchUpEndsWhenTheRecipientComesBack(t *testing.T) {
	b := catchUpBundle(t)
	if k := batchOf(t, b.post(t, "comment.created", "dan", "ann"), "ann").BatchKey; k != "digest:weekly" {
		t.Fatalf("absent: %s, want the weekly digest", k)
	}
	b.seen(t, "ann", 0)
	if k := batchOf(t, b.post(t, "comment.created", "dan", "ann"), "ann").BatchKey; k != "digest:daily" {
		t.Fatalf("back: %s, want the daily digest again", k)
	}
}

// TestCatchUpKeepsWhatWaitedWhenTheRecipientComesBack: a notification
// slowed while the recipient was away stays in their weekly digest after
// they come back (the feed shows it already); it is neither lost nor sent
// twice, and the next one goes out at the daily time without it.
func TestCatchUpKeepsWhatWaitedWhenTheRecipientComesBack(t *testing.T) {
	b := catchUpBundle(t)
	weekly := batchOf(t, b.post(t, "comment.created", "dan", "ann"), "ann")
	b.seen(t, "ann", 0)
	daily := batchOf(t, b.post(t, "comment.created", "dan", "ann"), "ann")
	b.clock.Set(daily.ClosesAt)
	if n := b.flushDue(t); n != 1 {
		t.Fatalf("flushed %d at the daily time, want ann's daily digest", n)
	}
	b.clock.Set(weekly.ClosesAt)
	if n := b.flushDue(t); n != 1 {
		t.Fatalf("flushed %d at the weekly time, want the digest that waited", n)
	}
	if got := len(b.outbox(t)); got != 2 {
		t.Fatalf("%d emails, want the daily and the weekly one", got)
	}
}

// TestCatchUpSlowedThreadMutedLaterSendsNothing: a conversation muted
// while its slowed notification waits in the weekly digest is still
// honoured at that digest's flush; a second ingest of it opens nothing.
func TestCatchUpSlowedThreadMutedLaterSendsNothing(t *testing.T) {
	b := setup(t)
	week := 7
	b.saveType(t, db.Type{Key: "comment", DefaultMode: "daily", CatchUpDays: &week})
	b.recipient(t, "bob", "Pacific/Chatham")
	b.seen(t, "bob", 10)
	weekly := b.postThread(t, "Alice", "doc:7").Batches[0]
	if weekly.BatchKey != "digest:weekly" {
		t.Fatalf("slowed to %s, want the weekly digest", weekly.BatchKey)
	}
	b.mute(t, "comment+doc:7", 0)
	if res := b.postThread(t, "Bea", "doc:7"); len(res.Batches) != 0 || res.Suppressed != 1 {
		t.Fatalf("a comment of the muted thread: %+v", res)
	}
	b.clock.Set(weekly.ClosesAt)
	b.flushDue(t)
	if got := len(b.outbox(t)); got != 0 {
		t.Fatalf("%d emails for a muted conversation, want none", got)
	}
	skips, _ := db.ListSkips(context.Background(), b.db.Pool, 0, "bob", 10)
	if len(skips) != 3 {
		t.Fatalf("skip log %+v, want slowed, muted at ingest and muted at flush", skips)
	}
}
