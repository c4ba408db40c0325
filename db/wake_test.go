package db_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/db/dbtest"
)

// wakeAndClose is batch id's wake and close times.
func wakeAndClose(t *testing.T, q db.Querier, id int64) (wake, closes time.Time) {
	t.Helper()
	if err := q.QueryRow(context.Background(), `SELECT wake_at, closes_at FROM batches WHERE id = $1`, id).Scan(&wake, &closes); err != nil {
		t.Fatal(err)
	}
	return wake, closes
}

// TestASlideUpdatesOpenBatchesInPlace: the same audience notified again
// while its cool-downs are open slides every close time and leaves the
// wake times, so that PostgreSQL updates the rows in place (HOT) rather
// than writing a new entry in each index of batches. It fails when an
// indexed column changes in the join (closes_at indexed again, wake_at
// moved with the close) or the pages have no room for the new versions.
func TestASlideUpdatesOpenBatchesInPlace(t *testing.T) {
	t.Parallel()
	const n = 500
	rids := make([]string, n)
	for i := range rids {
		rids[i] = fmt.Sprintf("r%04d", i)
	}
	d := hintDB(t, rids...)
	ctx := context.Background()
	joins := make([]db.BatchJoin, n)
	for i, rid := range rids {
		joins[i] = freshJoin(rid, freshNow, false)
	}
	opened, err := joinInTx(ctx, d, joins, freshNow)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := d.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	later := freshNow.Add(10 * time.Minute)
	if _, err := db.JoinBatches(ctx, tx, joins, later); err != nil {
		t.Fatal(err)
	}
	var updated, hot int
	if err := tx.QueryRow(ctx, `SELECT pg_stat_get_xact_tuples_updated('batches'::regclass),
		pg_stat_get_xact_tuples_hot_updated('batches'::regclass)`).Scan(&updated, &hot); err != nil {
		t.Fatal(err)
	}
	if updated != n || hot < n*9/10 {
		t.Fatalf("%d of %d batches updated, %d of them in place; want all, at least nine in ten in place", updated, n, hot)
	}
	wake, closes := wakeAndClose(t, tx, opened[0].ID)
	if !wake.Equal(freshNow.Add(time.Hour)) || !closes.Equal(later.Add(time.Hour)) {
		t.Fatalf("after a slide: wakes at %v, closes at %v; want the wake as opened (%v) and the close slid (%v)",
			wake, closes, freshNow.Add(time.Hour), later.Add(time.Hour))
	}
}

// TestABatchItsJoinsFillWakesAtOnce: a join that fills a cool-down closes
// it at once, and its wake time moves with it, or the sweep would look
// for it only at its old close time.
func TestABatchItsJoinsFillWakesAtOnce(t *testing.T) {
	t.Parallel()
	d := hintDB(t, "almost")
	ctx := context.Background()
	first := hintJoin{"almost", "cap", "cooldown", "cap", 2}.join(false)
	opened, err := joinInTx(ctx, d, []db.BatchJoin{first}, freshNow)
	if err != nil {
		t.Fatal(err)
	}
	later := freshNow.Add(time.Minute)
	if _, err := joinInTx(ctx, d, []db.BatchJoin{first}, later); err != nil {
		t.Fatal(err)
	}
	wake, closes := wakeAndClose(t, d.Pool, opened[0].ID)
	if !closes.Equal(later) || !wake.Equal(later) {
		t.Fatalf("filled: wakes at %v, closes at %v; want both at %v", wake, closes, later)
	}
}

// TestSweepCatchesUpWakesItSteppedOver: a batch whose close slid past
// its wake time is moved up to its close by CatchUpWakes and is not
// reported due; a batch due with its wake time left behind (inserted
// without one) is; and a batch another transaction holds is left for the
// next sweep at once, not waited for.
func TestSweepCatchesUpWakesItSteppedOver(t *testing.T) {
	t.Parallel()
	d := hintDB(t, "slid", "due", "held")
	ctx := context.Background()
	now := freshNow
	open := func(rid string, wake, closes time.Time) int64 {
		var id int64
		if err := d.Pool.QueryRow(ctx, `INSERT INTO batches (recipient_id, batch_key, type_key, mode, opened_at, last_event_at, closes_at, wake_at, item_count)
			VALUES ($1, 'task', 'task', 'cooldown', $2, $2, $3, $4, 1) RETURNING id`, rid, now.Add(-time.Hour), closes, wake).Scan(&id); err != nil {
			t.Fatal(err)
		}
		return id
	}
	slid := open("slid", now.Add(-time.Minute), now.Add(time.Hour))
	due := open("due", now.Add(-2*time.Minute), now.Add(-time.Minute))
	held := open("held", now.Add(-3*time.Minute), now.Add(2*time.Hour))

	other, err := d.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Rollback(ctx)
	if _, err := other.Exec(ctx, `SELECT 1 FROM batches WHERE id = $1 FOR UPDATE`, held); err != nil {
		t.Fatal(err)
	}
	quick, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := db.CatchUpWakes(quick, d.Pool, now, 100); err != nil {
		t.Fatalf("catching up beside a held batch: %v", err)
	}
	if wake, closes := wakeAndClose(t, d.Pool, slid); !wake.Equal(closes) {
		t.Fatalf("slid batch wakes at %v, closes at %v; want its wake moved up to its close", wake, closes)
	}
	if wake, _ := wakeAndClose(t, d.Pool, held); !wake.Equal(now.Add(-3 * time.Minute)) {
		t.Fatalf("held batch's wake moved to %v while another transaction held it", wake)
	}
	ids, err := db.DueBatches(ctx, d.Pool, now, 100)
	if err != nil || len(ids) != 1 || ids[0] != due {
		t.Fatalf("due batches %v, %v; want only %d", ids, err, due)
	}
}

