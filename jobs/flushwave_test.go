package jobs_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/riverqueue/river"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/jobs"
	"github.com/lull-dev/lull/mailtemplates"
	"github.com/lull-dev/lull/preferences/batching"
)

// A flush wave of several hundred jobs, two for every due batch, mixing
// daily digests, two shared-delivery fan-outs to one team, budget-limited
// recipients whose alerts fold into held digests, and those held digests
// themselves: several sets run at once and race for the same batches and
// budgets. Every recipient gets each email once, and no batch is left
// flushing or due.
func TestFlushWaveWithSharedAndBudgetsSendsEachEmailOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	b.saveType(t, db.Type{Key: "comment", DefaultMode: "daily"})
	b.saveType(t, db.Type{Key: "alert", DefaultMode: "immediate"})
	b.saveType(t, db.Type{Key: "team", DefaultMode: "cooldown", WindowMS: 60_000, SharedDelivery: true})
	b.saveType(t, db.Type{Key: "ops", DefaultMode: "cooldown", WindowMS: 60_000, SharedDelivery: true})
	const n = 120
	var all, limited []string
	for i := range n {
		rid := fmt.Sprintf("r%03d", i)
		b.recipient(t, rid, "UTC")
		all = append(all, rid)
		if i%3 == 0 {
			b.setBudget(t, rid, 1)
			limited = append(limited, rid)
		}
	}
	// A day's budget spent and a held digest opened for each limited
	// recipient.
	for range 2 {
		b.post(t, "alert", "system", limited...)
		b.flushDue(t)
	}
	b.post(t, "comment", "alice", all...)
	b.post(t, "team", "ci", all...)
	b.post(t, "ops", "ci", all...)
	b.clock.Advance(48 * time.Hour)
	for range 2 {
		b.post(t, "alert", "system", limited...)
	}
	due, err := db.DueBatches(ctx, b.db.Pool, b.clock.Now(), 10000)
	if err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	got := map[string]int{}
	b.withSender(senderFunc(func(_ context.Context, m *mailtemplates.Message) error {
		rcpts := m.Rcpts
		if len(rcpts) == 0 {
			rcpts = []string{m.To}
		}
		mu.Lock()
		defer mu.Unlock()
		for _, r := range rcpts {
			got[m.MessageID+" "+r]++
		}
		return nil
	}))
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	for i, id := range due {
		for copy := range 2 {
			wg.Go(func() {
				if err := b.workAs(ctx, int64(100000*copy+i+1), id, 1); err != nil {
					t.Error(err)
				}
			})
		}
	}
	wg.Wait()
	t.Logf("%d due batches, %d jobs, %d (message, recipient) pairs sent", len(due), 2*len(due), len(got))
	for k, c := range got {
		if c > 1 {
			t.Errorf("%s sent %d times", k, c)
		}
	}
	if c := b.count(t, "SELECT count(*) FROM batches WHERE state = 'flushing' OR (state = 'open' AND closes_at <= $1)", b.clock.Now()); c != 0 {
		t.Errorf("%d batches left flushing or due", c)
	}
	if c := b.count(t, "SELECT count(*) FROM deliveries WHERE state = 'sent' AND sending_at >= $1", b.clock.Now().Add(-time.Minute)); c != len(got) {
		t.Errorf("%d deliveries sent, %d (message, recipient) pairs went out", c, len(got))
	}
}

