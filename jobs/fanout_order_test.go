package jobs_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/db/dbtest"
	"github.com/lull-dev/lull/preferences/batching"
)

// fanOutTxWaits: the fan-out's transaction (the one holding events)
// waits for a lock to save recipients.
const fanOutTxWaits = `SELECT EXISTS (SELECT 1 FROM pg_stat_activity a
	WHERE datname = current_database() AND wait_event_type = 'Lock' AND query ILIKE '%recipients%'
	  AND EXISTS (SELECT 1 FROM pg_locks l WHERE l.pid = a.pid AND l.relation = 'events'::regclass AND l.granted))`

func isDeadlock(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "40P01"
}

// Every ingestion locks recipients before batches, but a fan-out joins
// the batches of its first chunk while the recipients of its second are
// still being saved beside it. Another request that created (or changed)
// a recipient of the second chunk and then adds to the batch of a
// first-chunk recipient (what a small event [n0, x{inline}] does in one
// transaction) waits for the fan-out, whose save waits for it. The save
// gives up, the fan-out's transaction is undone and written again with
// every recipient saved first, and both go through: neither is refused
// as a deadlock.
func TestFanOutMeetingARecipientLockedByARequestWaitingForItsBatch(t *testing.T) {
	t.Parallel()
	b := postSetup(t)
	b.warmPool(t, 6)
	ctx := context.Background()
	ev := newInlineEvent("post", 20_001)
	x := secondChunkID(ev)
	// The other request: creates x (as store's upsert does) ...
	other := b.hold(t, `INSERT INTO recipients (id, email) VALUES ($1, $1 || '@example.com')`, x)
	done := make(chan error, 1)
	go func() { _, err := b.engine.Ingest(ctx, 1, ev); done <- err }()
	dbtest.LockWaiter(t, b.db) // the fan-out's save of the second chunk waits for x
	// ... and then joins n0's batch, once the fan-out holds it (probed
	// under a savepoint with a short lock_timeout).
	join := `INSERT INTO batches (recipient_id, batch_key, type_key, mode, opened_at, last_event_at, closes_at, window_ms, item_count)
		VALUES ('n0', 'post', 'post', 'cooldown', $1, $1, $2, 300000, 1) ON CONFLICT DO NOTHING`
	now := b.clock.Now()
	b.untilFanOutHolds(t, other, join, now, now.Add(5*time.Minute))
	_, otherErr := other.Exec(ctx, join, now, now.Add(5*time.Minute))
	if otherErr == nil {
		otherErr = other.Commit(ctx)
	} else {
		other.Rollback(ctx)
	}
	fanErr := <-done
	if otherErr != nil || fanErr != nil {
		t.Fatalf("other request: %v (deadlock: %v); fan-out: %v (deadlock: %v); want both through",
			otherErr, isDeadlock(otherErr), fanErr, isDeadlock(fanErr))
	}
}

// The same between two real events: an event [a0 … a10, n0, x{inline}]
// that changes x and then joins a0's, n0's and x's batches in turn, and a
// fan-out to new inline recipients n0 … n20000 (n0 and x stored before),
// whose first chunk takes n0's batch while its save of the second chunk
// waits for x. Both go through.
func TestFanOutAndASmallEventSharingRecipientsBothGoThrough(t *testing.T) {
	t.Parallel()
	b := postSetup(t)
	b.warmPool(t, 8)
	ctx := context.Background()
	fan := newInlineEvent("post", 20_001)
	x := secondChunkID(fan)
	if _, err := b.db.Pool.Exec(ctx, `INSERT INTO recipients (id, email) SELECT 'a' || i, 'a@example.com' FROM generate_series(0, 10) AS i;
		INSERT INTO recipients (id, email) VALUES ('n0', 'n0@example.com')`); err != nil {
		t.Fatal(err)
	}
	if _, err := b.db.Pool.Exec(ctx, `INSERT INTO recipients (id, email) VALUES ($1, 'old@example.com')`, x); err != nil {
		t.Fatal(err)
	}
	now := b.clock.Now()
	openBatch := `INSERT INTO batches (recipient_id, batch_key, type_key, mode, opened_at, last_event_at, closes_at, window_ms, item_count)
		VALUES ($1, 'post', 'post', 'cooldown', $2, $2, $3, 300000, 1) ON CONFLICT DO NOTHING`
	// Holds a0's batch, so the small event waits there with x locked.
	gate := b.hold(t, openBatch, "a0", now, now.Add(5*time.Minute))
	// More than smallEvent recipients, so it is written alone, without
	// the set's lock timeout.
	small := &batching.Event{Type: "post", Actor: batching.Actor{ID: "bob"}, Recipients: []batching.RecipientRef{
		{ID: "n0"}, {ID: x, Email: "b@example.com", Inline: true}}}
	for i := range 11 {
		small.Recipients = append(small.Recipients, batching.RecipientRef{ID: "a" + itoa(int64(i))})
	}
	smallDone := make(chan error, 1)
	go func() { _, err := b.engine.Ingest(ctx, 1, small); smallDone <- err }()
	dbtest.LockWaiter(t, b.db)
	fanDone := make(chan error, 1)
	go func() { _, err := b.engine.Ingest(ctx, 1, fan); fanDone <- err }()
	// Wait until the fan-out holds n0's batch (or, written again in
	// order, its transaction waits for x).
	probe := b.hold(t, `SELECT 1`)
	b.untilFanOutHolds(t, probe, openBatch, "n0", now, now.Add(5*time.Minute))
	probe.Rollback(ctx)
	if err := gate.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	smallErr, fanErr := <-smallDone, <-fanDone
	if smallErr != nil || fanErr != nil {
		t.Fatalf("small event: %v (deadlock: %v); fan-out: %v (deadlock: %v); want both through",
			smallErr, isDeadlock(smallErr), fanErr, isDeadlock(fanErr))
	}
}

// untilFanOutHolds returns once the fan-out holds the batch that sql,
// run in tx, would join (probed under a savepoint with a short lock
// timeout), or once the fan-out's transaction waits to save a recipient
// itself, as it does when written again with every chunk saved first.
func (b *testBundle) untilFanOutHolds(t *testing.T, tx pgx.Tx, sql string, args ...any) {
	t.Helper()
	ctx := context.Background()
	for {
		if _, err := tx.Exec(ctx, `SAVEPOINT probe; SET LOCAL lock_timeout = '20ms'`); err != nil {
			t.Fatal(err)
		}
		_, err := tx.Exec(ctx, sql, args...)
		if _, rerr := tx.Exec(ctx, `ROLLBACK TO SAVEPOINT probe`); rerr != nil {
			t.Fatal(rerr)
		}
		if db.IsLockTimeout(err) || b.exists(t, fanOutTxWaits) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
