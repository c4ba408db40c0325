package jobs_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/preferences/batching"
)

// ingestCase is one event posted in TestIngestSetsRace, with its answer.
type ingestCase struct {
	ev  *batching.Event
	res *batching.IngestResult
	err error
}

func event(typ, key string, recipients ...batching.RecipientRef) *batching.Event {
	return &batching.Event{Type: typ, Key: key, Actor: batching.Actor{ID: "ann", Name: "Ann"},
		Object: batching.Object{Title: "Q3 plan"}, Recipients: recipients}
}

func ref(id string) batching.RecipientRef { return batching.RecipientRef{ID: id} }

// Events posted at the same moment are written in sets, and each still
// gets exactly its own answer: events of different types whose recipients
// have preferences for the other type, several events to one recipient,
// one idempotency key posted three times, unknown recipients and
// recipients created inline, all at once.
func TestIngestSetsRace(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.saveType(t, db.Type{Key: "comment"})
	b.saveType(t, db.Type{Key: "like", DefaultMode: "daily"})
	for i := range 40 {
		b.recipient(t, fmt.Sprintf("r%02d", i), "UTC")
	}
	for i := range 10 {
		b.setPref(t, fmt.Sprintf("r%02d", i), "like", "never", 0, 0)
	}

	var cases []*ingestCase
	add := func(ev *batching.Event) { cases = append(cases, &ingestCase{ev: ev}) }
	for i := range 30 {
		typ := map[bool]string{true: "comment", false: "like"}[i%2 == 0]
		add(event(typ, "", ref(fmt.Sprintf("r%02d", i))))
	}
	for i := 20; i < 30; i += 2 {
		add(event("comment", "", ref(fmt.Sprintf("r%02d", i))))
		add(event("comment", "", ref(fmt.Sprintf("r%02d", i))))
	}
	for i := 30; i < 40; i++ {
		for range 3 {
			add(event("comment", fmt.Sprintf("key-%d", i), ref(fmt.Sprintf("r%02d", i))))
		}
	}
	for i := range 5 {
		add(event("comment", "", ref(fmt.Sprintf("ghost%d", i))))
		add(event("comment", "", batching.RecipientRef{ID: fmt.Sprintf("new%d", i), Email: fmt.Sprintf("new%d@example.com", i), Inline: true}))
	}

	start := make(chan struct{})
	var wg sync.WaitGroup
	for _, c := range cases {
		wg.Go(func() {
			<-start
			c.res, c.err = b.engine.Ingest(context.Background(), 1, c.ev)
		})
	}
	close(start)
	wg.Wait()

	events := map[int64]bool{}
	keyed := map[string]int64{}
	for _, c := range cases {
		rid := c.ev.Recipients[0].ID
		if strings.HasPrefix(rid, "ghost") {
			var v *batching.ValidationError
			if !errors.As(c.err, &v) || v.Errors[0].Field != "recipients[0]" {
				t.Errorf("event to %s: %v, want a validation error naming recipients[0]", rid, c.err)
			}
			continue
		}
		if c.err != nil {
			t.Fatalf("event to %s: %v", rid, c.err)
		}
		events[c.res.ID] = true
		if first, ok := keyed[c.ev.Key]; ok && first != c.res.ID {
			t.Errorf("key %s answered with events %d and %d", c.ev.Key, first, c.res.ID)
		} else if c.ev.Key != "" {
			keyed[c.ev.Key] = c.res.ID
		}
		muted := c.ev.Type == "like" && rid < "r10"
		if want := map[bool]int{true: 0, false: 1}[muted]; c.res.Notifications != want || c.res.Suppressed != 1-want {
			t.Errorf("%s to %s: %d notified, %d suppressed; want %d notified", c.ev.Type, rid, c.res.Notifications, c.res.Suppressed, want)
		}
		if b.count(t, "SELECT count(*) FROM events WHERE id = $1 AND type_key = $2 AND coalesce(key, '') = $3 AND recipient_count = 1", c.res.ID, c.ev.Type, c.ev.Key) != 1 {
			t.Errorf("event %d is not stored as the %s with key %q it answers for", c.res.ID, c.ev.Type, c.ev.Key)
		}
		stored := b.count(t, "SELECT count(*) FROM notifications WHERE event_id = $1 AND recipient_id = $2 AND type_key = $3", c.res.ID, rid, c.ev.Type)
		if stored != c.res.Notifications {
			t.Errorf("event %d (%s to %s): %d notifications stored, answer says %d", c.res.ID, c.ev.Type, rid, stored, c.res.Notifications)
		}
		for _, br := range c.res.Batches {
			if n := b.count(t, "SELECT count(*) FROM notifications WHERE event_id = $1 AND batch_id = $2", c.res.ID, br.ID); n != 1 {
				t.Errorf("event %d: batch %d holds %d of its notifications, want 1", c.res.ID, br.ID, n)
			}
		}
	}
	if got, want := b.count(t, "SELECT count(*) FROM events"), len(events); got != want || want != 30+10+10+5 {
		t.Errorf("%d events stored, %d answered (want 55)", got, want)
	}
	if got := b.count(t, "SELECT count(*) FROM skips WHERE reason = 'muted' AND event_id IS NOT NULL"); got != 5 {
		t.Errorf("%d muted skips, want 5", got)
	}
	if got := b.count(t, "SELECT count(*) FROM batches WHERE recipient_id IN ('r20', 'r22', 'r24', 'r26', 'r28') AND item_count = 3"); got != 5 {
		t.Errorf("%d of 5 recipients have a batch of their 3 events", got)
	}
	if got := b.count(t, "SELECT count(*) FROM batches b WHERE item_count <> (SELECT count(*) FROM notifications n WHERE n.batch_id = b.id)"); got != 0 {
		t.Errorf("%d batches whose item count is not their notifications", got)
	}
	if got, want := b.count(t, "SELECT count(*) FROM river_job WHERE kind = 'flush_batch'"), b.count(t, "SELECT count(*) FROM batches"); got != want {
		t.Errorf("%d flush jobs for %d batches", got, want)
	}
	// Events that shared a set share their transaction id.
	if got := b.count(t, "SELECT count(DISTINCT xmin::text) FROM events"); got >= len(events) {
		t.Errorf("%d transactions for %d events: no set was formed", got, len(events))
	}
}

