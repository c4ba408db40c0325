package jobs_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/riverqueue/river"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/preferences/batching"
)

func TestNeverStoresNothingAndDoesNotCatchUp(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.saveType(t, db.Type{Key: "comment", DefaultMode: "immediate"})
	b.recipient(t, "bob", "UTC")
	b.setPref(t, "bob", "comment", "never", 0, -1)

	res := b.post(t, "comment", "alice", "bob")
	if res.Notifications != 0 || res.Suppressed != 1 {
		t.Fatalf("never: got %d notifications, %d suppressed; want 0 and 1", res.Notifications, res.Suppressed)
	}
	if n := b.count(t, "SELECT count(*) FROM notifications"); n != 0 {
		t.Fatalf("never stored %d notifications", n)
	}
	if n := b.count(t, "SELECT count(*) FROM skips WHERE reason = $1", db.SkipMuted); n != 1 {
		t.Fatalf("skip log has %d muted entries, want 1", n)
	}
	b.setPref(t, "bob", "comment", "immediate", 0, -1)
	b.clock.Advance(time.Hour)
	b.flushDue(t)
	if got := len(b.outbox(t)); got != 0 {
		t.Fatalf("turning the type back on delivered %d muted emails", got)
	}
}

func TestImmediateSendsOneEmailPerEvent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.saveType(t, db.Type{Key: "comment", DefaultMode: "immediate"})
	b.recipient(t, "bob", "UTC")
	for range 3 {
		b.post(t, "comment", "alice", "bob")
	}
	if n := b.flushDue(t); n != 3 {
		t.Fatalf("%d batches due, want 3", n)
	}
	if got := len(b.outbox(t)); got != 3 {
		t.Fatalf("%d emails, want 3", got)
	}
}

func TestCooldownSlidesAndRespectsMaxWait(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.saveType(t, db.Type{Key: "comment", DefaultMode: "cooldown", WindowMS: 5 * 60_000, MaxWaitMS: 12 * 60_000})
	b.recipient(t, "bob", "UTC")
	start := b.clock.Now()

	first := b.post(t, "comment", "alice", "bob")
	id := first.Batches[0].ID
	if got := first.Batches[0].ClosesAt; !got.Equal(start.Add(5 * time.Minute)) {
		t.Fatalf("first event: closes at %v, want %v", got, start.Add(5*time.Minute))
	}
	for i, step := range []time.Duration{4 * time.Minute, 4 * time.Minute, 3 * time.Minute} {
		b.clock.Advance(step)
		if n := b.flushDue(t); n != 0 {
			t.Fatalf("a batch flushed %v after start although events kept coming", b.clock.Now().Sub(start))
		}
		res := b.post(t, "comment", "carol", "bob")
		if res.Batches[0].ID != id {
			t.Fatalf("event %d opened batch %d, want it in %d", i+2, res.Batches[0].ID, id)
		}
	}
	// Events at 0, 4, 8, 11 min: the window would close at 16, max wait caps it at 12.
	if got := b.batch(t, id).ClosesAt; !got.Equal(start.Add(12 * time.Minute)) {
		t.Fatalf("closes at %v, want the max-wait cap %v", got.Sub(start), 12*time.Minute)
	}
	b.clock.Advance(time.Minute)
	b.flushDue(t)
	if got := b.batch(t, id); got.State != db.StateSent || got.ItemCount != 4 {
		t.Fatalf("batch is %s with %d items, want sent with 4", got.State, got.ItemCount)
	}
	if got := len(b.outbox(t)); got != 1 {
		t.Fatalf("%d emails, want 1", got)
	}
}

func TestCooldownSnoozesWhenTheWindowSlid(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.saveType(t, db.Type{Key: "comment", DefaultMode: "cooldown", WindowMS: 5 * 60_000})
	b.recipient(t, "bob", "UTC")
	id := b.post(t, "comment", "alice", "bob").Batches[0].ID
	b.clock.Advance(4 * time.Minute)
	b.post(t, "comment", "alice", "bob")
	b.clock.Advance(time.Minute + time.Second) // the first job's time; the window slid to 9 min
	err := b.work(context.Background(), id, 1)
	var snooze *river.JobSnoozeError
	if !errors.As(err, &snooze) {
		t.Fatalf("early job: got %v, want a snooze", err)
	}
	if got := b.batch(t, id).State; got != db.StateOpen {
		t.Fatalf("early job left the batch %s, want open", got)
	}
}

