package jobs_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/db/dbtest"
	"github.com/lull-dev/lull/preferences/batching"
)

// downgradeKeys puts a test database (ICU en-US) back in the state of a
// production database before this release: key columns in the default
// collation and the two new migrations not yet applied.
func (b *testBundle) downgradeKeys(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	dbtest.RequireICU(t, b.db.Pool)
	for _, tc := range db.KeyColumns {
		table, col, _ := strings.Cut(tc, ".")
		if _, err := b.db.Pool.Exec(ctx, "ALTER TABLE "+table+" ALTER COLUMN "+col+` TYPE text COLLATE "default"`); err != nil {
			t.Fatalf("downgrade %s: %v", tc, err)
		}
	}
	if _, err := b.db.Pool.Exec(ctx, `DROP INDEX muted_threads_thread;
		DELETE FROM bun_migrations WHERE name IN ('20261129010000', '20261129020000')`); err != nil {
		t.Fatal(err)
	}
}

// waiters counts backends of this database waiting for a heavyweight lock.
func (b *testBundle) waiters(t *testing.T) int {
	return b.count(t, `SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND wait_event_type = 'Lock' AND wait_event NOT IN ('extend', 'page')`)
}

func (b *testBundle) untilWaiters(t *testing.T, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if b.waiters(t) >= n {
			return
		}
	}
	t.Fatalf("fewer than %d backends wait for a lock after 10 s", n)
}

// TestKeysMigrationRunsBesideAnEvent: "lull migrate" run while an event
// is being ingested. Altered in one transaction, the tables the migration
// had changed stayed locked until its end, while an event took events
// (its INSERT) before it read recipients: the event waited for the
// migration and the migration for the event, and PostgreSQL aborted the
// migration after every rebuild before events. Each table now changes in
// a transaction of its own, so the event waits for one table, then goes
// on, and both succeed. A reader holding batches for a moment stands for
// the minutes a large batches or notifications rebuild takes.
func TestKeysMigrationRunsBesideAnEvent(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	b.saveType(t, db.Type{Key: "comment"})
	b.recipient(t, "ann", "UTC")
	b.recipient(t, "bob", "UTC")
	b.post(t, "comment", "carl", "ann") // the type is now memoised: validate reads nothing
	b.downgradeKeys(t)

	slow := b.hold(t, `SELECT 1 FROM batches LIMIT 1`) // the rebuild of a large table
	migrated := make(chan error, 1)
	go func() { migrated <- b.db.Migrate(ctx) }()
	b.untilWaiters(t, 1) // the migration waits for batches

	ingested := make(chan error, 1)
	go func() {
		_, err := b.engine.Ingest(ctx, 1, &batching.Event{Type: "comment", Actor: batching.Actor{ID: "carl", Name: "Carl"},
			Recipients: []batching.RecipientRef{{ID: "ann"}, {ID: "bob"}}})
		ingested <- err
	}()
	time.Sleep(1500 * time.Millisecond) // past deadlock_timeout
	if err := slow.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	var migErr, ingErr error
	select {
	case migErr = <-migrated:
	case <-time.After(30 * time.Second):
		t.Fatal("migration still running after 30 s")
	}
	select {
	case ingErr = <-ingested:
	case <-time.After(30 * time.Second):
		t.Fatal("ingest still running after 30 s")
	}
	if migErr != nil {
		t.Errorf("lull migrate failed while one event was ingested: %v", migErr)
	}
	if got := b.count(t, `SELECT count(*) FROM pg_attribute WHERE attrelid = 'notifications'::regclass
		AND attname IN ('recipient_id', 'type_key') AND attcollation = 'pg_catalog."C"'::regcollation`); got != 2 {
		t.Errorf("%d of notifications' key columns compare as bytes after the migration, want 2", got)
	}
	if ingErr != nil {
		t.Errorf("the event failed: %v", ingErr)
	}
}

// TestKeysMigrationInterruptedRunsAgain: a migration stopped half-way
// (here the process's context ends while it waits for batches) is not
// marked applied, so the next start finishes the tables it left and
// drops its function.
func TestKeysMigrationInterruptedRunsAgain(t *testing.T) {
	b := setup(t)
	ctx := context.Background()
	b.downgradeKeys(t)
	slow := b.hold(t, `LOCK TABLE batches IN ACCESS SHARE MODE`)
	stopped, cancel := context.WithTimeout(ctx, 3*time.Second)
	err := b.db.Migrate(stopped)
	cancel()
	if err == nil {
		t.Fatal("the migration succeeded while batches was held")
	}
	slow.Rollback(ctx)
	if n := b.count(t, `SELECT count(*) FROM bun_migrations WHERE name = '20261129010000'`); n != 0 {
		t.Errorf("the stopped migration is marked applied (%d rows)", n)
	}
	if err := b.db.Migrate(ctx); err != nil {
		t.Fatalf("the next start: %v", err)
	}
	if n := b.count(t, `SELECT count(*) FROM unnest($1::text[]) AS k(tc) JOIN pg_attribute a
		ON a.attrelid = split_part(k.tc, '.', 1)::regclass AND a.attname = split_part(k.tc, '.', 2)
		WHERE a.attcollation <> 'pg_catalog."C"'::regcollation`, db.KeyColumns); n != 0 {
		t.Errorf("after the next start, %d key columns are not in \"C\"", n)
	}
	if n := b.count(t, `SELECT count(*) FROM pg_proc WHERE proname = 'lull_keys_as_bytes'`); n != 0 {
		t.Errorf("the migration's function is left behind")
	}
}
