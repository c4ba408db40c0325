package jobs_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/preferences/batching"
)

// race posts n copies of the event mk makes, all at once, and returns
// their answers.
func (b *testBundle) race(t *testing.T, n int, mk func(i int) *batching.Event) []*batching.IngestResult {
	t.Helper()
	out := make([]*batching.IngestResult, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			out[i], errs[i] = b.engine.Ingest(context.Background(), 1, mk(i))
		})
	}
	close(start)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// Events racing into the same open batches meet in sets, and each batch
// comes out exactly as if they had come one after another: every event in
// it once, its item count, its last event, and its close time slid as far
// as max_wait allows, or moved by quiet hours set or lifted since it
// opened (a close moved earlier gets a flush job of its own).
func TestEventsRacingIntoOneOpenBatch(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	const n, people = 60, 10
	b.saveType(t, db.Type{Key: "comment", DefaultMode: "cooldown", WindowMS: 3_600_000, MaxWaitMS: 90 * 60_000})
	var to []batching.RecipientRef
	for i := range people {
		id := fmt.Sprintf("r%d", i)
		b.recipient(t, id, "UTC")
		to = append(to, ref(id))
	}
	// r8 is in quiet hours when its batch would close, so it opens until
	// noon; they are lifted before the flood.
	if _, err := b.db.Pool.Exec(ctx, "UPDATE recipients SET quiet_start = 9*60+50, quiet_end = 12*60 WHERE id = 'r8'"); err != nil {
		t.Fatal(err)
	}
	opened := time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)
	b.clock.Set(opened)
	thread := func(int) *batching.Event {
		ev := event("comment", "", to...)
		ev.BatchKey = "doc:7"
		return ev
	}
	first := b.race(t, 1, thread)[0]
	batchOf := map[string]int64{}
	for _, br := range first.Batches {
		batchOf[br.Recipient] = br.ID
	}
	if _, err := b.db.Pool.Exec(ctx, `UPDATE recipients SET quiet_start = NULL, quiet_end = NULL WHERE id = 'r8';
		UPDATE recipients SET quiet_start = 10*60+15, quiet_end = 11*60 WHERE id = 'r9'`); err != nil {
		t.Fatal(err)
	}

	now := opened.Add(45*time.Minute + 123456789) // nanoseconds the database cannot keep
	b.clock.Set(now)
	results := b.race(t, n, thread)

	for _, res := range results {
		if res.Notifications != people || len(res.Batches) != people {
			t.Fatalf("event %d: %d notifications in %d batches, want %d", res.ID, res.Notifications, len(res.Batches), people)
		}
		for _, br := range res.Batches {
			if br.ID != batchOf[br.Recipient] {
				t.Errorf("event %d went to batch %d for %s, want the open batch %d", res.ID, br.ID, br.Recipient, batchOf[br.Recipient])
			}
		}
	}
	last := now.Truncate(time.Microsecond)
	for rid, id := range batchOf {
		want := opened.Add(90 * time.Minute) // max_wait caps last + window
		switch rid {
		case "r9":
			want = time.Date(2026, 11, 23, 11, 0, 0, 0, time.UTC)
		}
		got := b.batch(t, id)
		if got.ItemCount != n+1 || !got.LastEventAt.Equal(last) || !got.ClosesAt.Equal(want) {
			t.Errorf("%s's batch: %d items, last event %v, closes %v; want %d, %v, %v", rid, got.ItemCount, got.LastEventAt, got.ClosesAt, n+1, last, want)
		}
		if c := b.count(t, "SELECT count(DISTINCT event_id) FROM notifications WHERE batch_id = $1", id); c != n+1 {
			t.Errorf("%s's batch holds the notifications of %d events, want %d", rid, c, n+1)
		}
	}
	if got := b.count(t, "SELECT count(*) FROM batches"); got != people {
		t.Errorf("%d batches, want %d", got, people)
	}
	if got := b.count(t, "SELECT count(*) FROM river_job WHERE kind = 'flush_batch' AND (args->>'batch_id')::bigint = $1 AND scheduled_at <= $2",
		batchOf["r8"], opened.Add(90*time.Minute)); got != 1 {
		t.Errorf("r8's batch, moved earlier when its quiet hours were lifted, has %d flush jobs due by its close, want 1", got)
	}
	// The events met: fewer transactions than events wrote them.
	if got := b.count(t, "SELECT count(DISTINCT xmin::text) FROM events WHERE id <> $1", first.ID); got >= n {
		t.Errorf("%d transactions wrote %d events into the same batches: they did not meet", got, n)
	}
}

