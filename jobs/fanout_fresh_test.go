package jobs_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/db/dbtest"
	"github.com/lull-dev/lull/preferences/batching"
)

// secondChunkID is a recipient of storedAudience's event of n that falls
// in its second chunk (ids are chunked in byte order).
func secondChunkID(ev *batching.Event) string {
	ids := make([]string, len(ev.Recipients))
	for i, r := range ev.Recipients {
		ids[i] = r.ID
	}
	slices.Sort(ids)
	return ids[15_000]
}

// heldBatchCase is a batch another event holds open while a fan-out
// meets it: its mode and key, and whether the other event commits.
type heldBatchCase struct {
	mode, key string
	typeKey   *string
	commit    bool
}

// A fan-out's second chunk, read ahead as all fresh, meets a batch another
// event opened after the read and commits (or rolls back) while the COPY
// of its batches waits for it: the fan-out joins that batch (or opens its own),
// every recipient ends with one open batch, and the answer names the
// batch each notification went into. Both a cool-down key and the daily
// digest key, which another type's digest shares, are tried.
func TestFreshHintFanOutMeetsABatchOpenedSince(t *testing.T) {
	t.Parallel()
	for _, tc := range []heldBatchCase{
		{"cooldown", "post", strp("post"), true},
		{"cooldown", "post", strp("post"), false},
		{"daily", "digest:daily", nil, true},
	} {
		t.Run(fmt.Sprintf("%s,commit=%v", tc.mode, tc.commit), func(t *testing.T) {
			t.Parallel()
			// The read ahead that marks the chunk fresh gets a connection
			// and its answer within tens of milliseconds, or the fan-out
			// reads for itself and waits in the upsert instead, which is
			// right but not this test's case. On a loaded machine that
			// happens now and then: the case is tried up to three times.
			for attempt := 1; ; attempt++ {
				q := fanOutMeetsHeldBatch(t, tc)
				if strings.HasPrefix(q, `copy "batches"`) {
					break
				}
				if attempt == 3 {
					t.Errorf("in three tries the fan-out waited in %q, not the COPY of its batches", q)
					break
				}
				t.Logf("try %d waited in %q: the read ahead came late", attempt, q)
			}
		})
	}
}

// fanOutMeetsHeldBatch runs the case once, checks what it stored, and
// returns the statement the fan-out waited in.
func fanOutMeetsHeldBatch(t *testing.T, tc heldBatchCase) string {
	b := setup(t)
	ctx := context.Background()
	b.saveType(t, db.Type{Key: "post", DefaultMode: tc.mode})
	b.saveType(t, db.Type{Key: "other", DefaultMode: "daily"})
	const n = 20_001
	ev := storedAudience(t, b, n, "post")
	victim := secondChunkID(ev)
	now := b.clock.Now()
	other := b.hold(t, `INSERT INTO batches (recipient_id, batch_key, type_key, mode, opened_at, last_event_at, closes_at, window_ms, item_count)
			VALUES ($1, $2, $3, $4, $5, $5, $6, 300000, 1)`, victim, tc.key, tc.typeKey, tc.mode, now.Add(-time.Minute), now.Add(4*time.Minute))
	var otherID int64
	if err := other.QueryRow(ctx, `SELECT id FROM batches WHERE recipient_id = $1`, victim).Scan(&otherID); err != nil {
		t.Fatal(err)
	}
	res, err, q := dbtest.EndWhileBlocked(t, b.db, other, tc.commit, func() (*batching.IngestResult, error) {
		return b.engine.Ingest(ctx, 1, ev)
	})
	r := struct {
		res *batching.IngestResult
		err error
	}{res, err}
	if r.err != nil {
		t.Fatalf("fan-out: %v", r.err)
	}
	if r.res.Notifications != n || len(r.res.Batches) != n {
		t.Fatalf("%d notifications in %d batches, want %d", r.res.Notifications, len(r.res.Batches), n)
	}
	wantItems := 1
	if tc.commit {
		wantItems = 2
	}
	var victimBatch int64
	for _, ref := range r.res.Batches {
		if ref.Recipient == victim {
			victimBatch = ref.ID
		}
	}
	if tc.commit && victimBatch != otherID {
		t.Errorf("the answer puts %s's notification in batch %d, want the other event's %d", victim, victimBatch, otherID)
	}
	if got := b.count(t, `SELECT item_count FROM batches WHERE id = $1`, victimBatch); got != wantItems {
		t.Errorf("%s's batch holds %d items, want %d", victim, got, wantItems)
	}
	if got := b.count(t, `SELECT count(*) FROM batches WHERE state = 'open' AND NOT sealed`); got != n {
		t.Errorf("%d open batches, want %d", got, n)
	}
	if got := b.count(t, `SELECT count(*) FROM (SELECT 1 FROM batches WHERE state = 'open' GROUP BY recipient_id, batch_key HAVING count(*) > 1) x`); got != 0 {
		t.Errorf("%d recipients have two open batches", got)
	}
	if got := b.count(t, `SELECT count(*) FROM notifications n JOIN batches b ON b.id = n.batch_id AND b.recipient_id = n.recipient_id WHERE n.event_id = $1`, r.res.ID); got != n {
		t.Errorf("%d notifications in their recipient's batch, want %d", got, n)
	}
	// The other event's batch was written by hand, without a notification.
	if got := b.count(t, `SELECT count(*) FROM notifications WHERE batch_id = $1`, victimBatch); got != 1 {
		t.Errorf("%s's batch has %d notifications, want 1", victim, got)
	}
	return q
}

