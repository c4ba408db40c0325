package db_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lull-dev/lull/db"
)

// A recipient whose batches are old, among many newer batches of other
// recipients: a page of its batches, newest first, must be read from the
// indexes keyed by recipient in id order, not by walking the primary key
// backwards past every newer batch of anyone, testing recipient_id row by
// row (before the split, batches_recipient (recipient_id, id) read
// exactly one page: 0.04 ms; after it, 200,000 rows filtered: 23 ms).
func TestListBatchesOfARecipientWithOldBatchesReadsItsIndexes(t *testing.T) {
	t.Parallel()
	d := freshDB(t)
	ctx := context.Background()
	now := time.Now().Truncate(time.Microsecond)
	exec := execer(t, d)
	exec(`INSERT INTO batches (recipient_id, batch_key, type_key, mode, state, opened_at, last_event_at, closes_at, item_count)
		SELECT 'mid', 'k', 'post', 'cooldown', 'sent', $1, $1, $1, 1 FROM generate_series(1, 1000)`, now)
	exec(`INSERT INTO batches (recipient_id, batch_key, type_key, mode, state, opened_at, last_event_at, closes_at, item_count)
		VALUES ('mid', 'k', 'post', 'cooldown', 'open', $1, $1, $1, 1)`, now)
	exec(`INSERT INTO batches (recipient_id, batch_key, type_key, mode, state, opened_at, last_event_at, closes_at, item_count)
		SELECT 'u' || (i % 20000), 'k', 'post', 'cooldown', CASE WHEN i < 20000 THEN 'open' ELSE 'sent' END, $1, $1, $1, 1
		FROM generate_series(0, 199999) AS i`, now)
	exec(`VACUUM ANALYZE batches`)
	err := d.InTx(ctx, func(tx pgx.Tx) error {
		q := newExplaining(t, tx)
		page, err := db.ListBatches(ctx, q, db.BatchFilter{Recipient: "mid", Limit: 50})
		if err != nil || len(page) != 50 || page[0].ID != 1001 || page[49].ID != 952 {
			t.Errorf("ListBatches: %d batches (%v), want mid's 50 newest, 1001 first", len(page), err)
		}
		q.check("ListBatches of a recipient", "batches_recipient")
		page, err = db.ListBatches(ctx, q, db.BatchFilter{Recipient: "mid", Before: 500, Limit: 50})
		if err != nil || len(page) != 50 || page[0].ID != 499 {
			t.Errorf("ListBatches before 500: %d batches (%v), want 499 first", len(page), err)
		}
		// (Its open batches below id 500, none, may be read from
		// batches_open's id range: the planner's choice, bounded by id.)
		q.plans = nil
		page, err = db.ListBatches(ctx, q, db.BatchFilter{Recipient: "mid", State: "open"})
		if err != nil || len(page) != 1 || page[0].ID != 1001 {
			t.Errorf("ListBatches open: %d batches (%v), want 1001", len(page), err)
		}
		return errRollback
	})
	if err != errRollback {
		t.Fatal(err)
	}
}