// Events racing into a batch that fills up split exactly as if they had
// come one after another: the open batch fills to max_items, then new
// batches of max_items each, the last one partly full; every full one
// closes at once with a flush job, and no notification is lost or
// counted twice.
func TestEventsRacingIntoAFillingBatchSplitAtMaxItems(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const maxItems, before, n = 7, 5, 40
	b.saveType(t, db.Type{Key: "task", DefaultMode: "cooldown", WindowMS: 3_600_000, MaxItems: maxItems})
	people := []string{"ann", "ben", "cat"}
	var to []batching.RecipientRef
	for _, id := range people {
		b.recipient(t, id, "UTC")
		to = append(to, ref(id))
	}
	for range before {
		b.post(t, "task", "ops", people...)
	}
	b.clock.Advance(time.Minute)
	now := b.clock.Now()
	b.race(t, n, func(int) *batching.Event { return event("task", "", to...) })

	total := before + n
	for _, rid := range people {
		var counts []int
		var closes []time.Time
		rows, err := b.db.Pool.Query(context.Background(), "SELECT item_count, closes_at FROM batches WHERE recipient_id = $1 ORDER BY id", rid)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var c int
			var at time.Time
			if err := rows.Scan(&c, &at); err != nil {
				t.Fatal(err)
			}
			counts, closes = append(counts, c), append(closes, at)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		want := []int{}
		for left := total; left > 0; left -= maxItems {
			want = append(want, min(left, maxItems))
		}
		if fmt.Sprint(counts) != fmt.Sprint(want) {
			t.Fatalf("%s's batches hold %v items, want %v", rid, counts, want)
		}
		for i, at := range closes {
			full := counts[i] == maxItems
			if full && !at.Equal(now) || !full && !at.Equal(now.Add(time.Hour)) {
				t.Errorf("%s's batch %d of %d items closes at %v", rid, i, counts[i], at)
			}
		}
	}
	if got := b.count(t, "SELECT count(*) FROM batches b WHERE item_count <> (SELECT count(*) FROM notifications n WHERE n.batch_id = b.id)"); got != 0 {
		t.Errorf("%d batches whose item count is not their notifications", got)
	}
	if got := b.count(t, `SELECT count(*) FROM batches b WHERE item_count = $1 AND NOT EXISTS (
		SELECT 1 FROM river_job j WHERE j.kind = 'flush_batch' AND (j.args->>'batch_id')::bigint = b.id AND j.scheduled_at <= $2)`, maxItems, now); got != 0 {
		t.Errorf("%d full batches without a flush job due at once", got)
	}
	if got := b.count(t, "SELECT count(*) FROM notifications"); got != len(people)*total {
		t.Errorf("%d notifications, want %d", got, len(people)*total)
	}
}

// Immediate events racing to the same recipients meet in sets too, and
// each still gets an email of its own: a batch per event and recipient,
// named in that event's answer.
func TestImmediateEventsRacingToOneRecipientEachOpenTheirOwn(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const n = 30
	b.saveType(t, db.Type{Key: "alert", DefaultMode: "immediate"})
	b.recipient(t, "ann", "UTC")
	b.recipient(t, "ben", "UTC")
	results := b.race(t, n, func(int) *batching.Event { return event("alert", "", ref("ann"), ref("ben")) })
	seen := map[int64]bool{}
	for _, res := range results {
		for _, br := range res.Batches {
			if seen[br.ID] {
				t.Fatalf("batch %d answered to two events", br.ID)
			}
			seen[br.ID] = true
			if got := b.count(t, "SELECT count(*) FROM notifications WHERE batch_id = $1 AND event_id = $2 AND recipient_id = $3", br.ID, res.ID, br.Recipient); got != 1 {
				t.Errorf("event %d's batch %d for %s does not hold its notification", res.ID, br.ID, br.Recipient)
			}
		}
	}
	if got := b.count(t, "SELECT count(*) FROM batches WHERE mode = 'immediate' AND item_count = 1"); got != 2*n || len(seen) != 2*n {
		t.Errorf("%d immediate batches of one item, %d answered; want %d", got, len(seen), 2*n)
	}
	if got := b.count(t, "SELECT count(DISTINCT xmin::text) FROM events"); got >= n {
		t.Errorf("%d transactions wrote %d events: they did not meet", got, n)
	}
}