func TestFixedWindowWhenMaxWaitEqualsWindow(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.saveType(t, db.Type{Key: "comment", DefaultMode: "cooldown", WindowMS: 10 * 60_000, MaxWaitMS: 10 * 60_000})
	b.recipient(t, "bob", "UTC")
	start := b.clock.Now()
	id := b.post(t, "comment", "alice", "bob").Batches[0].ID
	for range 3 {
		b.clock.Advance(3 * time.Minute)
		b.post(t, "comment", "alice", "bob")
	}
	if got := b.batch(t, id).ClosesAt; !got.Equal(start.Add(10 * time.Minute)) {
		t.Fatalf("fixed window closes at +%v, want +10m", got.Sub(start))
	}
}

func TestDailyDigestMixesTypesAndClosesAtLocalTime(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.saveType(t, db.Type{Key: "comment", Name: "comments", DefaultMode: "daily"})
	b.saveType(t, db.Type{Key: "share", Name: "shares", DefaultMode: "daily"})
	b.recipient(t, "bob", "Europe/Berlin")
	// 09:00 UTC on 23 Nov is 10:00 in Berlin: the next 08:00 local is
	// 24 Nov 07:00 UTC.
	r1 := b.post(t, "comment", "alice", "bob")
	r2 := b.post(t, "share", "carol", "bob")
	if r1.Batches[0].ID != r2.Batches[0].ID {
		t.Fatalf("two daily types went to batches %d and %d, want one digest", r1.Batches[0].ID, r2.Batches[0].ID)
	}
	want := time.Date(2026, 11, 24, 7, 0, 0, 0, time.UTC)
	if got := r1.Batches[0].ClosesAt; !got.Equal(want) {
		t.Fatalf("digest closes %v, want %v", got, want)
	}
	if r1.Batches[0].BatchKey != "digest:daily" {
		t.Fatalf("batch key %q, want digest:daily", r1.Batches[0].BatchKey)
	}
	b.clock.Set(want)
	b.flushDue(t)
	out := b.outbox(t)
	if len(out) != 1 {
		t.Fatalf("%d emails, want one digest", len(out))
	}
	if !strings.Contains(out[0].Text, "comments") || !strings.Contains(out[0].Text, "shares") {
		t.Fatalf("digest text lacks a type:\n%s", out[0].Text)
	}
}

func TestMaxItemsFlushesEarly(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.saveType(t, db.Type{Key: "comment", DefaultMode: "cooldown", WindowMS: 3_600_000, MaxItems: 3})
	b.recipient(t, "bob", "UTC")
	var res *batching.IngestResult
	for range 3 {
		res = b.post(t, "comment", "alice", "bob")
	}
	if got := res.Batches[0].ClosesAt; !got.Equal(b.clock.Now()) {
		t.Fatalf("full batch closes at %v, want now (%v)", got, b.clock.Now())
	}
	if n := b.flushDue(t); n != 1 {
		t.Fatalf("%d batches due, want the full one", n)
	}
	if next := b.post(t, "comment", "alice", "bob"); next.Batches[0].ID == res.Batches[0].ID {
		t.Fatalf("event after the flush joined the flushed batch")
	}
}

func TestDisplayLimitShowsTrueTotal(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.saveType(t, db.Type{Key: "comment", Name: "comments", DefaultMode: "cooldown", DisplayLimit: 5})
	b.recipient(t, "bob", "UTC")
	var id int64
	for range 15 {
		id = b.post(t, "comment", "alice", "bob").Batches[0].ID
	}
	if got := b.batch(t, id).ItemCount; got != 15 {
		t.Fatalf("batch records %d items, want 15", got)
	}
	b.clock.Advance(time.Hour)
	b.flushDue(t)
	text := b.outbox(t)[0].Text
	if !strings.Contains(text, "15") || !strings.Contains(text, "10 more") {
		t.Fatalf("email does not say 15 with 10 more:\n%s", text)
	}
}

