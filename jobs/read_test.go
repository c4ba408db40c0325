package jobs_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/preferences/batching"
)

// Marking notifications read while an event joins the same open batch must
// not cancel the batch as read with the new, unread notification in it.
// Each round starts with an open batch for each of two recipients (an
// event opens one where the last round left none); then, for each,
// marking read (all, or the notifications listed before the round) races
// a second event into that batch.
func TestMarkReadRacingIngestLosesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	hold := &holdingScheduler{Scheduler: b.engine.Scheduler, db: b.db}
	b.engine.Scheduler = hold
	b.saveType(t, db.Type{Key: "comment", SkipRead: true})
	const rounds, pairs = 1000, 2
	var all []batching.RecipientRef
	for i := range pairs {
		b.recipient(t, fmt.Sprintf("r%d", i), "UTC")
		all = append(all, ref(fmt.Sprintf("r%d", i)))
	}
	ctx := context.Background()
	bare := all // recipients with no open batch
	for round := range rounds {
		// A notification read in a later round is read later than its
		// batch was canceled.
		b.clock.Advance(time.Millisecond)
		hold.round.Store(nil)
		if len(bare) > 0 {
			if _, err := b.engine.Ingest(ctx, 1, event("comment", "", bare...)); err != nil {
				t.Fatal(err)
			}
		}
		r := &raceRound{joined: make(chan struct{}), readsDone: make(chan struct{})}
		hold.round.Store(r)
		var reads, ingests sync.WaitGroup
		read, joined := make([]*batching.ReadResult, pairs), make([]*batching.IngestResult, pairs)
		errs := make(chan error, 2*pairs)
		for i, rec := range all {
			var ids []int64
			if round%2 == 1 {
				ids = b.unread(t, rec.ID)
			}
			waitForJoin := (round+i)%2 == 0
			reads.Go(func() {
				if waitForJoin {
					<-r.joined
				}
				var err error
				read[i], err = b.engine.MarkRead(ctx, rec.ID, ids, nil)
				errs <- err
			})
			ingests.Go(func() {
				var err error
				joined[i], err = b.engine.Ingest(ctx, 1, event("comment", "", rec))
				errs <- err
			})
		}
		reads.Wait()
		close(r.readsDone)
		ingests.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		// The second event's batch stays open, with it unread, unless
		// marking read took it too.
		bare = nil
		for i, rec := range all {
			if slices.Contains(read[i].Canceled, joined[i].Batches[0].ID) {
				bare = append(bare, rec)
			}
		}
	}
	lost := b.count(t, `SELECT count(*) FROM notifications n JOIN batches b ON b.id = n.batch_id
		WHERE b.state = 'canceled' AND b.reason = $1 AND (n.read_at IS NULL OR n.read_at > b.processed_at)`, db.SkipRead)
	if lost > 0 {
		t.Fatalf("%d notifications were unread when their batch was canceled as read in the app", lost)
	}
	if n := b.count(t, "SELECT count(*) FROM batches WHERE reason = $1", db.SkipRead); n == 0 {
		t.Fatal("no batch was canceled as read: the race was not run")
	}
	miscounted := b.count(t, `SELECT count(*) FROM batches b
		WHERE b.state = 'open' AND b.item_count <> (SELECT count(*) FROM notifications n WHERE n.batch_id = b.id AND n.read_at IS NULL)`)
	if miscounted > 0 {
		t.Fatalf("%d open batches do not count their unread notifications", miscounted)
	}
}

// unread lists a recipient's unread notifications.
func (b *testBundle) unread(t *testing.T, rid string) []int64 {
	t.Helper()
	rows, err := b.db.Pool.Query(context.Background(), `SELECT id FROM notifications WHERE recipient_id = $1 AND read_at IS NULL`, rid)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// holdingScheduler is the engine's scheduler with a pause that shapes the
// race: in a round, an ingest that has joined its batches (and holds their
// rows) lets the mark-reads that wait for it start, and goes on only once
// one of them waits for a row it holds, or all have returned. Unshaped, a
// mark-read lands in that moment less than once in a thousand tries.
type holdingScheduler struct {
	batching.Scheduler
	db    *db.DB
	round atomic.Pointer[raceRound]
}

// raceRound is one round of the race.
type raceRound struct {
	joined    chan struct{} // closed once an ingest has joined its batches
	once      sync.Once
	readsDone chan struct{} // closed once the round's mark-reads returned
}

func (s *holdingScheduler) ScheduleFlushes(ctx context.Context, tx pgx.Tx, flushes []batching.Flush) error {
	if r := s.round.Load(); r != nil {
		r.once.Do(func() { close(r.joined) })
		if err := s.waitForWaiter(ctx, tx, r.readsDone); err != nil {
			return err
		}
	}
	return s.Scheduler.ScheduleFlushes(ctx, tx, flushes)
}

// waitForWaiter returns once another transaction waits for a lock tx
// holds, or done is closed.
func (s *holdingScheduler) waitForWaiter(ctx context.Context, tx pgx.Tx, done <-chan struct{}) error {
	var pid int
	if err := tx.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		return err
	}
	for {
		select {
		case <-done:
			return nil
		default:
		}
		var waited bool
		// Only this database's backends waiting for a lock are asked
		// who blocks them: asking is costly on a busy server.
		err := s.db.Pool.QueryRow(ctx, `
			SELECT EXISTS (SELECT 1 FROM (
			    SELECT pid FROM pg_stat_activity
			    WHERE datname = current_database() AND wait_event_type = 'Lock' OFFSET 0) w
			WHERE $1 = ANY(pg_blocking_pids(w.pid)))`, pid).Scan(&waited)
		if err != nil || waited {
			return err
		}
		time.Sleep(time.Millisecond)
	}
}

