package db_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/db/dbtest"
)

// TestListingOpenBatchesReadsAPage: the console's page of open batches,
// newest first, reads about a page of rows, however much sent history
// is newer than the open batches (weekly digests under a week of cooldown
// mail). Without open batches in an index by state and id it read every
// newer row, or every open one to sort them.
func TestListingOpenBatchesReadsAPage(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx := context.Background()
	insert := `INSERT INTO batches (recipient_id, batch_key, type_key, mode, opened_at, last_event_at, closes_at, state)
		SELECT 'r' || i, 'digest:weekly', 't', 'weekly', now(), now(), now(), $2 FROM generate_series(1, $1) AS i`
	if _, err := d.Pool.Exec(ctx, insert, 2_000, "open"); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Pool.Exec(ctx, insert, 20_000, "sent"); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Pool.Exec(ctx, `ANALYZE batches`); err != nil {
		t.Fatal(err)
	}
	tx, err := d.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	page, err := db.ListBatches(ctx, tx, db.BatchFilter{State: "open", Limit: 50})
	if err != nil || len(page) != 50 {
		t.Fatalf("%d batches, %v; want a page of 50", len(page), err)
	}
	if read := batchesRead(t, tx, false); read > 100 {
		t.Fatalf("a page of 50 open batches read %d rows", read)
	}
}

// batchesRead is how many rows of batches and entries of its indexes tx
// has read so far, counting the rows fetched through an index too when
// fetched is set. The counters include what earlier transactions on the
// same connection read.
func batchesRead(t *testing.T, tx pgx.Tx, fetched bool) int {
	t.Helper()
	var n int
	if err := tx.QueryRow(context.Background(), `
		SELECT pg_stat_get_xact_tuples_returned('batches'::regclass)
		     + CASE WHEN $1 THEN pg_stat_get_xact_tuples_fetched('batches'::regclass) ELSE 0 END
		     + (SELECT coalesce(sum(pg_stat_get_xact_tuples_returned(indexrelid)), 0) FROM pg_index WHERE indrelid = 'batches'::regclass)`,
		fetched).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
