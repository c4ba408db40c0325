package db_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/db/dbtest"
)

// TestMutedForReadsAThreadsMutesForAFanOut: for a fan-out's chunk,
// MutedFor reads the thread's live mutes by its key and picks the
// chunk's recipients among them; for a few recipients, or a thread muted
// by more than it reads, it probes the recipients. Both give the same.
// What the chunk's read saves (sending and planning 10,000 ids) shows in
// lullbench, not here: PostgreSQL takes the thread's index for the probe
// too, so the scan count below guards the index, not the narrowing.
func TestMutedForReadsAThreadsMutesForAFanOut(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx := context.Background()
	if _, err := d.Pool.Exec(ctx, `INSERT INTO recipients (id, email)
		SELECT 'r' || lpad(i::text, 4, '0'), i || '@example.com' FROM generate_series(0, 2999) i`); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Pool.Exec(ctx, `INSERT INTO muted_threads (recipient_id, batch_key, until) VALUES
		('r0007', 'c+doc:1', NULL), ('r1400', 'c+doc:1', now() + interval '1 day'), ('r2500', 'c+doc:1', NULL),
		('r0008', 'c+doc:1', now() - interval '1 minute'), ('r0009', 'c+doc:2', NULL)`); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Pool.Exec(ctx, `INSERT INTO muted_threads (recipient_id, batch_key)
		SELECT 'r' || lpad(i::text, 4, '0'), 'c+doc:3' FROM generate_series(0, 1100) i`); err != nil {
		t.Fatal(err)
	}
	ids := make([]string, 1500)
	for i := range ids {
		ids[i] = fmt.Sprintf("r%04d", i)
	}
	tx, err := d.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	muted := func(ids []string, key string) []string {
		t.Helper()
		m, err := db.MutedFor(ctx, tx, ids, key)
		if err != nil {
			t.Fatal(err)
		}
		return slices.Sorted(maps.Keys(m))
	}
	if got, want := muted(ids, "c+doc:1"), []string{"r0007", "r1400"}; !slices.Equal(got, want) {
		t.Errorf("muted among 1,500: %v, want %v", got, want)
	}
	var byThread, byKey int
	if err := tx.QueryRow(ctx, `SELECT pg_stat_get_xact_numscans('muted_threads_thread'::regclass),
		pg_stat_get_xact_numscans('muted_threads_pkey'::regclass)`).Scan(&byThread, &byKey); err != nil {
		t.Fatal(err)
	}
	if byThread != 1 || byKey != 0 {
		t.Errorf("a chunk's mutes read with %d scans by thread and %d by recipient, want 1 and 0", byThread, byKey)
	}
	if got, want := muted(ids[:10], "c+doc:1"), []string{"r0007"}; !slices.Equal(got, want) {
		t.Errorf("muted among 10: %v, want %v", got, want)
	}
	if got := muted(ids, "c+doc:3"); len(got) != 1101 || got[0] != "r0000" || got[1100] != "r1100" {
		t.Errorf("a thread muted 1,101 times: %d muted among 1,500, want 1,101", len(got))
	}
	if got := muted(ids, "c+doc:4"); len(got) != 0 {
		t.Errorf("a thread nobody muted: %v", got)
	}
}
