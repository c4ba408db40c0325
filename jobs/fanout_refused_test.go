package jobs_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/lull-dev/lull/preferences/batching"
)

// nothingStored wants no trace of a refused fan-out anywhere: events,
// their keys, batches, notifications, skips, River jobs, and no
// recipient beyond the stored audience (given inline or not).
func nothingStored(t *testing.T, b *testBundle, recipients int) {
	t.Helper()
	for _, q := range []string{`SELECT count(*) FROM events`, `SELECT count(*) FROM event_keys`, `SELECT count(*) FROM batches`,
		`SELECT count(*) FROM notifications`, `SELECT count(*) FROM skips`, `SELECT count(*) FROM river_job`} {
		if got := b.count(t, q); got != 0 {
			t.Errorf("%s: %d after a refused fan-out", q, got)
		}
	}
	if got := b.count(t, `SELECT count(*) FROM recipients`); got != recipients {
		t.Errorf("%d recipients after a refused fan-out, want %d", got, recipients)
	}
}

// TestRefusedFanOutNamesFirstUnknownWherever: over three chunks, an
// unknown id first in the request and last in byte order, last in the
// request and first in byte order, one in the middle chunk, and several,
// each names the first in the request, stores nothing, and a key refused
// is free again once the recipient is created.
func TestRefusedFanOutNamesFirstUnknownWherever(t *testing.T) {
	t.Parallel()
	b := postSetup(t)
	const n = 30_001
	base := storedAudience(t, b, n, "post")
	type ins struct {
		at int
		id string
	}
	for _, c := range []struct {
		name  string
		ins   []ins
		field string
	}{
		{"first in request, last in bytes", []ins{{0, "zz"}}, "recipients[0]"},
		{"last in request, first in bytes", []ins{{n, "a0"}}, fmt.Sprintf("recipients[%d]", n)},
		{"middle chunk", []ins{{15_000, "c2x"}}, "recipients[15000]"},
		{"several", []ins{{5, "zz"}, {7, "c2x"}, {10, "a0"}}, "recipients[5]"},
	} {
		ev := &batching.Event{Type: base.Type, Actor: base.Actor, Key: "k-" + c.name, Recipients: slices.Clone(base.Recipients)}
		for _, in := range c.ins {
			ev.Recipients = slices.Insert(ev.Recipients, in.at, batching.RecipientRef{ID: in.id})
		}
		refusedNaming(t, b, ev, c.field)
		nothingStored(t, b, n)
	}
	// The key of a refused event is not kept: once its recipient exists,
	// the same request is written.
	ev := &batching.Event{Type: base.Type, Actor: base.Actor, Key: "retry", Recipients: slices.Insert(slices.Clone(base.Recipients), 0, batching.RecipientRef{ID: "zz"})}
	refusedNaming(t, b, ev, "recipients[0]")
	b.recipient(t, "zz", "UTC")
	res, err := b.engine.Ingest(context.Background(), 1, ev)
	if err != nil || res.Notifications != n+1 {
		t.Fatalf("retry after creating the recipient: %+v, %v; want %d notifications", res, err, n+1)
	}
}

// TestRefusedInlineFanOutStoresNoInlineRecipient: more than a chunk of
// new recipients given inline and two unknown bare ids (one first in
// byte order, one last) is refused naming the first in the request, and
// not one inline recipient is stored.
func TestRefusedInlineFanOutStoresNoInlineRecipient(t *testing.T) {
	t.Parallel()
	b := postSetup(t)
	var rs []batching.RecipientRef
	for i := range 20_001 {
		id := fmt.Sprintf("in%05d", i)
		rs = append(rs, batching.RecipientRef{ID: id, Email: id + "@example.com", Inline: true})
	}
	rs = slices.Insert(rs, 3, batching.RecipientRef{ID: "zz"})
	rs = append(rs, batching.RecipientRef{ID: "a0"})
	ev := &batching.Event{Type: "post", Actor: batching.Actor{ID: "a"}, Key: "inline", Recipients: rs}
	refusedNaming(t, b, ev, "recipients[3]")
	nothingStored(t, b, 0)
}

// TestFanOutsRaceWhileOneIsRefused: two fan-outs to the same 20,001
// recipients at once, one of them naming an unknown recipient last: the
// other is written whole, each recipient with one batch of one
// notification, and the refused one leaves nothing.
func TestFanOutsRaceWhileOneIsRefused(t *testing.T) {
	t.Parallel()
	b := postSetup(t)
	const n = 20_001
	good := storedAudience(t, b, n, "post")
	bad := &batching.Event{Type: "post", Actor: good.Actor, Recipients: append(slices.Clone(good.Recipients), batching.RecipientRef{ID: "nobody"})}
	for round := range 3 {
		if _, err := b.db.Pool.Exec(context.Background(), `TRUNCATE events, event_keys, batches, notifications, skips, river_job CASCADE`); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var goodErr, badErr error
		wg.Go(func() { _, goodErr = b.engine.Ingest(context.Background(), 1, good) })
		wg.Go(func() { _, badErr = b.engine.Ingest(context.Background(), 1, bad) })
		wg.Wait()
		var v *batching.ValidationError
		if goodErr != nil || !errors.As(badErr, &v) || v.Errors[0].Field != fmt.Sprintf("recipients[%d]", n) {
			t.Fatalf("round %d: good: %v; bad: %v", round, goodErr, badErr)
		}
		if got := b.count(t, `SELECT count(*) FROM batches WHERE item_count = 1`); got != n {
			t.Fatalf("round %d: %d batches of one notification, want %d", round, got, n)
		}
		if got := b.count(t, `SELECT count(*) FROM notifications`) + b.count(t, `SELECT count(*) FROM batches`); got != 2*n {
			t.Fatalf("round %d: %d rows, want %d", round, got, 2*n)
		}
	}
}

// TestUnknownRecipientCreatedDuringFanOut: the unknown recipient, first
// in the request and last in byte order, is created while the fan-out
// writes: the event is either written whole or refused naming it, and a
// refused one leaves nothing.
func TestUnknownRecipientCreatedDuringFanOut(t *testing.T) {
	for _, delay := range []time.Duration{5 * time.Millisecond, 40 * time.Millisecond, 100 * time.Millisecond} {
		t.Run(delay.String(), func(t *testing.T) { unknownCreatedDuring(t, delay) })
	}
}

func unknownCreatedDuring(t *testing.T, delay time.Duration) {
	t.Parallel()
	b := postSetup(t)
	const n = 30_001
	ev := storedAudience(t, b, n, "post")
	ev.Recipients = slices.Insert(ev.Recipients, 0, batching.RecipientRef{ID: "zz"})
	var wg sync.WaitGroup
	wg.Go(func() {
		time.Sleep(delay)
		b.recipient(t, "zz", "UTC")
	})
	res, err := b.engine.Ingest(context.Background(), 1, ev)
	wg.Wait()
	var v *batching.ValidationError
	switch {
	case err == nil:
		if res.Notifications != n+1 {
			t.Fatalf("%d notifications, want %d", res.Notifications, n+1)
		}
		t.Logf("written whole")
	case errors.As(err, &v) && v.Errors[0].Field == "recipients[0]":
		t.Logf("refused: %v", v.Errors[0].Message)
		nothingStored(t, b, n+1)
	default:
		t.Fatal(err)
	}
}