// A set never holds a held digest's row while it waits for a budget lock:
// whoever holds that lock may be folding a batch into the digest, and
// the two would wait on each other until PostgreSQL killed one (every job
// of the set then went alone, and those could deadlock again). Here the
// test's transaction holds the budget lock and folds into the digest
// while a set with the digest and another of its recipient's batches
// waits for that lock.
func TestFlushSetDoesNotHoldAHeldDigestWhileWaitingForABudget(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	b.saveType(t, db.Type{Key: "alert", DefaultMode: "immediate"})
	b.saveType(t, db.Type{Key: "comment", DefaultMode: "daily"})
	b.recipient(t, "bob", "UTC")
	b.setBudget(t, "bob", 1)
	for range 2 {
		b.post(t, "alert", "system", "bob")
		b.flushDue(t) // one sent, one held
	}
	digest := b.post(t, "comment", "alice", "bob").Batches[0].ID
	b.clock.Advance(48 * time.Hour)
	var held int64
	if err := b.db.Pool.QueryRow(ctx, `SELECT id FROM batches WHERE recipient_id = 'bob' AND batch_key = 'budget:held' AND state = 'open'`).Scan(&held); err != nil {
		t.Fatal(err)
	}

	// Another flush of bob's: it holds his budget lock, then folds into
	// the held digest.
	tx := b.hold(t, "SELECT pg_advisory_xact_lock(hashtextextended('lull budget bob', 0))")
	type result struct{ alone, started []bool }
	done := make(chan result, 1)
	go func() {
		alone, started := b.flush.PrepareSet(ctx, []*river.Job[jobs.FlushArgs]{flushJob(1, held), flushJob(2, digest)})
		done <- result{alone, started}
	}()
	for deadline := time.Now().Add(30 * time.Second); b.count(t, "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted") == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the set never waited for the budget lock")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := tx.Exec(ctx, `UPDATE batches SET last_event_at = last_event_at WHERE id = $1`, held); err != nil {
		t.Fatalf("folding into the held digest: %v", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if !slices.Equal(r.alone, []bool{true, false}) || !slices.Equal(r.started, []bool{false, true}) {
		t.Fatalf("alone %v started %v, want the held digest alone and the digest started", r.alone, r.started)
	}
}

// Several hundred events posted at once, more than two sets hold, so
// that two sets run side by side: recipients, batch keys and idempotency
// keys shared across them. Every key is stored once and answered with
// one event, every event's notifications are stored once, and each batch
// counts what it holds.
func TestIngestSetsSideBySideStoreEachEventOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.saveType(t, db.Type{Key: "comment"})
	b.saveType(t, db.Type{Key: "like", DefaultMode: "daily"})
	const recipients = 40
	for i := range recipients {
		b.recipient(t, fmt.Sprintf("r%02d", i), "UTC")
	}
	var evs []*batching.Event
	const posts = 600
	for i := range posts {
		typ := []string{"comment", "like"}[i%2]
		var to []batching.RecipientRef
		for j := range 1 + i%4 {
			to = append(to, ref(fmt.Sprintf("r%02d", (i*7+j*11)%recipients)))
		}
		ev := event(typ, "", to...)
		ev.BatchKey = fmt.Sprintf("thread-%d", i%3)
		if i%3 == 0 {
			ev.Key = fmt.Sprintf("key-%d", i%90)
			if i >= 90 { // the same event again under its key
				c := *evs[i-90]
				ev = &c
			}
		}
		evs = append(evs, ev)
	}
	res := make([]*batching.IngestResult, len(evs))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, ev := range evs {
		wg.Go(func() {
			<-start
			var err error
			if res[i], err = b.engine.Ingest(context.Background(), 1, ev); err != nil {
				t.Errorf("event %d: %v", i, err)
			}
		})
	}
	close(start)
	wg.Wait()
	if t.Failed() {
		return
	}
	ids := map[int64]bool{}
	keyed := map[string]int64{}
	for i, ev := range evs {
		ids[res[i].ID] = true
		if ev.Key != "" {
			if first, ok := keyed[ev.Key]; ok && first != res[i].ID {
				t.Errorf("key %s answered with events %d and %d", ev.Key, first, res[i].ID)
			}
			keyed[ev.Key] = res[i].ID
		}
		if n := b.count(t, "SELECT count(*) FROM notifications WHERE event_id = $1", res[i].ID); n != len(ev.Recipients) {
			t.Errorf("event %d: %d notifications stored for %d recipients", res[i].ID, n, len(ev.Recipients))
		}
	}
	if want := posts - posts/3 + 30; len(ids) != want {
		t.Errorf("%d events answered, want %d", len(ids), want)
	}
	if got := b.count(t, "SELECT count(*) FROM events"); got != len(ids) {
		t.Errorf("%d events stored, %d answered", got, len(ids))
	}
	if got := b.count(t, "SELECT count(*) FROM batches b WHERE item_count <> (SELECT count(*) FROM notifications n WHERE n.batch_id = b.id)"); got != 0 {
		t.Errorf("%d batches whose item count is not their notifications", got)
	}
	if got, want := b.count(t, "SELECT count(*) FROM river_job WHERE kind = 'flush_batch'"), b.count(t, "SELECT count(*) FROM batches"); got != want {
		t.Errorf("%d flush jobs for %d batches", got, want)
	}
}

// A set taking a team member's batch along into a shared email does not
// wait for that member's budget lock: it holds other members' budget
// locks already, and another set holding this one took it for a batch of
// its own and may be taking along a batch of theirs, each set waiting for
// the other. The member's batch is left to its own job.
func TestFlushSetTakesAlongOnlyBatchesWhoseBudgetIsFree(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	b.flush.DailyBudget = 10
	b.saveType(t, db.Type{Key: "team", DefaultMode: "cooldown", WindowMS: 60_000, SharedDelivery: true})
	b.recipient(t, "m1", "UTC")
	b.recipient(t, "m2", "UTC")
	ids := map[string]int64{}
	for _, br := range b.post(t, "team", "ci", "m1", "m2").Batches {
		ids[br.Recipient] = br.ID
	}
	b.clock.Advance(2 * time.Minute)
	// Another set's flush of m2's: it holds m2's budget lock.
	b.hold(t, "SELECT pg_advisory_xact_lock(hashtextextended('lull budget m2', 0))")
	done := make(chan []bool, 1)
	go func() {
		_, started := b.flush.PrepareSet(ctx, []*river.Job[jobs.FlushArgs]{flushJob(1, ids["m1"])})
		done <- started
	}()
	select {
	case started := <-done:
		if !slices.Equal(started, []bool{true}) {
			t.Fatalf("started %v, want m1's delivery started", started)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the set waited for the budget lock of a batch it took along")
	}
	if got := b.batch(t, ids["m2"]).State; got != db.StateOpen {
		t.Fatalf("m2's batch is %s, want open for its own job", got)
	}
}