func TestRetractionRemovesItemsAndCancelsEmptyBatches(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.saveType(t, db.Type{Key: "comment", DefaultMode: "cooldown"})
	b.recipient(t, "bob", "UTC")
	b.recipient(t, "carol", "UTC")
	ctx := context.Background()
	keep := b.post(t, "comment", "alice", "bob")
	gone := b.post(t, "comment", "alice", "bob", "carol")

	res, err := b.engine.Retract(ctx, 1, batching.EventRef{ID: gone.ID})
	if err != nil {
		t.Fatal(err)
	}
	if res.Removed != 2 {
		t.Fatalf("removed %d notifications, want 2", res.Removed)
	}
	carolBatch := gone.Batches[0].ID
	if gone.Batches[0].Recipient != "carol" {
		carolBatch = gone.Batches[1].ID
	}
	if len(res.Canceled) != 1 || res.Canceled[0] != carolBatch {
		t.Fatalf("canceled %v, want carol's batch %d", res.Canceled, carolBatch)
	}
	if got := b.batch(t, keep.Batches[0].ID).ItemCount; got != 1 {
		t.Fatalf("bob's batch has %d items after retraction, want 1", got)
	}
	b.clock.Advance(time.Hour)
	b.flushDue(t)
	out := b.outbox(t)
	if len(out) != 1 || out[0].To != "bob@example.com" {
		t.Fatalf("emails after retraction: %d, want one to bob", len(out))
	}
	// Every notification not sent is in the skip log: carol's canceled
	// batch, and the one taken out of bob's batch, which was sent.
	for _, id := range []int64{carolBatch, keep.Batches[0].ID} {
		if n := b.count(t, "SELECT coalesce(sum(items), 0) FROM skips WHERE reason = $1 AND batch_id = $2 AND event_id = $3", db.SkipRetracted, id, gone.ID); n != 1 {
			t.Fatalf("skip log has %d retracted items for batch %d, want 1", n, id)
		}
	}
}

func TestIdempotentKeyReturnsFirstResult(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.saveType(t, db.Type{Key: "comment", DefaultMode: "cooldown"})
	b.recipient(t, "bob", "UTC")
	ev := func() *batching.Event {
		return &batching.Event{Type: "comment", Key: "comment-8812", Recipients: []batching.RecipientRef{{ID: "bob"}}}
	}
	ctx := context.Background()
	first, err := b.engine.Ingest(ctx, 1, ev())
	if err != nil {
		t.Fatal(err)
	}
	again, err := b.engine.Ingest(ctx, 1, ev())
	if err != nil {
		t.Fatal(err)
	}
	if again.ID != first.ID || again.Batches[0].ID != first.Batches[0].ID {
		t.Fatalf("replay answered %+v, want %+v", again, first)
	}
	if n := b.count(t, "SELECT count(*) FROM events"); n != 1 {
		t.Fatalf("%d events stored, want 1", n)
	}
	if n := b.count(t, "SELECT count(*) FROM notifications"); n != 1 {
		t.Fatalf("%d notifications stored, want 1", n)
	}
	// Another API key has its own key space.
	other, err := b.engine.Ingest(ctx, 2, ev())
	if err != nil || other.ID == first.ID {
		t.Fatalf("another API key's event was taken for a replay (%v)", err)
	}
}

func TestConcurrentIngestsShareOneBatch(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.saveType(t, db.Type{Key: "comment", DefaultMode: "cooldown"})
	b.recipient(t, "bob", "UTC")
	const n = 50
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := b.engine.Ingest(context.Background(), 1, &batching.Event{Type: "comment",
				Actor: batching.Actor{ID: itoa(int64(i))}, Recipients: []batching.RecipientRef{{ID: "bob"}}})
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := b.count(t, "SELECT count(*) FROM batches"); got != 1 {
		t.Fatalf("%d batches, want 1", got)
	}
	if got := b.count(t, "SELECT item_count FROM batches"); got != n {
		t.Fatalf("batch has item_count %d, want %d", got, n)
	}
	if got := b.count(t, "SELECT count(*) FROM notifications"); got != n {
		t.Fatalf("%d notifications, want %d", got, n)
	}
}

func TestConcurrentFlushesSendOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.saveType(t, db.Type{Key: "comment", DefaultMode: "cooldown"})
	b.recipient(t, "bob", "UTC")
	id := b.post(t, "comment", "alice", "bob").Batches[0].ID
	b.clock.Advance(time.Hour)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := b.workAs(context.Background(), int64(100+i), id, 1); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if got := len(b.outbox(t)); got != 1 {
		t.Fatalf("8 racing workers sent %d emails, want 1", got)
	}
}

// A flush must hold one pool connection at a time: with more flushes
// running than the pool has connections, a flush that takes a second
// connection inside its transaction waits for ones that never come back.
func TestFlushesOutnumberingPoolConnections(t *testing.T) {
	t.Parallel()
	b := setup(t)
	types := []string{"comment", "share", "mention"}
	for _, k := range types {
		b.saveType(t, db.Type{Key: k, DefaultMode: "daily"})
	}
	n := 3 * int(b.db.Pool.Config().MaxConns)
	var ids []string
	for i := range n {
		id := fmt.Sprintf("r%d", i)
		b.recipient(t, id, "UTC")
		ids = append(ids, id)
	}
	for _, k := range types {
		b.post(t, k, "alice", ids...)
	}
	b.clock.Advance(48 * time.Hour)
	due, err := db.DueBatches(context.Background(), b.db.Pool, b.clock.Now(), n)
	if err != nil || len(due) != n {
		t.Fatalf("%d due digests (%v), want %d", len(due), err, n)
	}
	// The deadline only turns a deadlock into a failure.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	for _, id := range due {
		wg.Go(func() {
			if err := b.work(ctx, id, 1); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if got := len(b.outbox(t)); got != n {
		t.Fatalf("%d digests sent, want %d", got, n)
	}
}

func TestBurstGuardTurnsFloodIntoBatch(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.saveType(t, db.Type{Key: "task.failed", DefaultMode: "immediate", BurstLimit: 3})
	b.recipient(t, "bob", "UTC")
	var modes []string
	for range 10 {
		res := b.post(t, "task.failed", "ci", "bob")
		modes = append(modes, b.batch(t, res.Batches[0].ID).Mode)
	}
	want := "immediate immediate immediate cooldown cooldown cooldown cooldown cooldown cooldown cooldown"
	if got := strings.Join(modes, " "); got != want {
		t.Fatalf("modes:\n got %s\nwant %s", got, want)
	}
	b.clock.Advance(10 * time.Minute)
	b.flushDue(t)
	if got := len(b.outbox(t)); got != 4 {
		t.Fatalf("10 failures sent %d emails, want 4 (3 at once, then one batch)", got)
	}
}

func TestQuietHoursDelayClose(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.saveType(t, db.Type{Key: "comment", DefaultMode: "immediate"})
	b.recipient(t, "bob", "UTC")
	ctx := context.Background()
	start, end := 22*60, 7*60
	if _, err := b.db.Pool.Exec(ctx, "UPDATE recipients SET quiet_start = $1, quiet_end = $2", start, end); err != nil {
		t.Fatal(err)
	}
	b.clock.Set(time.Date(2026, 11, 23, 23, 30, 0, 0, time.UTC))
	res := b.post(t, "comment", "alice", "bob")
	want := time.Date(2026, 11, 24, 7, 0, 0, 0, time.UTC)
	if got := res.Batches[0].ClosesAt; !got.Equal(want) {
		t.Fatalf("during quiet hours closes at %v, want their end %v", got, want)
	}
}

func TestLeadingItemGoesOutAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.saveType(t, db.Type{Key: "comment", DefaultMode: "cooldown", WindowMS: 5 * 60_000, Lead: true})
	b.recipient(t, "bob", "UTC")
	first := b.post(t, "comment", "alice", "bob")
	if got := b.batch(t, first.Batches[0].ID); got.Mode != "immediate" || !got.ClosesAt.Equal(b.clock.Now()) {
		t.Fatalf("leading item: batch %s closing %v, want immediate now", got.Mode, got.ClosesAt)
	}
	b.flushDue(t)
	b.clock.Advance(time.Minute)
	second := b.post(t, "comment", "alice", "bob")
	if got := b.batch(t, second.Batches[0].ID).Mode; got != "cooldown" {
		t.Fatalf("follow-up within the window went %s, want cooldown", got)
	}
	b.clock.Advance(20 * time.Minute)
	b.flushDue(t)
	b.clock.Advance(20 * time.Minute)
	third := b.post(t, "comment", "alice", "bob")
	if got := b.batch(t, third.Batches[0].ID).Mode; got != "immediate" {
		t.Fatalf("first item after a quiet period went %s, want immediate", got)
	}
}

func TestRequiredTypeIgnoresNeverAndUnsubscribe(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.saveType(t, db.Type{Key: "security", DefaultMode: "immediate", Required: true})
	b.saveType(t, db.Type{Key: "comment", DefaultMode: "immediate"})
	b.recipient(t, "bob", "UTC")
	b.setPref(t, "bob", "security", "never", 0, -1)
	if _, err := b.db.Pool.Exec(context.Background(), "UPDATE recipients SET unsubscribed = true"); err != nil {
		t.Fatal(err)
	}
	if res := b.post(t, "security", "system", "bob"); res.Notifications != 1 {
		t.Fatalf("required type was suppressed")
	}
	if res := b.post(t, "comment", "alice", "bob"); res.Suppressed != 1 {
		t.Fatalf("unsubscribed recipient got a comment")
	}
	if n := b.count(t, "SELECT count(*) FROM skips WHERE reason = $1", db.SkipUnsubscribed); n != 1 {
		t.Fatalf("skip log lacks the unsubscribe")
	}
	b.flushDue(t)
	if got := len(b.outbox(t)); got != 1 {
		t.Fatalf("%d emails, want the security alert only", got)
	}
}

func TestPreferencesCheckedAgainAtFlush(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.saveType(t, db.Type{Key: "comment", DefaultMode: "cooldown"})
	b.recipient(t, "bob", "UTC")
	id := b.post(t, "comment", "alice", "bob").Batches[0].ID
	b.setPref(t, "bob", "comment", "never", 0, -1)
	b.clock.Advance(time.Hour)
	b.flushDue(t)
	if got := b.batch(t, id); got.State != db.StateCanceled || got.Reason != db.SkipMuted {
		t.Fatalf("batch %s (%q), want canceled as muted", got.State, got.Reason)
	}
	if got := len(b.outbox(t)); got != 0 {
		t.Fatalf("muted batch was sent")
	}
}

// TestRetractingAReadNotificationKeepsTheBatch: a notification read in
// the app has left its batch's count already; retracting its event must
// not take it out again, or a batch left with one unread notification
// counts none and is canceled with it.
func TestRetractingAReadNotificationKeepsTheBatch(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.saveType(t, db.Type{Key: "comment", DefaultMode: "cooldown", SkipRead: true})
	b.recipient(t, "bob", "UTC")
	read := b.post(t, "comment", "alice", "bob")
	id := read.Batches[0].ID
	b.post(t, "comment", "carol", "bob")
	var first int64
	if err := b.db.Pool.QueryRow(context.Background(), "SELECT min(id) FROM notifications").Scan(&first); err != nil {
		t.Fatal(err)
	}
	if _, _, err := db.MarkRead(context.Background(), b.db.Pool, "bob", []int64{first}, time.Time{}, b.clock.Now()); err != nil {
		t.Fatal(err)
	}
	res, err := b.engine.Retract(context.Background(), 1, batching.EventRef{ID: read.ID})
	if err != nil {
		t.Fatal(err)
	}
	if got := b.batch(t, id); got.State != db.StateOpen || got.ItemCount != 1 || len(res.Canceled) != 0 {
		t.Fatalf("batch %s with %d items (canceled %v), want open with carol's", got.State, got.ItemCount, res.Canceled)
	}
	if n := b.count(t, "SELECT count(*) FROM skips WHERE batch_id = $1 AND reason = $2", id, db.SkipRetracted); n != 0 {
		t.Fatalf("skip log counts the read notification again as retracted (%d entries)", n)
	}
}

// TestDigestKeepsItsCloseTimeWhenTheScheduleChanges: a digest opened
// for 08:00 tomorrow still closes then after its recipient moves the
// digest to 09:30 and another event joins at 09:45; computed again from
// the new time, it would close at 09:30 today, before the event came.
func TestDigestKeepsItsCloseTimeWhenTheScheduleChanges(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.saveType(t, db.Type{Key: "comment", DefaultMode: "daily"})
	b.recipient(t, "bob", "UTC")
	first := b.post(t, "comment", "alice", "bob").Batches[0]
	ctx := context.Background()
	rec, err := db.GetRecipient(ctx, b.db.Bun, "bob")
	if err != nil {
		t.Fatal(err)
	}
	rec.DailyAt = 9*60 + 30
	if err := db.SavePreferences(ctx, b.db.Pool, rec, nil); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(45 * time.Minute)
	b.post(t, "comment", "carol", "bob")
	if got := b.batch(t, first.ID).ClosesAt; !got.Equal(first.ClosesAt) {
		t.Fatalf("digest closes at %v after the schedule changed, want %v as it opened", got, first.ClosesAt)
	}
}

// TestCanceledAtFlushNamesWhatItStillHeld: a batch muted before its flush,
// one of whose two items was read in the app, is canceled as muted: the
// read item left it (and was logged) when it was read, so the skip log
// says each item's reason once.
func TestCanceledAtFlushNamesWhatItStillHeld(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.saveType(t, db.Type{Key: "comment", DefaultMode: "cooldown", SkipRead: true})
	b.recipient(t, "bob", "UTC")
	id := b.post(t, "comment", "alice", "bob").Batches[0].ID
	b.post(t, "comment", "carol", "bob")
	var newest int64
	if err := b.db.Pool.QueryRow(context.Background(), "SELECT max(id) FROM notifications").Scan(&newest); err != nil {
		t.Fatal(err)
	}
	if _, _, err := db.MarkRead(context.Background(), b.db.Pool, "bob", []int64{newest}, time.Time{}, b.clock.Now()); err != nil {
		t.Fatal(err)
	}
	b.setPref(t, "bob", "comment", "never", 0, -1)
	b.clock.Advance(time.Hour)
	b.flushDue(t)
	if got := b.batch(t, id); got.State != db.StateCanceled || got.Reason != db.SkipMuted {
		t.Fatalf("batch %s (%q), want canceled as muted", got.State, got.Reason)
	}
}

// TestMutedAtFlushIsInTheSkipLog: a digest whose recipient muted one of
// its types since it opened goes out without that type, and the skip log
// says what was left out and why.
func TestMutedAtFlushIsInTheSkipLog(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.saveType(t, db.Type{Key: "comment", DefaultMode: "daily"})
	b.saveType(t, db.Type{Key: "share", DefaultMode: "daily"})
	b.recipient(t, "bob", "UTC")
	id := b.post(t, "comment", "alice", "bob").Batches[0].ID
	b.post(t, "comment", "carol", "bob")
	b.post(t, "share", "alice", "bob")
	b.setPref(t, "bob", "comment", "never", 0, -1)
	b.clock.Advance(24 * time.Hour)
	b.flushDue(t)
	if got := b.batch(t, id); got.State != db.StateSent {
		t.Fatalf("digest is %s, want sent with the share", got.State)
	}
	if n := b.count(t, "SELECT coalesce(sum(items), 0) FROM skips WHERE reason = $1 AND batch_id = $2 AND type_key = 'comment'", db.SkipMuted, id); n != 2 {
		t.Fatalf("skip log has %d muted comments for the digest, want 2", n)
	}
}

func TestSkipLogRecordsInactiveAndMissingEmail(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.saveType(t, db.Type{Key: "comment", DefaultMode: "cooldown"})
	b.recipient(t, "bob", "UTC")
	ctx := context.Background()
	if err := db.UpsertRecipient(ctx, b.db.Pool, &db.Recipient{ID: "ghost", Timezone: "UTC", Active: false}); err != nil {
		t.Fatal(err)
	}
	if err := db.UpsertRecipient(ctx, b.db.Pool, &db.Recipient{ID: "noemail", Timezone: "UTC", Active: true}); err != nil {
		t.Fatal(err)
	}
	res := b.post(t, "comment", "alice", "bob", "ghost", "noemail")
	if res.Suppressed != 1 || res.Notifications != 2 {
		t.Fatalf("got %d notifications, %d suppressed; want 2 and 1", res.Notifications, res.Suppressed)
	}
	b.clock.Advance(time.Hour)
	b.flushDue(t)
	for reason, want := range map[string]int{db.SkipInactive: 1, db.SkipNoEmail: 1} {
		if n := b.count(t, "SELECT count(*) FROM skips WHERE reason = $1", reason); n != want {
			t.Errorf("skip log has %d %q, want %d", n, reason, want)
		}
	}
}

func TestUnknownRecipientIsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.saveType(t, db.Type{Key: "comment"})
	_, err := b.engine.Ingest(context.Background(), 1, &batching.Event{Type: "comment", Recipients: []batching.RecipientRef{{ID: "nobody"}}})
	var v *batching.ValidationError
	if !errors.As(err, &v) || v.Errors[0].Field != "recipients[0]" {
		t.Fatalf("got %v, want a validation error on recipients[0]", err)
	}
	if n := b.count(t, "SELECT count(*) FROM events"); n != 0 {
		t.Fatalf("a refused event was stored")
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func TestFanOutIsOneNotificationPerRecipient(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.saveType(t, db.Type{Key: "post", DefaultMode: "cooldown"})
	const n = 3000
	ev := &batching.Event{Type: "post", Actor: batching.Actor{ID: "alice", Name: "Alice"}}
	for i := range n {
		ev.Recipients = append(ev.Recipients, batching.RecipientRef{ID: "f" + itoa(int64(i)), Email: "f" + itoa(int64(i)) + "@example.com", Inline: true})
	}
	res, err := b.engine.Ingest(context.Background(), 1, ev)
	if err != nil {
		t.Fatal(err)
	}
	if res.Notifications != n || len(res.Batches) != n {
		t.Fatalf("fan-out made %d notifications in %d batches, want %d", res.Notifications, len(res.Batches), n)
	}
	// Their batches close together: one wake writes their flush jobs later.
	if got := b.count(t, "SELECT count(*) FROM river_job WHERE kind = 'wake_flushes'"); got != 1 {
		t.Fatalf("%d wakes scheduled, want 1", got)
	}
}

// TestBatchOfADeletedRecipientIsCanceled: lull never deletes recipients,
// so batches carry no foreign key to them; a recipient deleted by hand
// leaves its batch to be canceled at flush, not sent and not stuck.
func TestBatchOfADeletedRecipientIsCanceled(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.saveType(t, db.Type{Key: "comment", DefaultMode: "cooldown"})
	b.recipient(t, "bob", "UTC")
	id := b.post(t, "comment", "alice", "bob").Batches[0].ID
	if _, err := b.db.Pool.Exec(context.Background(), `DELETE FROM recipients WHERE id = 'bob'`); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(time.Hour)
	if n := b.flushDue(t); n != 1 {
		t.Fatalf("%d batches due, want bob's", n)
	}
	if got := b.batch(t, id); got.State != db.StateCanceled || got.Reason != db.SkipInactive {
		t.Fatalf("batch of a deleted recipient is %s (%q), want canceled as inactive", got.State, got.Reason)
	}
	if n := len(b.outbox(t)); n != 0 {
		t.Fatalf("%d emails to a deleted recipient", n)
	}
}

// TestRepeatFanOutMergesInlineRecipients notifies the same inline audience
// twice while its batches are open, each time naming some recipients
// twice. Each recipient is stored once and notified once per event, in
// one batch; a field given overrides the stored one, an empty one keeps
// it (a time zone left out does not fall back to UTC), and a recipient
// named twice in one event reads as two updates in a row.
//
// It runs at 300 recipients and at more than a chunk, where the inline
// recipients are saved before the event's transaction (saveAhead).
func TestRepeatFanOutMergesInlineRecipients(t *testing.T) {
	t.Parallel()
	for _, n := range []int{300, 10_050} {
		t.Run(itoa(int64(n)), func(t *testing.T) {
			t.Parallel()
			repeatFanOutMergesInlineRecipients(t, n)
		})
	}
}

func repeatFanOutMergesInlineRecipients(t *testing.T, n int) {
	b := setup(t)
	b.saveType(t, db.Type{Key: "post", DefaultMode: "cooldown"})
	id := func(i int) string { return "f" + itoa(int64(i)) }
	zones := []string{"Asia/Tokyo", "Europe/Berlin", "America/Chicago"}
	type fields struct{ email, name, zone string }
	want := map[string]fields{}
	post := func(refs []batching.RecipientRef) {
		t.Helper()
		ev := &batching.Event{Type: "post", Actor: batching.Actor{ID: "alice", Name: "Alice"}, Recipients: refs}
		res, err := b.engine.Ingest(context.Background(), 1, ev)
		if err != nil {
			t.Fatal(err)
		}
		if res.Notifications != n || len(res.Batches) != n {
			t.Fatalf("%d notifications in %d batches, want %d", res.Notifications, len(res.Batches), n)
		}
	}

	var first []batching.RecipientRef
	for i := range n {
		f := fields{id(i) + "@example.com", "Name " + itoa(int64(i)), zones[i%3]}
		want[id(i)] = f
		switch i % 10 {
		case 0: // a bare id first, then the object
			first = append(first, batching.RecipientRef{ID: id(i)})
			first = append(first, batching.RecipientRef{ID: id(i), Email: f.email, Name: f.name, Timezone: f.zone, Inline: true})
		case 1: // two objects, each with part of the fields
			first = append(first, batching.RecipientRef{ID: id(i), Email: f.email, Timezone: f.zone, Inline: true})
			first = append(first, batching.RecipientRef{ID: id(i), Name: f.name, Inline: true})
		default:
			first = append(first, batching.RecipientRef{ID: id(i), Email: f.email, Name: f.name, Timezone: f.zone, Inline: true})
		}
	}
	post(first)

	var again []batching.RecipientRef
	for i := range n {
		f := want[id(i)]
		r := batching.RecipientRef{ID: id(i), Inline: true}
		switch i % 5 {
		case 0: // nothing but the id: everything stored stays
		case 1: // a new address only
			f.email = id(i) + "@new.example.com"
			r.Email = f.email
		case 2: // a new time zone and name
			f.zone, f.name = "Pacific/Auckland", "Renamed "+itoa(int64(i))
			r.Timezone, r.Name = f.zone, f.name
		case 3: // the same fields again
			r.Email, r.Name, r.Timezone = f.email, f.name, f.zone
		case 4: // named twice: a new address, then a bare id
			f.email = id(i) + "@other.example.com"
			r.Email = f.email
			again = append(again, r)
			r = batching.RecipientRef{ID: id(i)}
		}
		want[id(i)] = f
		again = append(again, r)
	}
	post(again)

	rows, err := b.db.Pool.Query(context.Background(), `SELECT id, email, name, timezone FROM recipients`)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]fields{}
	for rows.Next() {
		var rid string
		var f fields
		if err := rows.Scan(&rid, &f.email, &f.name, &f.zone); err != nil {
			t.Fatal(err)
		}
		got[rid] = f
	}
	if len(got) != n {
		t.Fatalf("%d recipients stored, want %d", len(got), n)
	}
	for rid, w := range want {
		if got[rid] != w {
			t.Errorf("recipient %s is %+v, want %+v", rid, got[rid], w)
		}
	}
	if c := b.count(t, "SELECT count(*) FROM (SELECT recipient_id FROM notifications GROUP BY recipient_id HAVING count(*) = 2) x"); c != n {
		t.Errorf("%d recipients have two notifications, want all %d", c, n)
	}
	if c := b.count(t, "SELECT count(*) FROM batches WHERE state = 'open' AND item_count = 2"); c != n {
		t.Errorf("%d open batches of two items, want %d", c, n)
	}
}
