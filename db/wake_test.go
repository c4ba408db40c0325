package db_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/lull-dev/lull/db"
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