// Marking read locks a recipient's open batches in one order, so that two
// mark-reads of one recipient cannot deadlock (a 500 to one of them). A
// type with max_items 2 leaves several open batches under one batch key
// (a full batch stays open until its flush takes it), whose order an
// order by batch key alone left to chance while events sealed and opened
// them and reads recounted them. The race is not shaped: on the old order
// it deadlocked in about half the runs.
func TestMarkReadsOfOneRecipientDoNotDeadlock(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.saveType(t, db.Type{Key: "comment", SkipRead: true, MaxItems: 2})
	b.recipient(t, "r0", "UTC")
	ctx := context.Background()
	for range 10 {
		if _, err := b.engine.Ingest(ctx, 1, event("comment", "", ref("r0"))); err != nil {
			t.Fatal(err)
		}
	}
	for round := range 400 {
		unread := b.unread(t, "r0")
		var wg sync.WaitGroup
		errs := make(chan error, 12)
		for i := range 12 {
			wg.Go(func() {
				var err error
				switch {
				case i%2 == 0:
					_, err = b.engine.Ingest(ctx, 1, event("comment", "", ref("r0")))
				case len(unread) > i:
					_, err = b.engine.MarkRead(ctx, "r0", unread[i:i+1], nil)
				default:
					_, err = b.engine.MarkRead(ctx, "r0", nil, nil)
				}
				errs <- err
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
	}
}

// Marking everything read while an event opens a new batch must leave
// that batch counting what it holds. Marking read recounts the open
// batches it locked first; a batch opened and committed after those locks
// but before the notifications were marked had its notification marked
// read without a recount, so its flush left the notification out of the
// email and out of the skip log: accounted for nowhere. The race is
// shaped: another transaction holds the recipient's one open batch, so
// the mark-read waits on its lock with its list of open batches already
// read, while the event commits a new batch.
func TestMarkReadAllRacingANewBatchKeepsItCounted(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.saveType(t, db.Type{Key: "comment", SkipRead: true})
	b.recipient(t, "r0", "UTC")
	ctx := context.Background()
	held := b.post(t, "comment", "ann", "r0").Batches[0].ID
	blocker, err := b.db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer blocker.Rollback(ctx)
	if _, err := db.LockBatch(ctx, blocker, held); err != nil {
		t.Fatal(err)
	}
	read := make(chan error, 1)
	go func() { _, err := b.engine.MarkRead(ctx, "r0", nil, nil); read <- err }()
	waiter := &holdingScheduler{db: b.db}
	if err := waiter.waitForWaiter(ctx, blocker, make(chan struct{})); err != nil {
		t.Fatal(err)
	}
	ev := event("comment", "", ref("r0"))
	ev.BatchKey = "doc:new"
	joined, err := b.engine.Ingest(ctx, 1, ev)
	if err != nil {
		t.Fatal(err)
	}
	if err := blocker.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-read; err != nil {
		t.Fatal(err)
	}
	fresh := joined.Batches[0].ID
	unread := b.count(t, `SELECT count(*) FROM notifications WHERE batch_id = $1 AND read_at IS NULL`, fresh)
	if got := b.batch(t, fresh); got.State != db.StateOpen || got.ItemCount != unread {
		t.Fatalf("the new batch is %s counting %d with %d unread: a read left it uncounted and unlogged", got.State, got.ItemCount, unread)
	}
	if got := b.batch(t, held).Reason; got != db.SkipRead {
		t.Fatalf("the batch marked read ended %q, want canceled as %q", got, db.SkipRead)
	}
}
