package db_test

import (
	"context"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/db/dbtest"
)

// Joins for one batch meet in one row, and come back one per join: those
// past max_items go to the next batch as one event after another would;
// immediate joins each open their own batch, in the order given, also
// beside a cooldown batch of the same key.
func TestJoinBatchesMergesJoinsPerBatch(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx := context.Background()
	err := db.SaveType(ctx, d.Pool, &db.Type{Key: "task", Name: "Task", DefaultMode: "cooldown", WindowMS: 3_600_000, MaxItems: 3,
		DisplayLimit: 10, ItemOrder: "latest", ItemText: "{{actor.name}}", GroupText: "{{count}} tasks"})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)
	cool := func(rid string) db.BatchJoin {
		return db.BatchJoin{RecipientID: rid, BatchKey: "task", Mode: "cooldown", TypeKey: "task", Window: time.Hour,
			ClosesAt: now.Add(time.Hour), MaxItems: 3}
	}
	now1 := db.BatchJoin{RecipientID: "ann", BatchKey: "task", Mode: "immediate", TypeKey: "task", ClosesAt: now}
	joins := []db.BatchJoin{now1, cool("ann"), cool("ben"), cool("ann"), cool("ann"), now1, cool("ann"), cool("ben"), cool("ann"), now1}
	out, err := db.JoinBatches(ctx, d.Pool, joins, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != len(joins) {
		t.Fatalf("%d batches for %d joins", len(out), len(joins))
	}
	// ann's five cooldown joins: three fill the first batch, which closes
	// at once; two open the next.
	full, next := out[1], out[6]
	for _, i := range []int{1, 3, 4} {
		if out[i].ID != full.ID || out[i].ItemCount != 3 || !out[i].ClosesAt.Equal(now) {
			t.Errorf("join %d: batch %d of %d items closing %v; want the full batch %d closing now", i, out[i].ID, out[i].ItemCount, out[i].ClosesAt, full.ID)
		}
	}
	for _, i := range []int{6, 8} {
		if out[i].ID != next.ID || next.ID == full.ID || out[i].ItemCount != 2 || !out[i].ClosesAt.Equal(now.Add(time.Hour)) {
			t.Errorf("join %d: batch %d of %d items closing %v; want a second batch of 2", i, out[i].ID, out[i].ItemCount, out[i].ClosesAt)
		}
	}
	bens := out[2].ID
	if out[2].ID != out[7].ID || out[2].ItemCount != 2 || !out[2].Inserted {
		t.Errorf("ben's joins: batches %d and %d of %d items; want one new batch of 2", out[2].ID, out[7].ID, out[2].ItemCount)
	}
	if a, b, c := out[0], out[5], out[9]; a.Mode != "immediate" || !(a.ID < b.ID && b.ID < c.ID) || a.ItemCount+b.ItemCount+c.ItemCount != 3 {
		t.Errorf("immediate joins went to batches %d, %d, %d (%s); want three of their own in order", a.ID, b.ID, c.ID, a.Mode)
	}

	// Later: ben's batch has room for one of two more, so the second
	// seals it and opens the next; cat's takes one and slides its close
	// from the latest event.
	later := now.Add(time.Minute)
	if _, err := db.JoinBatches(ctx, d.Pool, []db.BatchJoin{cool("cat")}, now); err != nil {
		t.Fatal(err)
	}
	at := func(j db.BatchJoin) db.BatchJoin { j.ClosesAt = later.Add(time.Hour); return j }
	out, err = db.JoinBatches(ctx, d.Pool, []db.BatchJoin{at(cool("ben")), at(cool("cat")), at(cool("ben"))}, later)
	if err != nil {
		t.Fatal(err)
	}
	if b := out[0]; b.ID != bens || b.ItemCount != 3 || !b.ClosesAt.Equal(later) {
		t.Errorf("ben's first batch: %+v; want it full with 3 items, closing at once", b)
	}
	if b := out[2]; !b.Inserted || b.ItemCount != 1 || !b.ClosesAt.Equal(later.Add(time.Hour)) {
		t.Errorf("ben's next batch: %+v; want a new one of 1 item", b)
	}
	c := out[1]
	if c.Inserted || c.ItemCount != 2 || !c.LastEventAt.Equal(later) || !c.ClosesAt.Equal(later.Add(time.Hour)) {
		t.Errorf("cat's batch: %+v; want 2 items, last event %v, closing an hour later", c, later)
	}
	for _, b := range []db.JoinedBatch{out[0], c} {
		var stored time.Time
		if err := d.Pool.QueryRow(ctx, "SELECT closes_at FROM batches WHERE id = $1", b.ID).Scan(&stored); err != nil || !stored.Equal(b.ClosesAt) {
			t.Errorf("batch %d stored closing %v (%v), answered %v", b.ID, stored, err, b.ClosesAt)
		}
	}
}