// Events to recipients with the leading item race each other: the set
// they meet in writes the later ones by themselves (their route depends
// on what the earlier ones did), and every event is still stored once,
// each notification in one batch.
func TestLeadingEventsRacingAreAllStored(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const n = 30
	b.saveType(t, db.Type{Key: "reply", DefaultMode: "cooldown", WindowMS: 5 * 60_000, Lead: true})
	b.recipient(t, "ann", "UTC")
	b.recipient(t, "ben", "UTC")
	for _, res := range b.race(t, n, func(int) *batching.Event { return event("reply", "", ref("ann"), ref("ben")) }) {
		if res.Notifications != 2 || len(res.Batches) != 2 {
			t.Fatalf("event %d: %d notifications in %d batches, want 2", res.ID, res.Notifications, len(res.Batches))
		}
	}
	if got := b.count(t, "SELECT count(*) FROM notifications"); got != 2*n {
		t.Errorf("%d notifications, want %d", got, 2*n)
	}
	if got := b.count(t, "SELECT count(*) FROM batches b WHERE item_count <> (SELECT count(*) FROM notifications n WHERE n.batch_id = b.id)"); got != 0 {
		t.Errorf("%d batches whose item count is not their notifications", got)
	}
	if got := b.count(t, "SELECT count(*) FROM batches WHERE mode = 'cooldown' AND state = 'open' AND NOT sealed"); got != 2 {
		t.Errorf("%d open cooldown batches, want one per recipient", got)
	}
}

// Events to a few dozen recipients meet in sets when they go to the same
// batches, and are written by themselves when they do not (side by side,
// each in its own transaction): to other recipients, or to the same ones
// under other batch keys.
func TestWiderEventsMeetWhenTheyShareRecipients(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const n, width = 24, 20
	b.saveType(t, db.Type{Key: "comment", DefaultMode: "cooldown", WindowMS: 3_600_000})
	team := func(first int) []batching.RecipientRef {
		var to []batching.RecipientRef
		for i := first; i < first+width; i++ {
			to = append(to, ref(fmt.Sprintf("p%03d", i)))
		}
		return to
	}
	for i := range (n + 1) * width {
		b.recipient(t, fmt.Sprintf("p%03d", i), "UTC")
	}
	apart := b.race(t, n, func(i int) *batching.Event { return event("comment", "", team((i+1)*width)...) })
	threads := b.race(t, n, func(i int) *batching.Event {
		ev := event("comment", "", team(0)...)
		ev.BatchKey = fmt.Sprint("thread:", i)
		return ev
	})
	shared := b.race(t, n, func(int) *batching.Event { return event("comment", "", team(0)...) })

	transactions := func(rs []*batching.IngestResult) int {
		var ids []int64
		for _, r := range rs {
			ids = append(ids, r.ID)
		}
		return b.count(t, "SELECT count(DISTINCT xmin::text) FROM events WHERE id = ANY($1)", ids)
	}
	if got := transactions(apart); got != n {
		t.Errorf("%d events to separate teams were written in %d transactions, want each in its own", n, got)
	}
	if got := transactions(threads); got != n {
		t.Errorf("%d events to one team in separate threads were written in %d transactions, want each in its own", n, got)
	}
	if got := transactions(shared); got >= n {
		t.Errorf("%d events to one team were written in %d transactions: they did not meet", n, got)
	}
	if got := b.count(t, "SELECT count(*) FROM batches WHERE recipient_id < 'p020' AND batch_key = 'comment' AND item_count = $1", n); got != width {
		t.Errorf("%d of the team's %d batches hold the %d events", got, width, n)
	}
}