// One set is written at a time, so a set must not wait long for a row
// another transaction holds: while a batch is locked, an event to its
// recipient waits by itself, and events to others go through.
func TestIngestSetDoesNotWaitForAHeldBatch(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	b.saveType(t, db.Type{Key: "comment"})
	b.recipient(t, "r1", "UTC")
	b.recipient(t, "r2", "UTC")
	b.post(t, "comment", "ann", "r1")
	held := b.hold(t, "SELECT 1 FROM batches WHERE recipient_id = 'r1' FOR UPDATE")

	blocked := make(chan error, 1)
	go func() {
		_, err := b.engine.Ingest(ctx, 1, event("comment", "", ref("r1")))
		blocked <- err
	}()
	for b.count(t, "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'") == 0 {
		select {
		case err := <-blocked:
			t.Fatalf("the event to the held batch did not wait for it: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
	}

	other := make(chan error, 1)
	go func() {
		_, err := b.engine.Ingest(ctx, 1, event("comment", "", ref("r2")))
		other <- err
	}()
	select {
	case err := <-other:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		held.Rollback(ctx)
		t.Fatal("an event to another recipient waited for the held batch")
	}

	held.Rollback(ctx)
	if err := <-blocked; err != nil {
		t.Fatal(err)
	}
	if got := b.count(t, "SELECT item_count FROM batches WHERE recipient_id = 'r1'"); got != 2 {
		t.Errorf("r1's batch holds %d items, want 2", got)
	}
}