// freshNow is the fresh-join tests' clock.
var freshNow = time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)

// freshDB is a database with the cool-down type the fresh-join tests use.
func freshDB(t *testing.T) *db.DB {
	t.Helper()
	d := dbtest.New(t)
	err := db.SaveType(context.Background(), d.Pool, &db.Type{Key: "task", Name: "Task", DefaultMode: "cooldown", WindowMS: 3_600_000,
		DisplayLimit: 10, ItemOrder: "latest", ItemText: "{{actor.name}}", GroupText: "{{count}} tasks"})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func freshJoin(rid string, now time.Time, fresh bool) db.BatchJoin {
	return db.BatchJoin{RecipientID: rid, BatchKey: "task", Mode: "cooldown", TypeKey: "task", Window: time.Hour,
		ClosesAt: now.Add(time.Hour), Fresh: fresh}
}

// joinInTx joins in a transaction of its own, as an ingest does.
func joinInTx(ctx context.Context, d *db.DB, joins []db.BatchJoin, now time.Time) (out []db.JoinedBatch, err error) {
	err = d.InTx(ctx, func(tx pgx.Tx) error {
		out, err = db.JoinBatches(ctx, tx, joins, now)
		return err
	})
	return out, err
}

// openBatches counts each recipient's open batches of key task and the
// items they hold.
func openBatches(t *testing.T, d *db.DB) map[string][2]int {
	t.Helper()
	rows, err := d.Pool.Query(context.Background(), `
		SELECT recipient_id, count(*)::int, sum(item_count)::int FROM batches
		WHERE state = 'open' AND batch_key = 'task' GROUP BY recipient_id`)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][2]int{}
	var rid string
	var n, items int
	if _, err := pgx.ForEachRow(rows, []any{&rid, &n, &items}, func() error { out[rid] = [2]int{n, items}; return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

// Joins marked fresh open their batches with a plain INSERT; when the
// hint was stale (one recipient's batch was opened since it was read), the
// INSERT is undone and the joins are upserted, so that recipient's
// notification joins the batch already open instead of failing the event
// or opening a second one. MarkFresh gives the hint.
func TestFreshJoinsOpenBatchesOrJoinTheOneOpenedSince(t *testing.T) {
	t.Parallel()
	d, ctx, now := freshDB(t), context.Background(), freshNow
	if _, err := joinInTx(ctx, d, []db.BatchJoin{freshJoin("ben", now, false)}, now); err != nil {
		t.Fatal(err)
	}
	lastID := func() (id int64) {
		if err := d.Pool.QueryRow(ctx, `SELECT last_value FROM batches_id_seq`).Scan(&id); err != nil {
			t.Fatal(err)
		}
		return id
	}
	before := lastID()
	hint := []db.BatchJoin{freshJoin("ann", now, false), freshJoin("ben", now, false), freshJoin("cy", now, false)}
	if fresh, err := db.MarkFresh(ctx, d.Pool, hint); err != nil || fresh || hint[0].Fresh || hint[0].Reserved != 0 {
		t.Fatalf("fresh %v (%v), ann marked %v with id %d; want ben's open batch seen and none marked", fresh, err, hint[0].Fresh, hint[0].Reserved)
	}
	if got := lastID(); got != before {
		t.Errorf("marking nothing took batch ids %d to %d", before, got)
	}
	hint = []db.BatchJoin{freshJoin("ann", now, false), {RecipientID: "ben", BatchKey: "task", Mode: "immediate"}, freshJoin("cy", now, false)}
	if fresh, err := db.MarkFresh(ctx, d.Pool, hint); err != nil || !fresh || !hint[0].Fresh || hint[1].Fresh || !hint[2].Fresh {
		t.Fatalf("fresh %v (%v), marked %v %v %v; want ann and cy marked, ben's immediate join left", fresh, err, hint[0].Fresh, hint[1].Fresh, hint[2].Fresh)
	}
	// Each join, the immediate one too, has an id of its own, in order.
	if !(before < hint[0].Reserved && hint[0].Reserved < hint[1].Reserved && hint[1].Reserved < hint[2].Reserved) {
		t.Errorf("reserved ids %d, %d, %d after %d; want three new ones, ascending", hint[0].Reserved, hint[1].Reserved, hint[2].Reserved, before)
	}

	out, err := joinInTx(ctx, d, []db.BatchJoin{hint[0], hint[2]}, now)
	if err != nil {
		t.Fatal(err)
	}
	if !out[0].Inserted || !out[1].Inserted || out[0].ItemCount != 1 || out[0].ID != hint[0].Reserved || out[1].ID != hint[2].Reserved {
		t.Errorf("fresh joins: %+v; want two new batches of one, with ids %d and %d", out, hint[0].Reserved, hint[2].Reserved)
	}
	// A stale hint: ben has a batch open, and dee's comes with him.
	out, err = joinInTx(ctx, d, []db.BatchJoin{freshJoin("ben", now, true), freshJoin("dee", now, true)}, now)
	if err != nil {
		t.Fatalf("a stale hint failed the join: %v", err)
	}
	if out[0].Inserted || out[0].ItemCount != 2 || !out[1].Inserted {
		t.Errorf("after a stale hint: %+v; want ben's batch joined (2 items) and dee's opened", out)
	}
	want := map[string][2]int{"ann": {1, 1}, "ben": {1, 2}, "cy": {1, 1}, "dee": {1, 1}}
	if got := openBatches(t, d); !maps.Equal(got, want) {
		t.Errorf("open batches (count, items) by recipient: %v, want %v", got, want)
	}
}

// Events opening the same recipients' batches at once, some with the
// hint and some without, in overlapping orders: none fails or deadlocks,
// and each recipient ends with one open batch holding every join.
func TestFreshJoinsRacingUpserts(t *testing.T) {
	t.Parallel()
	d, ctx, now := freshDB(t), context.Background(), freshNow
	rids := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	const workers, rounds = 8, 15
	var wg sync.WaitGroup
	errs := make(chan error, workers*rounds)
	for w := range workers {
		wg.Go(func() {
			for r := range rounds {
				var joins []db.BatchJoin
				for i, rid := range rids {
					if (i+w+r)%3 != 0 {
						joins = append(joins, freshJoin(rid, now, (w+r)%2 == 0))
					}
				}
				// Half the hinted rounds come with ids reserved, as a
				// fan-out's read-ahead gives them.
				if (w+r)%4 == 0 {
					if err := reserveIDs(d, joins); err != nil {
						errs <- err
					}
				}
				if _, err := joinInTx(ctx, d, joins, now); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("join: %v", err)
	}
	want := 0
	for w := range workers {
		for r := range rounds {
			for i := range rids {
				if (i+w+r)%3 != 0 && i == 0 {
					want++
				}
			}
		}
	}
	got := openBatches(t, d)
	if len(got) != len(rids) {
		t.Fatalf("open batches: %v; want one for each of %d recipients", got, len(rids))
	}
	if got["a"] != [2]int{1, want} {
		t.Errorf("a's open batches (count, items): %v, want [1 %d]", got["a"], want)
	}
	for rid, c := range got {
		if c[0] != 1 {
			t.Errorf("%s has %d open batches, want 1", rid, c[0])
		}
	}
}

// MarkNew reserves an id for each join, in order, without asking for
// open batches, and marks those that would share a batch Fresh: the
// joins then open their batches with those ids.
func TestMarkNewReservesIdsInOrder(t *testing.T) {
	t.Parallel()
	d, ctx, now := freshDB(t), context.Background(), freshNow
	joins := []db.BatchJoin{freshJoin("ann", now, false), {RecipientID: "ben", BatchKey: "task", Mode: "immediate"}, freshJoin("cy", now, false)}
	if err := db.MarkNew(ctx, d.Pool, joins); err != nil {
		t.Fatal(err)
	}
	if !joins[0].Fresh || joins[1].Fresh || !joins[2].Fresh {
		t.Fatalf("marked %v %v %v; want ann and cy, not ben's immediate join", joins[0].Fresh, joins[1].Fresh, joins[2].Fresh)
	}
	if !(0 < joins[0].Reserved && joins[0].Reserved < joins[1].Reserved && joins[1].Reserved < joins[2].Reserved) {
		t.Fatalf("reserved ids %d, %d, %d; want three, ascending", joins[0].Reserved, joins[1].Reserved, joins[2].Reserved)
	}
	out, err := joinInTx(ctx, d, []db.BatchJoin{joins[0], joins[2]}, now)
	if err != nil {
		t.Fatal(err)
	}
	if !out[0].Inserted || !out[1].Inserted || out[0].ID != joins[0].Reserved || out[1].ID != joins[2].Reserved {
		t.Errorf("new joins: %+v; want two new batches with ids %d and %d", out, joins[0].Reserved, joins[2].Reserved)
	}
}
