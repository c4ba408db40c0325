package jobs_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/db/dbtest"
	"github.com/lull-dev/lull/preferences"
	"github.com/lull-dev/lull/preferences/batching"
)

// storedAudience creates n recipients c0 … c(n-1) and returns an event of
// type typ to all of them as bare ids.
func storedAudience(t *testing.T, b *testBundle, n int, typ string) *batching.Event {
	t.Helper()
	if _, err := b.db.Pool.Exec(context.Background(), `INSERT INTO recipients (id, email, name, timezone, active)
		SELECT 'c' || i, 'c' || i || '@example.com', 'C', 'UTC', true FROM generate_series(0, $1 - 1) AS i`, n); err != nil {
		t.Fatal(err)
	}
	ev := &batching.Event{Type: typ, Actor: batching.Actor{ID: "alice", Name: "Alice"}}
	for i := range n {
		ev.Recipients = append(ev.Recipients, batching.RecipientRef{ID: "c" + itoa(int64(i))})
	}
	return ev
}

// TestFanOutOverSeveralChunks posts one event to more stored recipients
// than one chunk holds, so their settings are read ahead on a second
// connection while the chunk before is written. Each recipient
// gets one notification in one batch, the ones who cannot be notified
// (inactive, muted the type or the event's thread) a skip, in a later
// chunk too, and a replay of the event's key gives the
// first answer and writes nothing.
func TestFanOutOverSeveralChunks(t *testing.T) {
	t.Parallel()
	b := postSetup(t)
	const n = 20_500
	ev := storedAudience(t, b, n, "post")
	ev.Key, ev.BatchKey = "post-1", "thread-1"
	if _, err := b.db.Pool.Exec(context.Background(), `UPDATE recipients SET active = false WHERE id IN ('c3', 'c19999')`); err != nil {
		t.Fatal(err)
	}
	if _, err := b.db.Pool.Exec(context.Background(), `INSERT INTO muted_threads (recipient_id, batch_key) VALUES ('c12000', 'post+thread-1')`); err != nil {
		t.Fatal(err)
	}
	b.setPref(t, "c15001", "post", "never", 0, 0)
	res, err := b.engine.Ingest(context.Background(), 1, ev)
	if err != nil {
		t.Fatal(err)
	}
	if res.Notifications != n-4 || len(res.Batches) != n-4 || res.Suppressed != 4 {
		t.Fatalf("%d notifications in %d batches, %d suppressed; want %d, %d, 4", res.Notifications, len(res.Batches), res.Suppressed, n-4, n-4)
	}
	if got := b.count(t, `SELECT count(DISTINCT recipient_id) FROM notifications WHERE event_id = $1 AND batch_id IS NOT NULL`, res.ID); got != n-4 {
		t.Fatalf("%d recipients have a notification, want %d", got, n-4)
	}
	if got := b.count(t, `SELECT count(*) FROM notifications n JOIN batches b ON b.id = n.batch_id AND b.recipient_id = n.recipient_id WHERE n.event_id = $1`, res.ID); got != n-4 {
		t.Fatalf("%d notifications in their recipient's batch, want %d", got, n-4)
	}
	// The later chunks' batches were opened with ids reserved ahead and
	// not read back: the answer must still name each as stored.
	ids, rids, keys, closes := make([]int64, len(res.Batches)), make([]string, len(res.Batches)), make([]string, len(res.Batches)), make([]time.Time, len(res.Batches))
	for i, ref := range res.Batches {
		ids[i], rids[i], keys[i], closes[i] = ref.ID, ref.Recipient, ref.BatchKey, ref.ClosesAt
	}
	if got := b.count(t, `SELECT count(*) FROM unnest($1::bigint[], $2::text[], $3::text[], $4::timestamptz[]) AS v(id, rid, key, closes)
		JOIN batches b ON b.id = v.id AND b.recipient_id = v.rid AND b.batch_key = v.key AND b.closes_at = v.closes AND b.item_count = 1`,
		ids, rids, keys, closes); got != n-4 {
		t.Fatalf("%d of the answer's %d batches are as stored", got, n-4)
	}
	if got := b.count(t, `SELECT count(*) FROM skips WHERE recipient_id = 'c12000' AND reason = $1`, db.SkipMutedThread); got != 1 {
		t.Fatalf("the recipient who muted the thread has %d skips for it, want 1", got)
	}
	if got := b.count(t, `SELECT count(*) FROM skips`); got != 4 {
		t.Fatalf("%d skips logged, want 4", got)
	}
	again, err := b.engine.Ingest(context.Background(), 1, ev)
	if err != nil {
		t.Fatal(err)
	}
	if again.ID != res.ID || len(again.Batches) != len(res.Batches) || again.Batches[n-5].ID != res.Batches[n-5].ID {
		t.Fatalf("a replay answered event %d with %d batches, want the first answer", again.ID, len(again.Batches))
	}
	if got := b.count(t, `SELECT count(*) FROM notifications`); got != n-4 {
		t.Fatalf("%d notifications after a replay, want %d", got, n-4)
	}
}

