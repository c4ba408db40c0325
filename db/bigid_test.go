package db_test

import (
	"context"
	"testing"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/db/dbtest"
)

// TestListingsTakeIdsPastInt4: ids are bigint, and a listing paged or
// filtered by an id past 2^31 (a feed cursor once a busy install has
// made two billion notifications, or a client's made-up cursor) works.
// Written as "$2 = 0", the parameter was taken for an int4 and such an
// id failed the whole query.
func TestListingsTakeIdsPastInt4(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx := context.Background()
	const big = 3_000_000_000
	if _, _, err := db.Feed(ctx, d.Pool, "u", big, 10, false, 1<<20); err != nil {
		t.Errorf("feed: %v", err)
	}
	if _, err := db.ListBatches(ctx, d.Pool, db.BatchFilter{Before: big}); err != nil {
		t.Errorf("batches: %v", err)
	}
	if _, err := db.ListJobs(ctx, d.Pool, []string{"available"}, big, 10); err != nil {
		t.Errorf("jobs: %v", err)
	}
	if _, err := db.ListSkips(ctx, d.Pool, big, "", 10); err != nil {
		t.Errorf("skips: %v", err)
	}
	if _, err := db.ListOutbox(ctx, d.Pool, big, big, 10); err != nil {
		t.Errorf("outbox: %v", err)
	}
}
