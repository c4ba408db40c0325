package db_test

import (
	"context"
	"testing"
	"time"

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
