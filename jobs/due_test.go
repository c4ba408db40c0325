package jobs_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/preferences/batching"
)

// A batch that is due or full takes no more events, even while its flush
// has not run (its process died mid-flush, and River has not rescued the
// job yet): the next event opens a new batch, and the old one, flushed
// late, sends exactly what it held.
func TestDueOrFullBatchTakesNoMoreEvents(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		typ  db.Type
		// makeDue brings a batch holding one event to where it must not
		// take another.
		makeDue func(t *testing.T, b *testBundle)
		items   int // what the old batch holds then
	}{
		{"CooldownPastItsClose", db.Type{Key: "comment", DefaultMode: "cooldown", WindowMS: 3_000}, func(t *testing.T, b *testBundle) {
			b.clock.Advance(4 * time.Second)
		}, 1},
		{"CooldownAtMaxWait", db.Type{Key: "comment", DefaultMode: "cooldown", WindowMS: 2_000, MaxWaitMS: 3_000}, func(t *testing.T, b *testBundle) {
			b.clock.Advance(1500 * time.Millisecond)
			b.post(t, "comment", "carol", "bob")
			b.clock.Advance(1500 * time.Millisecond)
		}, 2},
		{"Full", db.Type{Key: "comment", DefaultMode: "cooldown", WindowMS: 3_600_000, MaxItems: 3}, func(t *testing.T, b *testBundle) {
			b.post(t, "comment", "carol", "bob")
			b.post(t, "comment", "dan", "bob")
		}, 3},
		{"FullSeenByAnEarlierClock", db.Type{Key: "comment", DefaultMode: "cooldown", WindowMS: 3_600_000, MaxItems: 3}, func(t *testing.T, b *testBundle) {
			b.post(t, "comment", "carol", "bob")
			b.post(t, "comment", "dan", "bob")
			// An event whose time was read before the batch filled up
			// (or on a process whose clock runs behind).
			b.clock.Advance(-time.Second)
		}, 3},
		{"DigestPastItsTime", db.Type{Key: "comment", DefaultMode: "daily"}, func(t *testing.T, b *testBundle) {
			b.clock.Set(time.Date(2026, 11, 24, 8, 0, 30, 0, time.UTC))
		}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			b.saveType(t, tc.typ)
			b.recipient(t, "bob", "UTC")
			old := b.post(t, "comment", "alice", "bob").Batches[0].ID
			tc.makeDue(t, b)
			late := b.post(t, "comment", "erin", "bob").Batches[0]
			if late.ID == old {
				t.Fatalf("an event joined batch %d, which was due or full", old)
			}
			if got := b.batch(t, old).ItemCount; got != tc.items {
				t.Fatalf("the old batch holds %d items, want %d", got, tc.items)
			}
			// The old batch's flush runs at last.
			if closes := b.batch(t, old).ClosesAt; closes.After(b.clock.Now()) {
				b.clock.Set(closes)
			}
			b.flushDue(t)
			if got := b.batch(t, old); got.State != db.StateSent {
				t.Fatalf("the old batch is %s, want sent", got.State)
			}
			if n := b.count(t, "SELECT count(*) FROM notifications WHERE batch_id = $1", old); n != tc.items {
				t.Fatalf("the old batch was sent with %d notifications, want %d", n, tc.items)
			}
			if got := b.batch(t, late.ID); got.State != db.StateOpen || got.ItemCount != 1 {
				t.Fatalf("the new batch is %s with %d items, want open with 1", got.State, got.ItemCount)
			}
		})
	}
}

// Events arriving together at a full or due batch open new ones: events
// at a full cooldown batch split into new batches of at most max_items,
// and events at a digest past its time all meet in one new digest. None
// joins the old batch, none is refused, each is in exactly one batch.
func TestConcurrentEventsAtAFullOrDueBatchOpenNewOnes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const maxItems, n = 3, 40
	b.saveType(t, db.Type{Key: "comment", DefaultMode: "cooldown", WindowMS: 3_600_000, MaxItems: maxItems})
	b.saveType(t, db.Type{Key: "like", DefaultMode: "daily"})
	for _, id := range []string{"bob", "carol", "dave"} {
		b.recipient(t, id, "UTC")
	}
	for range maxItems {
		b.post(t, "comment", "alice", "bob", "carol")
	}
	digest := b.post(t, "like", "alice", "dave").Batches[0].ID
	b.clock.Set(time.Date(2026, 11, 24, 8, 0, 30, 0, time.UTC)) // the digest is due
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	for i := range n {
		wg.Go(func() {
			// Some events go to two recipients: events written in sets
			// and alone, to one recipient and to two, meet full batches.
			to := []batching.RecipientRef{ref("bob")}
			if i%3 == 0 {
				to = append(to, ref("carol"))
			}
			_, err := b.engine.Ingest(context.Background(), 1, event("comment", "", to...))
			errs <- err
		})
		wg.Go(func() {
			_, err := b.engine.Ingest(context.Background(), 1, event("like", "", ref("dave")))
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := b.count(t, "SELECT max(item_count) FROM batches WHERE mode = 'cooldown'"); got > maxItems {
		t.Fatalf("a batch holds %d items, more than max_items %d", got, maxItems)
	}
	want := 2*maxItems + n + (n+2)/3
	if got := b.count(t, "SELECT sum(item_count) FROM batches WHERE mode = 'cooldown'"); got != want {
		t.Fatalf("cooldown batches hold %d items, want %d", got, want)
	}
	if got := b.count(t, "SELECT count(*) FROM notifications WHERE type_key = 'comment' AND batch_id IS NOT NULL"); got != want {
		t.Fatalf("%d comments are in batches, want %d", got, want)
	}
	if got := b.batch(t, digest).ItemCount; got != 1 {
		t.Fatalf("the due digest holds %d items, want its 1", got)
	}
	if got := b.count(t, "SELECT count(*) FROM batches WHERE recipient_id = 'dave' AND id <> $1 AND item_count = $2", digest, n); got != 1 {
		t.Fatalf("%d new digests hold the %d likes, want one", got, n)
	}
}

// A batch past its close time counts as closed for the leading-item rule
// too, as it would once flushed: the first event after a quiet period
// goes out at once even while the last batch's flush is late.
func TestLeadingItemAfterALateFlushGoesOutAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.saveType(t, db.Type{Key: "comment", DefaultMode: "cooldown", WindowMS: 5 * 60_000, Lead: true})
	b.recipient(t, "bob", "UTC")
	b.post(t, "comment", "alice", "bob")
	b.flushDue(t)
	b.clock.Advance(time.Minute)
	held := b.post(t, "comment", "alice", "bob").Batches[0].ID
	b.clock.Advance(20 * time.Minute) // held is due; its flush has not run
	next := b.post(t, "comment", "alice", "bob").Batches[0].ID
	if got := b.batch(t, next); next == held || got.Mode != "immediate" {
		t.Fatalf("first item after a quiet period went to batch %d (%s), want an immediate one, not %d", next, got.Mode, held)
	}
}