// TestAnOpenBatchNeverWakesAfterItCloses: the database refuses a close
// time moved before the wake time, which would leave the batch to the
// sweep only after its close had long passed.
func TestAnOpenBatchNeverWakesAfterItCloses(t *testing.T) {
	t.Parallel()
	d := hintDB(t, "r")
	ctx := context.Background()
	opened, err := joinInTx(ctx, d, []db.BatchJoin{freshJoin("r", freshNow, false)}, freshNow)
	if err != nil {
		t.Fatal(err)
	}
	_, err = d.Pool.Exec(ctx, `UPDATE batches SET closes_at = $2 WHERE id = $1`, opened[0].ID, freshNow)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.ConstraintName != "batches_wake_by_close" {
		t.Fatalf("close moved before the wake: %v; want batches_wake_by_close to refuse it", err)
	}
	if err := db.MakeDue(ctx, d.Pool, opened[0].ID, freshNow); err != nil {
		t.Fatalf("flush now: %v", err)
	}
	if wake, closes := wakeAndClose(t, d.Pool, opened[0].ID); !wake.Equal(freshNow) || !closes.Equal(freshNow) {
		t.Fatalf("flushed now: wakes at %v, closes at %v; want both at %v", wake, closes, freshNow)
	}
}

// TestThePreviousReleaseWorksOnTheNewSchema: during a rolling upgrade
// the previous release writes batches knowing nothing of wake_at. Its
// join that fills a batch and its "flush now" move close times before
// the wake time and must not be refused (production has no check; the
// test databases add one, dropped here); a batch it opens gets the
// default wake time and is found by the sweep once due.
func TestThePreviousReleaseWorksOnTheNewSchema(t *testing.T) {
	t.Parallel()
	d := hintDB(t, "full", "now", "old")
	ctx := context.Background()
	if _, err := d.Pool.Exec(ctx, `ALTER TABLE batches DROP CONSTRAINT batches_wake_by_close`); err != nil {
		t.Fatal(err)
	}
	full := hintJoin{"full", "cap", "cooldown", "cap", 2}.join(false)
	opened, err := joinInTx(ctx, d, []db.BatchJoin{full, freshJoin("now", freshNow, false)}, freshNow)
	if err != nil {
		t.Fatal(err)
	}
	later := freshNow.Add(time.Minute)
	// The previous release's statements, as it sent them.
	const fill = `
		INSERT INTO batches AS b (recipient_id, batch_key, mode, type_key, window_ms, max_wait_ms, closes_at,
		                          opened_at, last_event_at, item_count)
		VALUES ($1, $2, 'cooldown', $2, 3600000, 0, $3, $4, $4, 1)
		ON CONFLICT (recipient_id, batch_key) WHERE state = 'open' AND mode <> 'immediate' AND NOT sealed
		DO UPDATE SET item_count = b.item_count + EXCLUDED.item_count,
		              closes_at = EXCLUDED.last_event_at`
	if _, err := d.Pool.Exec(ctx, fill, "full", "cap", later.Add(time.Hour), later); err != nil {
		t.Errorf("the previous release's join that fills a batch: %v", err)
	}
	for _, b := range opened {
		if b.RecipientID == "now" {
			if _, err := d.Pool.Exec(ctx, `UPDATE batches SET closes_at = $2 WHERE id = $1 AND state = 'open'`, b.ID, later); err != nil {
				t.Errorf("the previous release's flush now: %v", err)
			}
		}
	}
	var old int64
	if err := d.Pool.QueryRow(ctx, `INSERT INTO batches (recipient_id, batch_key, type_key, mode, opened_at, last_event_at, closes_at, item_count)
		VALUES ('old', 'task', 'task', 'cooldown', $1, $1, $2, 1) RETURNING id`, freshNow, later).Scan(&old); err != nil {
		t.Fatal(err)
	}
	ids, err := db.DueBatches(ctx, d.Pool, later, 100)
	if err != nil || !slices.Contains(ids, old) {
		t.Fatalf("due batches %v, %v; want the previous release's batch %d among them", ids, err, old)
	}
}

// TestSharedSiblingsReadsOnlyDueBatches: finding the due batches that
// may share an email reads them through batches_due, not every open
// batch (30,000 weekly digests besides 100 due ones).
func TestSharedSiblingsReadsOnlyDueBatches(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx := context.Background()
	now := time.Now()
	if _, err := d.Pool.Exec(ctx, `INSERT INTO recipients (id, email, name, timezone, locale, active)
		SELECT 'r' || i, 'r' || i || '@example.com', 'r', 'UTC', 'en', true FROM generate_series(1, 30100) i`); err != nil {
		t.Fatal(err)
	}
	insert := `INSERT INTO batches (recipient_id, batch_key, type_key, mode, opened_at, last_event_at, closes_at, wake_at, state)
		SELECT 'r' || i, $2, 't', 'cooldown', $3, $3, $3, $3, 'open' FROM generate_series($1::int, $4) AS i`
	if _, err := d.Pool.Exec(ctx, insert, 1, "digest:weekly", now.Add(48*time.Hour), 30_000); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Pool.Exec(ctx, insert, 30_001, "k", now.Add(-time.Minute), 30_100); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Pool.Exec(ctx, `ANALYZE`); err != nil {
		t.Fatal(err)
	}
	tx, err := d.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	ids, err := db.SharedSiblings(ctx, tx, "t", "k", []int64{}, 1, "UTC", "en", now, 200)
	if err != nil || len(ids) != 100 {
		t.Fatalf("%d siblings, %v; want the 100 due", len(ids), err)
	}
	if read := batchesRead(t, tx, true); read > 1000 {
		t.Fatalf("finding 100 due siblings read %d batch rows and index entries", read)
	}
}