// TestFanOutsRaceIntoTheSameBatches posts two events at once to the same
// audience of several chunks: each recipient ends with one batch holding
// both notifications, and neither event waits for the other forever.
func TestFanOutsRaceIntoTheSameBatches(t *testing.T) {
	t.Parallel()
	b := postSetup(t)
	const n = 20_001
	first := storedAudience(t, b, n, "post")
	second := &batching.Event{Type: "post", Actor: first.Actor, Recipients: append([]batching.RecipientRef(nil), first.Recipients...)}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, ev := range []*batching.Event{first, second} {
		wg.Go(func() { _, errs[i] = b.engine.Ingest(context.Background(), 1, ev) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if got := b.count(t, `SELECT count(*) FROM batches WHERE item_count = 2`); got != n {
		t.Fatalf("%d batches hold both notifications, want %d", got, n)
	}
	if got := b.count(t, `SELECT count(*) FROM batches`); got != n {
		t.Fatalf("%d batches, want one per recipient (%d)", got, n)
	}
}

// TestFanOutNamesAnUnknownRecipientInALaterChunk: a recipient missing in
// the last chunk refuses the whole event, whose earlier chunks were read
// ahead, and stores nothing.
func TestFanOutNamesAnUnknownRecipientInALaterChunk(t *testing.T) {
	t.Parallel()
	b := postSetup(t)
	ev := storedAudience(t, b, 20_001, "post")
	ev.Recipients = append(ev.Recipients, batching.RecipientRef{ID: "nobody"})
	refusedNaming(t, b, ev, "recipients[20001]")
	nothingStored(t, b, 20_001)
}

// TestFanOutRefusedWhileReadingAhead: a fan-out of five chunks to
// recipients with no batch open reads chunks ahead while it writes the
// first, and one unknown, first in the request but last in byte order,
// refuses it when its chunk is read: named, nothing stored, and the read
// ahead is let finish rather than cut off, so its connection goes back
// to the pool.
func TestFanOutRefusedWhileReadingAhead(t *testing.T) {
	t.Parallel()
	b := postSetup(t)
	ev := storedAudience(t, b, 40_001, "post")
	ev.Recipients = slices.Insert(ev.Recipients, 3, batching.RecipientRef{ID: "nobody"})
	refusedNaming(t, b, ev, "recipients[3]")
	before := b.db.Pool.Stat().NewConnsCount()
	for range 10 {
		refusedNaming(t, b, ev, "recipients[3]")
	}
	if n := b.db.Pool.Stat().NewConnsCount() - before; n > 0 {
		t.Errorf("10 refused fan-outs made the pool open %d new connections", n)
	}
	// Another unknown id, last in the request and first in byte order,
	// is the one the first chunk finds: the first in the request is
	// still the one named.
	ev.Recipients = append(ev.Recipients, batching.RecipientRef{ID: "0nobody"})
	refusedNaming(t, b, ev, "recipients[3]")
	nothingStored(t, b, 40_001)
}

// refusedNaming ingests ev and wants it refused with a validation error
// whose first field is field, which it returns.
func refusedNaming(t *testing.T, b *testBundle, ev *batching.Event, field string) preferences.FieldError {
	t.Helper()
	_, err := b.engine.Ingest(context.Background(), 1, ev)
	var v *batching.ValidationError
	if !errors.As(err, &v) || v.Errors[0].Field != field {
		t.Fatalf("got %v, want a validation error on %s", err, field)
	}
	return v.Errors[0]
}

// An event of more than a chunk giving most recipients inline and a few
// by id is stored whole, and an unknown id among them is named and
// stores nothing, not even the recipients given inline. (Checking only the
// ids for existence is a saving no test sees: the inline ones exist.)
func TestInlineFanOutNamesAnUnknownID(t *testing.T) {
	t.Parallel()
	b := postSetup(t)
	b.recipient(t, "known", "UTC")
	var rs []batching.RecipientRef
	for i := range 10_001 {
		id := fmt.Sprintf("in%05d", i)
		rs = append(rs, batching.RecipientRef{ID: id, Email: id + "@example.com", Inline: true})
	}
	ev := &batching.Event{Type: "post", Actor: batching.Actor{ID: "a"}, Recipients: append(rs, batching.RecipientRef{ID: "known"})}
	res, err := b.engine.Ingest(context.Background(), 1, ev)
	if err != nil || res.Notifications != 10_002 {
		t.Fatalf("got %+v, %v; want 10002 notifications", res, err)
	}
	for i := range rs {
		rs[i].ID, rs[i].Email = "x"+rs[i].ID, "x"+rs[i].Email
	}
	ev = &batching.Event{Type: "post", Actor: batching.Actor{ID: "a"}, Recipients: append(rs, batching.RecipientRef{ID: "nobody"})}
	refusedNaming(t, b, ev, "recipients[10001]")
	if got := b.count(t, `SELECT count(*) FROM recipients WHERE id LIKE 'x%'`); got != 0 {
		t.Fatalf("a refused fan-out stored %d recipients", got)
	}
}

// A fan-out of more than a chunk saves its inline recipients before its
// transaction; a replay of its idempotency key answers the first answer
// and must not save them again over what changed since.
func TestInlineFanOutReplayLeavesItsRecipientsAlone(t *testing.T) {
	t.Parallel()
	b := postSetup(t)
	var rs []batching.RecipientRef
	for i := range 10_001 {
		id := fmt.Sprintf("in%05d", i)
		rs = append(rs, batching.RecipientRef{ID: id, Email: id + "@example.com", Name: "First", Inline: true})
	}
	ev := &batching.Event{Type: "post", Key: "post-1", Actor: batching.Actor{ID: "a"}, Recipients: rs}
	ctx := context.Background()
	res, err := b.engine.Ingest(ctx, 1, ev)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.db.Pool.Exec(ctx, `UPDATE recipients SET name = 'Changed' WHERE id = 'in10000'`); err != nil {
		t.Fatal(err)
	}
	again, err := b.engine.Ingest(ctx, 1, ev)
	if err != nil || again.ID != res.ID {
		t.Fatalf("replay: %+v, %v; want event %d again", again, err, res.ID)
	}
	rec, err := db.GetRecipient(ctx, b.db.Bun, "in10000")
	if err != nil || rec.Name != "Changed" {
		t.Fatalf("after a replay the recipient is named %q (%v), want the change made since kept", rec.Name, err)
	}
}

// TestFanOutWithOneConnectionLeft: when the pool has no connection to
// spare for reading ahead, a fan-out reads in its own transaction rather
// than wait for one that the events holding them may never give back.
func TestFanOutWithOneConnectionLeft(t *testing.T) {
	t.Parallel()
	b := postSetup(t)
	ev := storedAudience(t, b, 20_001, "post")
	ctx := context.Background()
	for range b.db.Pool.Config().MaxConns - 1 {
		c, err := b.db.Pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Release()
	}
	res, err := b.engine.Ingest(ctx, 1, ev)
	if err != nil {
		t.Fatal(err)
	}
	if res.Notifications != 20_001 {
		t.Fatalf("%d notifications, want 20001", res.Notifications)
	}
}

// TestFanOutReadsAfterWaitingForAnotherEvent: a fan-out whose chunk waits
// for another transaction's lock on a batch reads its next chunk after
// that transaction ends, as a transaction reading for itself would: the
// other transaction's open batch for a recipient of the next chunk is
// joined, not missed (which would send a leading item at once).
func TestFanOutReadsAfterWaitingForAnotherEvent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	b.saveType(t, db.Type{Key: "post", DefaultMode: "cooldown", Lead: true})
	ev := storedAudience(t, b, 20_000, "post")
	now := b.clock.Now()
	openBatch := `INSERT INTO batches (recipient_id, batch_key, type_key, mode, opened_at, last_event_at, closes_at, window_ms, item_count)
		VALUES ($1, 'post', 'post', 'cooldown', $2, $2, $3, 300000, 1)`
	if _, err := b.db.Pool.Exec(ctx, openBatch, "c0", now.Add(-time.Minute), now.Add(4*time.Minute)); err != nil {
		t.Fatal(err)
	}
	// The other transaction holds c0's batch (first chunk) and opens one
	// for c9999 (last in byte order: the second chunk).
	other := b.hold(t, `UPDATE batches SET item_count = item_count + 1 WHERE recipient_id = 'c0'`)
	if _, err := other.Exec(ctx, openBatch, "c9999", now.Add(-time.Minute), now.Add(4*time.Minute)); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := b.engine.Ingest(ctx, 1, ev)
		done <- err
	}()
	// Wait until the fan-out waits for c0's batch, then give a read ahead
	// of the second chunk time to happen before the other commits.
	waiting := `SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock')`
	readAhead := `SELECT EXISTS (SELECT 1 FROM pg_stat_activity w JOIN pg_stat_activity p ON p.datname = w.datname AND p.pid <> w.pid
		WHERE w.datname = current_database() AND w.wait_event_type = 'Lock'
		  AND p.state = 'idle' AND p.query LIKE '%last_event_at%' AND p.query_start > w.query_start)`
	for !b.exists(t, waiting) {
		time.Sleep(5 * time.Millisecond)
	}
	for i := 0; i < 200 && !b.exists(t, readAhead); i++ {
		time.Sleep(5 * time.Millisecond)
	}
	if err := other.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := b.count(t, `SELECT count(*) FROM batches WHERE recipient_id = 'c9999'`); got != 1 {
		t.Fatalf("c9999 has %d batches, want 1: the other transaction's, which the fan-out joins", got)
	}
	if got := b.count(t, `SELECT item_count FROM batches WHERE recipient_id = 'c9999'`); got != 2 {
		t.Fatalf("c9999's batch holds %d items, want 2", got)
	}
}

// TestFanOutRereadsWhatItReadAheadOfAWait: a fan-out to an audience with
// no batch open reads its later chunks ahead of its writes, and one of
// its first chunk's batches turns out to be opened meanwhile by another
// event, which also unsubscribed a recipient of the third chunk. The
// fan-out waits for that event, joins its batch, and routes the chunks it
// had read before the wait as read after it: the unsubscribed recipient
// gets a skip, not a notification.
func TestFanOutRereadsWhatItReadAheadOfAWait(t *testing.T) {
	t.Parallel()
	b := postSetup(t)
	const n = 30_001
	ev := storedAudience(t, b, n, "post")
	ids := make([]string, n)
	for i, r := range ev.Recipients {
		ids[i] = r.ID
	}
	slices.Sort(ids)
	victim := ids[25_000] // third chunk; c0 is first in the first
	now := b.clock.Now()
	other := b.hold(t, `INSERT INTO batches (recipient_id, batch_key, type_key, mode, opened_at, last_event_at, closes_at, window_ms, item_count)
		VALUES ('c0', 'post', 'post', 'cooldown', $1, $1, $2, 300000, 1)`, now.Add(-time.Minute), now.Add(4*time.Minute))
	if _, err := other.Exec(context.Background(), `UPDATE recipients SET unsubscribed = true WHERE id = $1`, victim); err != nil {
		t.Fatal(err)
	}
	// Commit once the read ahead rests, its third chunk read: idle for a
	// while after a probe for open batches.
	rested := `SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE datname = current_database()
		AND state = 'idle' AND query LIKE '%batches_id_seq%' AND state_change < clock_timestamp() - interval '200 ms')`
	res := b.ingestWhile(t, ev, other, func() {
		for i := 0; i < 400 && !b.exists(t, rested); i++ {
			time.Sleep(5 * time.Millisecond)
		}
	}, true)
	if res.Notifications != n-1 {
		t.Errorf("%d notifications, want %d", res.Notifications, n-1)
	}
	if notes, skips := b.notified(t, victim); notes != 0 || skips != 1 {
		t.Errorf("%s: %d notifications and %d skips, want none and a skip: routed as read before the wait", victim, notes, skips)
	}
	if got := b.count(t, `SELECT item_count FROM batches WHERE recipient_id = 'c0'`); got != 2 {
		t.Errorf("c0's batch holds %d items, want 2: the other event's, joined", got)
	}
}

func (b *testBundle) exists(t *testing.T, sql string) bool {
	t.Helper()
	var ok bool
	if err := b.db.Pool.QueryRow(context.Background(), sql).Scan(&ok); err != nil {
		t.Fatal(err)
	}
	return ok
}

// TestFanOutEndsWhenTheClientGoesAway: a fan-out waiting for a chunk read
// ahead ends with the request's context, however the read ahead notices
// the end first, and gives its connections back.
func TestFanOutEndsWhenTheClientGoesAway(t *testing.T) {
	t.Parallel()
	b := postSetup(t)
	ev := storedAudience(t, b, 10_001, "post")
	ev.BatchKey = "thread-1"
	// Reading the thread's mutes waits for this lock, so the transaction
	// waits for the first chunk read ahead.
	lock := b.hold(t, `LOCK TABLE muted_threads IN ACCESS EXCLUSIVE MODE`)
	waiting := `SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock')`
	for range 10 {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			e := *ev
			_, err := b.engine.Ingest(ctx, 1, &e)
			done <- err
		}()
		for !b.exists(t, waiting) {
			time.Sleep(5 * time.Millisecond)
		}
		cancel()
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("got %v, want the request's end", err)
			}
		case <-time.After(time.Minute):
			t.Fatal("the fan-out still waits a minute after its request ended")
		}
	}
	if err := lock.Rollback(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Connections whose query was cancelled are closed in the background.
	for i := 0; b.db.Pool.Stat().AcquiredConns() != 0; i++ {
		if i == 6000 {
			t.Fatalf("%d connections still taken a minute after the requests ended", b.db.Pool.Stat().AcquiredConns())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := b.count(t, `SELECT count(*) FROM events`); got != 0 {
		t.Fatalf("%d events stored by requests that ended", got)
	}
}

// TestFanOutWhileATableLockIsAwaited: a schema change waiting to lock the
// batches table for itself waits for the fan-out's transaction, which
// holds the table already. Reading ahead on another connection would wait
// behind the schema change, and the transaction for the read: a cycle the
// database cannot see. The fan-out reads in its transaction instead, which
// it may do at once, and completes.
func TestFanOutWhileATableLockIsAwaited(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.saveType(t, db.Type{Key: "post", DefaultMode: "cooldown", Lead: true})
	ev := storedAudience(t, b, 20_001, "post")
	now := b.clock.Now()
	if _, err := b.db.Pool.Exec(context.Background(), `INSERT INTO batches (recipient_id, batch_key, type_key, mode, opened_at, last_event_at, closes_at, window_ms, item_count)
		VALUES ('c0', 'post', 'post', 'cooldown', $1, $1, $2, 300000, 1)`, now.Add(-time.Minute), now.Add(4*time.Minute)); err != nil {
		t.Fatal(err)
	}
	// The fan-out's first chunk waits for c0's batch, holding the table.
	other := b.hold(t, `UPDATE batches SET item_count = item_count + 1 WHERE recipient_id = 'c0'`)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := b.engine.Ingest(ctx, 1, ev)
		done <- err
	}()
	waiting := func(n int) {
		for b.count(t, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`) < n {
			time.Sleep(5 * time.Millisecond)
		}
	}
	waiting(1)
	locked := make(chan error, 1)
	go func() {
		locked <- b.db.InTx(context.Background(), func(tx pgx.Tx) error {
			_, err := tx.Exec(context.Background(), `LOCK TABLE batches IN ACCESS EXCLUSIVE MODE`)
			return err
		})
	}()
	waiting(2)
	if err := other.Commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		cancel()
		<-done
		t.Fatal("the fan-out still waits a minute after the batch it waited for was free")
	}
	if err := <-locked; err != nil {
		t.Fatal(err)
	}
	if got := b.count(t, `SELECT count(*) FROM notifications`); got != 20_001 {
		t.Fatalf("%d notifications, want 20001", got)
	}
}

// TestInlineFanOutRetriedWhileRunning: a client that times out on a large
// fan-out and posts it again with the same idempotency key while the
// first is still being written gets the first answer, and the second
// request's recipient details are not saved: a replay changes nothing.
func TestInlineFanOutRetriedWhileRunning(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	b.saveType(t, db.Type{Key: "post", DefaultMode: "cooldown"})
	b.recipient(t, "held", "UTC")
	now := b.clock.Now()
	if _, err := b.db.Pool.Exec(ctx, `INSERT INTO batches (recipient_id, batch_key, type_key, mode, opened_at, last_event_at, closes_at, window_ms, item_count)
		VALUES ('held', 'post', 'post', 'cooldown', $1, $1, $2, 300000, 1)`, now, now.Add(5*time.Minute)); err != nil {
		t.Fatal(err)
	}
	event := func(name string) *batching.Event {
		rs := []batching.RecipientRef{{ID: "held"}}
		for i := range 10_001 {
			id := fmt.Sprintf("in%05d", i)
			rs = append(rs, batching.RecipientRef{ID: id, Email: id + "@example.com", Name: name, Inline: true})
		}
		return &batching.Event{Type: "post", Key: "post-1", Actor: batching.Actor{ID: "a"}, Recipients: rs}
	}
	// The first request waits for held's batch, its key claimed.
	other := b.hold(t, `UPDATE batches SET item_count = item_count + 1 WHERE recipient_id = 'held'`)
	waiting := func(n int) bool {
		return b.count(t, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`) >= n
	}
	results := make([]*batching.IngestResult, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	wg.Go(func() { results[0], errs[0] = b.engine.Ingest(ctx, 1, event("First")) })
	for !waiting(1) {
		time.Sleep(5 * time.Millisecond)
	}
	wg.Go(func() { results[1], errs[1] = b.engine.Ingest(ctx, 1, event("Second")) })
	for !waiting(2) {
		time.Sleep(5 * time.Millisecond)
	}
	if err := other.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if results[1].ID != results[0].ID {
		t.Fatalf("the retry created event %d, want the first answer (event %d)", results[1].ID, results[0].ID)
	}
	if got := b.count(t, `SELECT count(*) FROM recipients WHERE name = 'Second'`); got != 0 {
		t.Fatalf("the replayed request renamed %d recipients", got)
	}
}

// TestInlineFanOutWithTwoConnectionsLeft: when the pool cannot spare the
// connections to save inline recipients beside the event's transaction,
// the transaction saves them itself instead of waiting for connections
// that fan-outs holding the others may be waiting for as well.
func TestInlineFanOutWithTwoConnectionsLeft(t *testing.T) {
	t.Parallel()
	b := postSetup(t)
	ctx := context.Background()
	var rs []batching.RecipientRef
	for i := range 10_001 {
		id := fmt.Sprintf("in%05d", i)
		rs = append(rs, batching.RecipientRef{ID: id, Email: id + "@example.com", Inline: true})
	}
	for range b.db.Pool.Config().MaxConns - 2 {
		c, err := b.db.Pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Release()
	}
	res, err := b.engine.Ingest(ctx, 1, &batching.Event{Type: "post", Key: "k", Actor: batching.Actor{ID: "a"}, Recipients: rs})
	if err != nil || res.Notifications != 10_001 {
		t.Fatalf("got %+v, %v; want 10001 notifications", res, err)
	}
}

// A fan-out to new recipients given inline, whose settings are known from
// their save instead of read back, routes each as a fan-out to the same
// recipients stored beforehand does: the same batch key and close time
// (a daily digest, at 08:00 in each one's zone, UTC when none is given).
func TestNewInlineAudienceRoutesAsStored(t *testing.T) {
	t.Parallel()
	const n = 20_001
	zones := []string{"", "Asia/Tokyo", "America/New_York", "Europe/Berlin", "Pacific/Auckland"}
	ev := func() *batching.Event {
		e := &batching.Event{Type: "digest", Actor: batching.Actor{ID: "alice", Name: "Alice"}}
		for i := range n {
			id := "n" + itoa(int64(i))
			e.Recipients = append(e.Recipients, batching.RecipientRef{ID: id, Email: id + "@example.com", Timezone: zones[i%len(zones)], Inline: true})
		}
		return e
	}
	closes := func(stored bool) map[string]string {
		b := setup(t)
		b.saveType(t, db.Type{Key: "digest", DefaultMode: "daily"})
		e := ev()
		if stored {
			var rs []db.InlineRecipient
			for _, r := range e.Recipients {
				rs = append(rs, db.InlineRecipient{ID: r.ID, Email: r.Email, Timezone: r.Timezone})
			}
			if err := pgx.BeginFunc(context.Background(), b.db.Pool, func(tx pgx.Tx) error { return db.UpsertRecipients(context.Background(), tx, rs) }); err != nil {
				t.Fatal(err)
			}
		}
		res, err := b.engine.Ingest(context.Background(), 1, e)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, ref := range res.Batches {
			out[ref.Recipient] = ref.BatchKey + " " + ref.ClosesAt.UTC().Format(time.RFC3339)
		}
		return out
	}
	inline, stored := closes(false), closes(true)
	if len(inline) != n || len(stored) != n {
		t.Fatalf("%d and %d batches, want %d", len(inline), len(stored), n)
	}
	for id, want := range stored {
		if inline[id] != want {
			t.Fatalf("%s: %s given new inline, %s stored first", id, inline[id], want)
		}
	}
}

// newInlineEvent is an event of type typ to n new recipients given inline,
// n0 … n(n-1).
func newInlineEvent(typ string, n int) *batching.Event {
	ev := &batching.Event{Type: typ, Actor: batching.Actor{ID: "alice", Name: "Alice"}}
	for i := range n {
		id := "n" + itoa(int64(i))
		ev.Recipients = append(ev.Recipients, batching.RecipientRef{ID: id, Email: id + "@example.com", Inline: true})
	}
	return ev
}

// ingestWhile posts ev, runs change once the fan-out waits for a lock, and
// ends other (commit or rollback), returning the fan-out's answer.
func (b *testBundle) ingestWhile(t *testing.T, ev *batching.Event, other pgx.Tx, change func(), commit bool) *batching.IngestResult {
	t.Helper()
	done := make(chan error, 1)
	var res *batching.IngestResult
	go func() {
		var err error
		res, err = b.engine.Ingest(context.Background(), 1, ev)
		done <- err
	}()
	dbtest.LockWaiter(t, b.db)
	change()
	end := other.Rollback
	if commit {
		end = other.Commit
	}
	if err := end(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	return res
}

// warmPool opens n of the pool's connections and leaves them idle, so
// that a fan-out finds the two it saves its recipients on at once rather
// than waiting to open them on a loaded machine (it waits 50 ms, then
// saves them in its own transaction).
func (b *testBundle) warmPool(t *testing.T, n int) {
	t.Helper()
	var conns []*pgxpool.Conn
	for range n {
		c, err := b.db.Pool.Acquire(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	for _, c := range conns {
		c.Release()
	}
}

// postSetup is a test bundle with the type post, in cool-down.
func postSetup(t *testing.T) *testBundle {
	t.Helper()
	b := setup(t)
	b.saveType(t, db.Type{Key: "post", DefaultMode: "cooldown"})
	return b
}

// notified counts id's notifications and skips.
func (b *testBundle) notified(t *testing.T, id string) (notes, skips int) {
	t.Helper()
	return b.count(t, `SELECT count(*) FROM notifications WHERE recipient_id = $1`, id), b.count(t, `SELECT count(*) FROM skips WHERE recipient_id = $1`, id)
}

// A fan-out to new inline recipients whose event waits for a lock before
// it is stored: changes made to its recipients meanwhile (deactivated,
// unsubscribed, a preference for the type) are routed as a transaction
// reading them after the wait would, not as the recipients were before.
func TestNewInlineAudienceSeesChangesMadeBeforeItsEventIsStored(t *testing.T) {
	t.Parallel()
	b := postSetup(t)
	ev := newInlineEvent("post", 20_001)
	other := b.hold(t, `LOCK TABLE events IN SHARE ROW EXCLUSIVE MODE`)
	res := b.ingestWhile(t, ev, other, func() { b.changeFour(t) }, false)
	b.routedFour(t, res, 0)
}

// changeFour changes four recipients of newInlineEvent's audience,
// creating them if need be: n5 deactivated, n15006 unsubscribed, n19007
// choosing never for the type post and n8 immediate.
func (b *testBundle) changeFour(t *testing.T) {
	t.Helper()
	if _, err := b.db.Pool.Exec(context.Background(), `
		INSERT INTO recipients (id, email) VALUES ('n5', 'n5@example.com'), ('n15006', 'n15006@example.com'), ('n8', 'n8@example.com'), ('n19007', 'n19007@example.com') ON CONFLICT (id) DO NOTHING;
		UPDATE recipients SET active = false WHERE id = 'n5';
		UPDATE recipients SET unsubscribed = true WHERE id = 'n15006';
		INSERT INTO type_preferences (recipient_id, type_key, mode) VALUES ('n19007', 'post', 'never'), ('n8', 'post', 'immediate')`); err != nil {
		t.Fatal(err)
	}
}

// routedFour checks that a fan-out to newInlineEvent's 20,001 recipients
// (res) was routed after changeFour: three skipped, each with earlier
// notifications from events before it, and n8 in an immediate batch.
func (b *testBundle) routedFour(t *testing.T, res *batching.IngestResult, earlier int) {
	t.Helper()
	for _, id := range []string{"n5", "n15006", "n19007"} {
		if notes, skips := b.notified(t, id); notes != earlier || skips != 1 {
			t.Errorf("%s: %d notifications and %d skips, want %d and a skip", id, notes, skips, earlier)
		}
	}
	if mode := b.count(t, `SELECT count(*) FROM batches WHERE recipient_id = 'n8' AND mode = 'immediate'`); mode != 1 {
		t.Error("n8 chose immediate, but its notification is not in an immediate batch")
	}
	if res.Notifications != 19_998 || res.Suppressed != 3 {
		t.Errorf("answer: %d notifications, %d suppressed; want 19998 and 3", res.Notifications, res.Suppressed)
	}
}

// A fan-out to new inline recipients whose first chunk waits for another
// event's batch, which also unsubscribes a recipient of the second chunk
// before it commits: the second chunk is routed as read after the wait,
// not as the recipients were saved, whether the batch waited for is
// joined or is due or full (then sealed, and a new one opened).
func TestNewInlineAudienceRereadsAfterMeetingAnotherEvent(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		maxItems int
		closesIn time.Duration
		items    int
	}{{"open", 0, 4 * time.Minute, 1}, {"due", 0, -time.Second, 1}, {"full", 2, 4 * time.Minute, 2}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			b.saveType(t, db.Type{Key: "post", DefaultMode: "cooldown", MaxItems: tc.maxItems})
			ev := newInlineEvent("post", 20_001)
			victim := secondChunkID(ev)
			b.warmPool(t, 6)
			now := b.clock.Now()
			other := b.hold(t, `INSERT INTO batches (recipient_id, batch_key, type_key, mode, opened_at, last_event_at, closes_at, window_ms, item_count)
				VALUES ('n0', 'post', 'post', 'cooldown', $1, $1, $2, 300000, $3)`, now.Add(-time.Minute), now.Add(tc.closesIn), tc.items)
			b.ingestWhile(t, ev, other, func() {
				// The second chunk is saved while the first waits.
				for tries := 0; ; tries++ {
					tag, err := other.Exec(context.Background(), `UPDATE recipients SET unsubscribed = true WHERE id = $1`, victim)
					if err != nil {
						t.Fatalf("unsubscribe %s: %v", victim, err)
					}
					if tag.RowsAffected() == 1 {
						break
					}
					if tries == 200 {
						t.Fatalf("%s not saved after 10 s: the fan-out did not save its recipients ahead", victim)
					}
					time.Sleep(50 * time.Millisecond)
				}
			}, true)
			if notes, skips := b.notified(t, victim); notes != 0 || skips != 1 {
				t.Errorf("%s: %d notifications and %d skips, want none and a skip", victim, notes, skips)
			}
			if got := b.count(t, `SELECT count(*) FROM notifications WHERE recipient_id = 'n0'`); got != 1 {
				t.Errorf("n0 has %d notifications, want 1", got)
			}
		})
	}
}

// A schema change that takes recipients, then events (as a migration
// altering both in one transaction would), meets a fan-out whose
// transaction holds events while its recipients are saved on another
// connection. That gives up waiting and the transaction saves the
// recipients itself, where PostgreSQL sees the cycle and refuses one of
// the two as a deadlock instead of both waiting for ever.
func TestFanOutSaveAndSchemaChangeDoNotWaitForEver(t *testing.T) {
	t.Parallel()
	b := postSetup(t)
	b.warmPool(t, 6)
	ctx := context.Background()
	ddl := b.hold(t, `SET lock_timeout = '60s'; LOCK TABLE recipients IN SHARE MODE`)
	done := make(chan error, 1)
	go func() { _, err := b.engine.Ingest(ctx, 1, newInlineEvent("post", 20_001)); done <- err }()
	dbtest.LockWaiter(t, b.db)
	_, ddlErr := ddl.Exec(ctx, `LOCK TABLE events IN ACCESS EXCLUSIVE MODE`)
	if ddlErr == nil {
		ddl.Commit(ctx)
	} else {
		ddl.Rollback(ctx)
	}
	fanErr := <-done
	deadlock := func(err error) bool {
		var pgErr *pgconn.PgError
		return errors.As(err, &pgErr) && pgErr.Code == "40P01"
	}
	if ddlErr != nil && !deadlock(ddlErr) || fanErr != nil && !deadlock(fanErr) || ddlErr != nil && fanErr != nil {
		t.Fatalf("schema change: %v; fan-out: %v; want one of them through and the other, if any, refused as a deadlock", ddlErr, fanErr)
	}
}

// A fan-out's recipients are saved chunk by chunk beside its transaction.
// When that save meets a recipient of the second chunk that another
// request is creating, it gives up after a second, and the transaction
// saves that chunk and the later ones itself, waiting for the other
// request where the database sees both: every recipient is notified once,
// and the one created meanwhile keeps the name that request gave it and
// gets the address the event gives.
func TestFanOutSavesTheRestItselfWhenItsSaveGivesUp(t *testing.T) {
	t.Parallel()
	b := postSetup(t)
	b.warmPool(t, 6)
	ev := newInlineEvent("post", 30_001)
	held := secondChunkID(ev)
	other := b.hold(t, `INSERT INTO recipients (id, name) VALUES ($1, 'Held')`, held)
	res := b.ingestWhile(t, ev, other, func() {
		// Past the save's wait, the event's transaction (the one holding
		// the events table) waits for the row itself.
		for deadline := time.Now().Add(20 * time.Second); b.count(t, `SELECT count(*) FROM pg_stat_activity a
			WHERE datname = current_database() AND wait_event_type = 'Lock'
			  AND EXISTS (SELECT 1 FROM pg_locks l WHERE l.pid = a.pid AND l.relation = 'events'::regclass AND l.granted)`) == 0; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the event's transaction does not wait for the row after 20 s; waiting: %q", dbtest.LockWaiter(t, b.db))
			}
		}
	}, true)
	if res.Notifications != 30_001 {
		t.Errorf("%d notifications, want 30001", res.Notifications)
	}
	if n := b.count(t, `SELECT count(DISTINCT recipient_id) FROM notifications WHERE event_id = $1`, res.ID); n != 30_001 {
		t.Errorf("%d recipients notified, want 30001", n)
	}
	if n := b.count(t, `SELECT count(*) FROM recipients WHERE id = $1 AND name = 'Held' AND email = $1 || '@example.com'`, held); n != 1 {
		t.Errorf("%s does not hold the name its creator gave and the address the event gave", held)
	}
}

// A fan-out to an inline audience stored already, whose fields it
// changes none of, into batches of its own, routes each recipient by its
// settings as the save read them: one deactivated, one unsubscribed and
// one who chose never for the type are skipped, and one who chose
// immediate gets an immediate batch.
func TestStoredInlineAudienceRoutesAsSaved(t *testing.T) {
	t.Parallel()
	b := postSetup(t)
	b.warmPool(t, 6)
	ctx := context.Background()
	if _, err := b.engine.Ingest(ctx, 1, newInlineEvent("post", 20_001)); err != nil {
		t.Fatal(err)
	}
	b.changeFour(t)
	// Into batches of its own: a chunk joining batches another event
	// opened would have the later chunks read again.
	again := newInlineEvent("post", 20_001)
	again.BatchKey = "thread-2"
	res, err := b.engine.Ingest(ctx, 1, again)
	if err != nil {
		t.Fatal(err)
	}
	b.routedFour(t, res, 1)
}
