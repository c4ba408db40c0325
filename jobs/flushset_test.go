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
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/jobs"
)

// digests opens n daily digests of one item each and moves the clock past
// their close; it returns their batch ids.
func (b *testBundle) digests(t *testing.T, n int) []int64 {
	t.Helper()
	b.saveType(t, db.Type{Key: "comment", DefaultMode: "daily"})
	var rids []string
	for i := range n {
		rids = append(rids, fmt.Sprintf("r%03d", i))
		b.recipient(t, rids[i], "UTC")
	}
	var ids []int64
	for _, br := range b.post(t, "comment", "alice", rids...).Batches {
		ids = append(ids, br.ID)
	}
	b.clock.Advance(48 * time.Hour)
	return ids
}

// hold runs sql in a transaction left open until the test ends, so the
// rows it locks stay locked.
func (b *testBundle) hold(t *testing.T, sql string, args ...any) pgx.Tx {
	t.Helper()
	ctx := context.Background()
	tx, err := b.db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback(ctx) })
	if _, err := tx.Exec(ctx, sql, args...); err != nil {
		t.Fatal(err)
	}
	return tx
}

func flushJob(jobID, batchID int64) *river.Job[jobs.FlushArgs] {
	return &river.Job[jobs.FlushArgs]{
		JobRow: &rivertype.JobRow{ID: jobID, Attempt: 1, MaxAttempts: 8, Kind: "flush_batch"},
		Args:   jobs.FlushArgs{BatchID: batchID},
	}
}

// A set starts the deliveries of the batches it could lock in one
// transaction. A batch another transaction holds (an ingest adding to it,
// say) is left to go alone rather than waited for, and so is a second job
// for a batch already in the set and a job for a batch that is gone.
func TestFlushSetSkipsWhatItCannotTakeAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	ids := b.digests(t, 4)
	b.hold(t, "SELECT 1 FROM batches WHERE id = $1 FOR UPDATE", ids[3])
	set := []*river.Job[jobs.FlushArgs]{
		flushJob(1, ids[0]), flushJob(2, ids[1]), flushJob(3, ids[0]), flushJob(4, ids[2]),
		flushJob(5, ids[3]), flushJob(6, 999999),
	}
	done := make(chan struct{})
	var alone, started []bool
	go func() {
		alone, started = b.flush.PrepareSet(ctx, set)
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the set waited for a batch another transaction holds")
	}
	wantAlone := []bool{false, false, true, false, true, true}
	wantStarted := []bool{true, true, false, true, false, false}
	if !slices.Equal(alone, wantAlone) || !slices.Equal(started, wantStarted) {
		t.Fatalf("alone %v started %v, want %v %v", alone, started, wantAlone, wantStarted)
	}
	for i, id := range ids[:3] {
		bt := b.batch(t, id)
		if bt.State != db.StateFlushing || bt.FlushJobID == nil || *bt.FlushJobID != []int64{1, 2, 4}[i] {
			t.Fatalf("batch %d: %s owned by %v", id, bt.State, bt.FlushJobID)
		}
	}
	if got := b.batch(t, ids[3]).State; got != db.StateOpen {
		t.Fatalf("the held batch is %s, want open", got)
	}
	if got := b.count(t, "SELECT count(*) FROM deliveries WHERE state = 'sending' AND attempts = 1"); got != 3 {
		t.Fatalf("%d deliveries started, want 3", got)
	}
}

// Two jobs for every batch, all running at once, so that sets form and
// race each other for the same batches: each batch is sent exactly once.
func TestConcurrentFlushSetsSendEachBatchOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ids := b.digests(t, 150)
	// A clock that moves on every reading: a delivery started alone has a
	// sending time of its own, the deliveries of one set share theirs.
	base := b.clock.Now()
	var tick atomic.Int64
	b.flush.Now = func() time.Time { return base.Add(time.Duration(tick.Add(1)) * time.Microsecond) }
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	for i, id := range ids {
		for copy := range 2 {
			wg.Go(func() {
				if err := b.workAs(ctx, int64(1000*copy+i+1), id, 1); err != nil {
					t.Error(err)
				}
			})
		}
	}
	wg.Wait()
	if got := len(b.outbox(t)); got != len(ids) {
		t.Fatalf("%d emails for %d batches", got, len(ids))
	}
	if got := b.count(t, "SELECT count(*) FROM deliveries WHERE state = 'sent' AND attempts = 1"); got != len(ids) {
		t.Fatalf("%d deliveries sent on the first attempt, want %d", got, len(ids))
	}
	if got := b.count(t, "SELECT count(*) FROM batches WHERE state = 'sent'"); got != len(ids) {
		t.Fatalf("%d batches sent, want %d", got, len(ids))
	}
	// Sets formed: deliveries started together, and outcomes recorded in
	// one transaction (the attempts rows of one share their xmin).
	if got := b.count(t, "SELECT count(DISTINCT sending_at) FROM deliveries"); got >= len(ids) {
		t.Fatalf("%d start times for %d deliveries: no set started deliveries together", got, len(ids))
	}
	if got := b.count(t, "SELECT count(DISTINCT xmin::text) FROM delivery_attempts"); got >= len(ids) {
		t.Fatalf("%d transactions for %d attempts: no set recorded outcomes together", got, len(ids))
	}
}

// Flushes running while an ingest holds one of their batches do not wait
// for it; the held batch's flush waits alone and sees what the ingest
// wrote.
func TestFlushSetsPassABatchAnIngestHolds(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	ids := b.digests(t, 40)
	held := b.hold(t, "UPDATE batches SET item_count = item_count + 1 WHERE id = $1", ids[0])
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Go(func() {
			if err := b.workAs(ctx, int64(i+1), id, 1); err != nil {
				t.Error(err)
			}
		})
	}
	deadline := time.Now().Add(time.Minute)
	for b.count(t, "SELECT count(*) FROM batches WHERE state = 'sent'") < len(ids)-1 {
		if time.Now().After(deadline) {
			t.Fatal("flushes of free batches waited for the held one")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := b.batch(t, ids[0]).State; got != db.StateOpen {
		t.Fatalf("the held batch is %s, want open until the ingest commits", got)
	}
	if err := held.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if got := b.batch(t, ids[0]); got.State != db.StateSent || got.ItemCount != 2 {
		t.Fatalf("the held batch is %s with %d items, want sent with 2", got.State, got.ItemCount)
	}
}

// Flushes of batches another transaction holds, started before any other,
// wait for their locks outside the group: the flushes that come after
// them are not held up.
func TestHeldBatchesDoNotStallLaterFlushes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	ids := b.digests(t, 12)
	held := b.hold(t, "SELECT 1 FROM batches WHERE id = ANY($1) FOR UPDATE", ids[:2])
	var wg sync.WaitGroup
	work := func(i int, id int64) {
		wg.Go(func() {
			if err := b.workAs(ctx, int64(i+1), id, 1); err != nil {
				t.Error(err)
			}
		})
	}
	for i, id := range ids[:2] {
		work(i, id)
	}
	time.Sleep(200 * time.Millisecond)
	for i, id := range ids[2:] {
		work(i+2, id)
	}
	deadline := time.Now().Add(30 * time.Second)
	for b.count(t, "SELECT count(*) FROM batches WHERE state = 'sent'") < len(ids)-2 {
		if time.Now().After(deadline) {
			t.Fatal("flushes of free batches waited behind the held ones")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := held.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if got := b.count(t, "SELECT count(*) FROM batches WHERE state = 'sent'"); got != len(ids) {
		t.Fatalf("%d batches sent, want %d", got, len(ids))
	}
}
