package db_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/db/dbtest"
)

// TestWatchedAmongNarrowsAFanOut: of 1,500 recipients, the three with a
// feed stream open are what NotifyFeed is given, in the fan-out's order;
// a watch that expired, or one for a recipient not notified, is not.
// With fewer recipients, or more watchers than recipients, the list is
// given as it is, for NotifyFeed's own query to narrow.
func TestWatchedAmongNarrowsAFanOut(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx := context.Background()
	ids := make([]string, 1500)
	for i := range ids {
		ids[i] = fmt.Sprintf("r%04d", i)
	}
	now := time.Now()
	for _, w := range []struct {
		ids     []string
		expires time.Time
	}{
		{[]string{"r1400", "r0007", "r0700", "elsewhere"}, now.Add(time.Minute)},
		{[]string{"r0008"}, now.Add(-time.Minute)},
	} {
		if err := db.WatchFeed(ctx, d.Pool, "hub", w.ids, w.expires); err != nil {
			t.Fatal(err)
		}
	}
	// Watches a dead process left behind are not read.
	if _, err := d.Pool.Exec(ctx, `INSERT INTO feed_watchers (recipient_id, hub, expires_at)
		SELECT 'gone' || i, 'dead', $1 FROM generate_series(1, 20000) i`, now.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Pool.Exec(ctx, `ANALYZE feed_watchers`); err != nil {
		t.Fatal(err)
	}
	tx, err := d.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	got, err := db.WatchedAmong(ctx, tx, ids)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"r0007", "r0700", "r1400"}; !slices.Equal(got, want) {
		t.Fatalf("watched among 1,500: %v, want %v", got, want)
	}
	var read int
	if err := tx.QueryRow(ctx, `SELECT pg_stat_get_xact_tuples_returned('feed_watchers'::regclass)
		+ (SELECT sum(pg_stat_get_xact_tuples_returned(indexrelid)) FROM pg_index WHERE indrelid = 'feed_watchers'::regclass)`).Scan(&read); err != nil {
		t.Fatal(err)
	}
	if read > 100 {
		t.Fatalf("reading 4 live watches beside 20,000 expired ones read %d rows", read)
	}
	if got, err := db.WatchedAmong(ctx, d.Pool, ids[:1000]); err != nil || len(got) != 1000 {
		t.Fatalf("1,000 recipients: %d given back (%v), want all of them", len(got), err)
	}
	if n, err := db.Prune(ctx, d.Pool, now.Add(-720*time.Hour)); err != nil || n["feed_watchers"] != 20_001 {
		t.Fatalf("prune removed %d expired watches (%v), want 20,001", n["feed_watchers"], err)
	}
	many := make([]string, 1600)
	for i := range many {
		many[i] = fmt.Sprintf("w%04d", i)
	}
	if err := db.WatchFeed(ctx, d.Pool, "hub", many, now.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if got, err := db.WatchedAmong(ctx, d.Pool, ids); err != nil || len(got) != len(ids) {
		t.Fatalf("more watchers than recipients: %d given back (%v), want all %d", len(got), err, len(ids))
	}
}

// TestKeyAnswersAreCompressedWithLZ4: where the server has lz4, a key's
// kept answer is written with it (see the migration event_keys_lz4).
func TestKeyAnswersAreCompressedWithLZ4(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx := context.Background()
	if _, err := d.Pool.Exec(ctx, `SET default_toast_compression = lz4`); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the server has no lz4, which CI's PostgreSQL has: %v", err)
		}
		t.Skipf("this server has no lz4: %v", err)
	}
	var method string
	if err := d.Pool.QueryRow(ctx, `SELECT attcompression::text FROM pg_attribute
		WHERE attrelid = 'event_keys'::regclass AND attname = 'response'`).Scan(&method); err != nil {
		t.Fatal(err)
	}
	if method != "l" {
		t.Fatalf("event_keys.response is compressed with %q, want lz4 (l)", method)
	}
}
