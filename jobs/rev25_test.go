package jobs_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/jobs"
)

// TestATypeNamedLikeTheHeldDigestIsStillCounted: a type whose key is
// "budget:held" gives its immediate batches that batch key; they are
// still emails of a counted type, not the held digest, so the budget
// holds them like any other.
func TestATypeNamedLikeTheHeldDigestIsStillCounted(t *testing.T) {
	t.Parallel()
	b, srv := smtpSetup(t)
	b.saveType(t, db.Type{Key: "budget:held", DefaultMode: "immediate"})
	b.setBudget(t, "bob", 1)
	for range 3 {
		b.post(t, "budget:held", "alice", "bob")
		b.flushDue(t)
	}
	if got := len(srv.Messages()); got != 1 {
		t.Fatalf("%d emails on the day, want 1 (the budget)", got)
	}
	if held, _ := b.heldItems(t, "bob"); held != 2 {
		t.Fatalf("%d notifications held, want 2", held)
	}
}

// TestMarkReadDoesNotDeadlockWithAFold: a flush holding its batch folds
// it into the held digest while the recipient marks their feed read.
// Marking read locks the recipient's open batches; had it taken the held
// digest first and then waited for the flush's batch, the fold (waiting
// for the held digest) and it would wait on each other until PostgreSQL
// killed one. It takes the held digest last, so both go through.
func TestMarkReadDoesNotDeadlockWithAFold(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	b.recipient(t, "bob", "UTC")
	b.saveType(t, db.Type{Key: "comment", DefaultMode: "immediate"})
	b.setBudget(t, "bob", 1)
	b.post(t, "comment", "alice", "bob")
	b.flushDue(t) // the email of the day
	b.post(t, "comment", "alice", "bob")
	b.flushDue(t) // held
	b.post(t, "comment", "alice", "bob")
	var due int64
	if err := b.db.Pool.QueryRow(ctx, `SELECT id FROM batches WHERE recipient_id = 'bob' AND state = 'open' AND batch_key = 'comment'`).Scan(&due); err != nil {
		t.Fatal(err)
	}
	flush := b.hold(t, `SELECT id FROM batches WHERE id = $1 FOR UPDATE`, due)
	marked := make(chan error, 1)
	go func() {
		marked <- b.db.InTx(ctx, func(tx pgx.Tx) error {
			_, _, err := db.MarkRead(ctx, tx, "bob", nil, b.clock.Now(), b.clock.Now())
			return err
		})
	}()
	// Wait until marking read waits for the flush's batch.
	for b.count(t, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database() AND query LIKE '%ORDER BY batch_key%'`) == 0 {
		time.Sleep(10 * time.Millisecond)
	}
	now := b.clock.Now()
	_, err := db.FoldIntoHeld(ctx, flush, b.batch(t, due), []string{"comment"}, "budget:held", now.Add(24*time.Hour), now.Add(24*time.Hour).Truncate(24*time.Hour), now)
	if err == nil {
		err = flush.Commit(ctx)
	}
	if err != nil {
		t.Fatalf("the fold: %v", err)
	}
	if err := <-marked; err != nil {
		t.Fatalf("marking read: %v", err)
	}
}

// TestHeldDigestInAFlushSetSendsWhatWasFoldedIntoIt: the held digest and
// the daily digest are due at the same moment and their jobs meet in one
// flush set, the held digest's first. The daily digest is over the budget
// (the held digest is the day's one email) and folds into the held
// digest, whose email must then carry it: before, the held digest was
// composed from what it held before the fold, so the daily digest's
// notification went into a batch marked sent without being in its email.
func TestHeldDigestInAFlushSetSendsWhatWasFoldedIntoIt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	b.recipient(t, "bob", "UTC")
	b.saveType(t, db.Type{Key: "comment", DefaultMode: "immediate"})
	b.saveType(t, db.Type{Key: "summary", DefaultMode: "daily"})
	b.setBudget(t, "bob", 1)
	b.clock.Set(time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC))
	b.post(t, "comment", "alice", "bob")
	b.flushDue(t) // the email of the day
	b.post(t, "comment", "alice", "bob")
	b.flushDue(t) // held for tomorrow 08:00
	b.post(t, "summary", "alice", "bob")
	var held, daily int64
	if err := b.db.Pool.QueryRow(ctx, `SELECT
		(SELECT id FROM batches WHERE recipient_id = 'bob' AND batch_key = 'budget:held'),
		(SELECT id FROM batches WHERE recipient_id = 'bob' AND batch_key = 'digest:daily')`).Scan(&held, &daily); err != nil {
		t.Fatal(err)
	}
	b.clock.Set(time.Date(2026, 11, 24, 8, 0, 0, 0, time.UTC))
	items := b.flush.PrepareSetItems(ctx, []*river.Job[jobs.FlushArgs]{flushJob(1, held), flushJob(2, daily)})
	if got := b.batch(t, held); got.State != db.StateOpen && items[0] != got.ItemCount {
		t.Fatalf("the held digest is %s with %d items, its email shows %d", got.State, got.ItemCount, items[0])
	}
	// Whatever went alone now sends everything.
	b.flushDue(t)
	if n := b.count(t, `SELECT count(*) FROM notifications n JOIN batches b ON b.id = n.batch_id
		WHERE n.recipient_id = 'bob' AND b.state IN ('sent', 'flushing')`); n != 3 {
		t.Fatalf("%d of 3 notifications in a batch going out", n)
	}
}
