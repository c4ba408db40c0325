package db_test

import (
	"context"
	"testing"
	"time"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/db/dbtest"
)

// TestPinnedDaysReadsOnlyUnsentBatches: retention asks, for each old day,
// whether an unsent batch holds its notifications, starting from the
// unsent batches (220 of 50,220), not from every batch ever opened.
func TestPinnedDaysReadsOnlyUnsentBatches(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx := context.Background()
	now := time.Now()
	insert := `INSERT INTO batches (recipient_id, batch_key, type_key, mode, opened_at, last_event_at, closes_at, state)
		SELECT 'r' || i, $2, 't', 'cooldown', $3, $3, $3, $4 FROM generate_series(1, $1) AS i`
	for _, b := range []struct {
		n          int
		key, state string
	}{{50_000, "k", "sent"}, {200, "digest:weekly", "open"}, {20, "k", "flushing"}} {
		if _, err := d.Pool.Exec(ctx, insert, b.n, b.key, now.Add(-time.Hour), b.state); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := d.Pool.Exec(ctx, `INSERT INTO notifications (created_at, event_id, recipient_id, type_key, batch_id, occurred_at)
		SELECT now(), 1, recipient_id, 't', id, now() FROM batches WHERE state = 'sent' AND id % 3 = 0`); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Pool.Exec(ctx, `ANALYZE`); err != nil {
		t.Fatal(err)
	}
	var part string
	if err := d.Pool.QueryRow(ctx, `SELECT tableoid::regclass::text FROM notifications LIMIT 1`).Scan(&part); err != nil {
		t.Fatal(err)
	}
	tx, err := d.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	before := batchesRead(t, tx, true)
	pinned, err := db.PinnedDays(ctx, tx, []string{part})
	if err != nil || len(pinned) != 0 {
		t.Fatalf("pinned %v, %v; want none (only sent batches hold notifications)", pinned, err)
	}
	if read := batchesRead(t, tx, true) - before; read > 2_000 {
		t.Fatalf("checking %s for unsent batches read %d batch rows and index entries; 220 of 50,220 batches are unsent", part, read)
	}
}