// The client goes away while the fan-out's plain INSERT waits for another
// event's batch: the fan-out ends with the request, gives its connections
// back and stores nothing.
func TestFreshHintFanOutCanceledInThePlainInsert(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.saveType(t, db.Type{Key: "post", DefaultMode: "cooldown"})
	ev := storedAudience(t, b, 20_001, "post")
	now := b.clock.Now()
	other := b.hold(t, `INSERT INTO batches (recipient_id, batch_key, type_key, mode, opened_at, last_event_at, closes_at, window_ms, item_count)
		VALUES ($1, 'post', 'post', 'cooldown', $2, $2, $3, 300000, 1)`, secondChunkID(ev), now.Add(-time.Minute), now.Add(4*time.Minute))
	dbtest.CancelWhileBlocked(t, b.db, "a fan-out", func(ctx context.Context) error {
		_, err := b.engine.Ingest(ctx, 1, ev)
		return err
	})
	if err := other.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i := 0; b.db.Pool.Stat().AcquiredConns() != 0; i++ {
		if i == 3000 {
			t.Fatalf("%d connections still taken 30 s after the request ended", b.db.Pool.Stat().AcquiredConns())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := b.count(t, `SELECT count(*) FROM events`) + b.count(t, `SELECT count(*) FROM notifications`); got != 0 {
		t.Fatalf("a canceled fan-out stored %d rows", got)
	}
	if got := b.count(t, `SELECT count(*) FROM batches`); got != 1 {
		t.Fatalf("%d batches, want only the other event's", got)
	}
}

// Unknown recipients in both chunks, the one in the later chunk first in
// the request: the first chunk refuses the event, which names that one,
// and nothing is stored. Done several times, as the reads ahead and the
// transaction race.
func TestFreshHintUnknownRecipientsInBothChunks(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.saveType(t, db.Type{Key: "post", DefaultMode: "cooldown"})
	ev := storedAudience(t, b, 20_001, "post")
	// "zz-nobody" sorts into the second chunk, "a-nobody" into the first.
	rs := slices.Clone(ev.Recipients)
	rs = slices.Insert(rs, 5, batching.RecipientRef{ID: "zz-nobody"})
	rs = append(rs, batching.RecipientRef{ID: "a-nobody"})
	for range 5 {
		e := *ev
		e.Recipients = slices.Clone(rs)
		if fe := refusedNaming(t, b, &e, "recipients[5]"); !strings.Contains(fe.Message, "zz-nobody") {
			t.Fatalf("got %v, want a validation error naming recipients[5], zz-nobody", fe)
		}
	}
	nothingStored(t, b, 20_001)
}

// Every recipient in immediate mode: the second chunk counts as fresh
// (immediate joins never conflict) and is opened by a plain INSERT, twice
// over for two events, one batch of one per notification.
func TestFreshHintImmediateSecondChunk(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.saveType(t, db.Type{Key: "post", DefaultMode: "immediate"})
	const n = 20_001
	ev := storedAudience(t, b, n, "post")
	res, err := b.engine.Ingest(context.Background(), 1, ev)
	if err != nil {
		t.Fatal(err)
	}
	if res.Notifications != n {
		t.Fatalf("%d notifications, want %d", res.Notifications, n)
	}
	if got := b.count(t, `SELECT count(*) FROM batches WHERE mode = 'immediate' AND item_count = 1`); got != n {
		t.Fatalf("%d immediate batches of one, want %d", got, n)
	}
	again, err := b.engine.Ingest(context.Background(), 1, ev)
	if err != nil || again.Notifications != n {
		t.Fatalf("second event: %+v, %v", again, err)
	}
	if got := b.count(t, `SELECT count(*) FROM batches WHERE mode = 'immediate' AND item_count = 1`); got != 2*n {
		t.Fatalf("%d immediate batches of one, want %d", got, 2*n)
	}
}

func strp(s string) *string { return &s }

// A fan-out refused for an unknown recipient lets the first chunk's read
// ahead end before it answers: cut off mid-query, its connection was
// closed instead of going back to the pool, and a client sending such
// events made the pool open a connection for every two or three.
func TestRefusedFanOutsKeepTheirConnections(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.saveType(t, db.Type{Key: "post", DefaultMode: "cooldown"})
	ev := storedAudience(t, b, 20_001, "post")
	ev.Recipients = append([]batching.RecipientRef{{ID: "nobody"}}, ev.Recipients...)
	refuse := func() {
		e := *ev
		if _, err := b.engine.Ingest(context.Background(), 1, &e); err == nil {
			t.Fatal("an event naming an unknown recipient was accepted")
		}
	}
	for range 5 {
		refuse() // the pool grows to what the fan-out uses
	}
	before := b.db.Pool.Stat().NewConnsCount()
	for range 20 {
		refuse()
	}
	if n := b.db.Pool.Stat().NewConnsCount() - before; n > 0 {
		t.Fatalf("20 refused fan-outs made the pool open %d new connections: each read cut off was closed", n)
	}
}

// A fan-out to new inline recipients opens its first chunk's batches
// with the ids it reserved, without asking whether any is open (its save
// just created the recipients), and still meets a batch another event
// opened for one of them meanwhile: the COPY waits for that event, and
// once it commits the fan-out joins its batch.
func TestNewInlineAudienceMeetsABatchOpenedSince(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	b.saveType(t, db.Type{Key: "post", DefaultMode: "cooldown"})
	const n = 20_001
	ev := newInlineEvent("post", n)
	ids := make([]string, n)
	for i, r := range ev.Recipients {
		ids[i] = r.ID
	}
	slices.Sort(ids)
	victim := ids[5_000]
	now := b.clock.Now()
	other := b.hold(t, `INSERT INTO batches (recipient_id, batch_key, type_key, mode, opened_at, last_event_at, closes_at, wake_at, window_ms, item_count)
		VALUES ($1, 'post', 'post', 'cooldown', $2, $2, $3, $3, 300000, 1)`, victim, now.Add(-time.Minute), now.Add(4*time.Minute))
	var otherID int64
	if err := other.QueryRow(ctx, `SELECT id FROM batches WHERE recipient_id = $1`, victim).Scan(&otherID); err != nil {
		t.Fatal(err)
	}
	res, err, q := dbtest.EndWhileBlocked(t, b.db, other, true, func() (*batching.IngestResult, error) {
		return b.engine.Ingest(ctx, 1, ev)
	})
	if !strings.HasPrefix(q, `copy "batches"`) {
		t.Errorf("the fan-out waited in %q, not the COPY of its first chunk's batches", q)
	}
	if err != nil {
		t.Fatalf("fan-out: %v", err)
	}
	if res.Notifications != n || len(res.Batches) != n {
		t.Fatalf("%d notifications in %d batches, want %d", res.Notifications, len(res.Batches), n)
	}
	for _, ref := range res.Batches {
		if ref.Recipient == victim && ref.ID != otherID {
			t.Errorf("the answer puts %s's notification in batch %d, want the other event's %d", victim, ref.ID, otherID)
		}
	}
	if got := b.count(t, `SELECT item_count FROM batches WHERE id = $1`, otherID); got != 2 {
		t.Errorf("%s's batch holds %d items, want 2", victim, got)
	}
	if got := b.count(t, `SELECT count(*) FROM batches WHERE state = 'open'`); got != n {
		t.Errorf("%d open batches, want %d", got, n)
	}
}

// A fan-out naming new recipients inline and unknown ones by id is
// refused naming the first unknown in the request (which sorts last),
// and saves none of the inline recipients: the bare ids are asked before
// the save (now only there, not again in the transaction).
func TestMixedFanOutWithUnknownIDsSavesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.saveType(t, db.Type{Key: "post", DefaultMode: "cooldown"})
	ev := newInlineEvent("post", 20_001)
	ev.Recipients = append([]batching.RecipientRef{{ID: "zz_nobody"}}, ev.Recipients...)
	ev.Recipients = append(ev.Recipients, batching.RecipientRef{ID: "aa_nobody"})
	_, err := b.engine.Ingest(context.Background(), 1, ev)
	var v *batching.ValidationError
	if !errors.As(err, &v) || len(v.Errors) != 1 || v.Errors[0].Field != "recipients[0]" {
		t.Fatalf("refused with %v, want recipients[0] named unknown", err)
	}
	if n := b.count(t, `SELECT count(*) FROM recipients WHERE id LIKE 'n%'`); n != 0 {
		t.Fatalf("%d inline recipients of the refused event were saved", n)
	}
}
