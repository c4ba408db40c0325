package db_test

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/lull-dev/lull/db"
)

// A recipient's batches and notifications are each split between two
// indexes keyed by recipient (open batches an event may join and the
// rest; unread notifications and the rest), so that a fan-out writes one
// of each, not two. Every read of a recipient's list must still find all
// of it, and find it through those indexes: no scan of either table that
// tests recipient_id row by row.
func TestRecipientListsReadBothHalvesOfTheirIndexes(t *testing.T) {
	t.Parallel()
	d := freshDB(t)
	ctx := context.Background()
	now := time.Now().Truncate(time.Microsecond)
	exec := execer(t, d)
	exec(`INSERT INTO recipients (id, email) VALUES ('r', 'r@example.com'), ('other', 'o@example.com')`)
	// One batch of each kind: joinable (batches_one_open), open
	// immediate, open sealed, sent; another recipient's beside them.
	exec(`INSERT INTO batches (id, recipient_id, batch_key, type_key, mode, state, sealed, opened_at, last_event_at, closes_at, item_count) VALUES
		(1, 'r', 'k', 'post', 'cooldown', 'open', false, $1, $1, $1::timestamptz + interval '1 hour', 1),
		(2, 'r', 'k', 'post', 'immediate', 'open', false, $1, $1, $1, 1),
		(3, 'r', 'k', 'post', 'cooldown', 'open', true, $1, $1, $1::timestamptz + interval '1 hour', 1),
		(4, 'r', 'k', 'post', 'cooldown', 'sent', false, $1, $1::timestamptz - interval '1 day', $1, 1),
		(5, 'other', 'k', 'post', 'cooldown', 'open', false, $1, $1, $1::timestamptz + interval '1 hour', 1)`, now)
	exec(`INSERT INTO events (id, created_at, type_key, occurred_at) VALUES (1, $1, 'post', $1)`, now)
	// Notifications unread, read, retracted, and another recipient's.
	exec(`INSERT INTO notifications (id, created_at, event_id, recipient_id, type_key, batch_id, occurred_at, read_at, retracted_at) VALUES
		(1, $1, 1, 'r', 'post', 1, $1, NULL, NULL),
		(2, $1, 1, 'r', 'post', 4, $1, $1, NULL),
		(3, $1, 1, 'r', 'post', 1, $1, NULL, $1),
		(4, $1, 1, 'r', 'post', 3, $1, NULL, NULL),
		(5, $1, 1, 'other', 'post', 5, $1, NULL, NULL)`, now)
	// Other recipients' rows, so that one recipient's are few among them,
	// as they are in any real table.
	exec(`INSERT INTO batches (id, recipient_id, batch_key, type_key, mode, state, opened_at, last_event_at, closes_at, item_count)
		SELECT 100 + i, 'o' || i, 'k', 'post', 'cooldown', (ARRAY['open', 'sent'])[1 + i % 2], $1, $1, $1, 1 FROM generate_series(1, 5000) AS i`, now)
	exec(`INSERT INTO notifications (id, created_at, event_id, recipient_id, type_key, occurred_at, read_at)
		SELECT 100 + i, $1, 1, 'o' || i, 'post', $1, CASE WHEN i % 2 = 0 THEN $1::timestamptz END FROM generate_series(1, 5000) AS i`, now)
	exec(`ANALYZE batches, notifications`)

	err := d.InTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL enable_seqscan = off`); err != nil {
			return err
		}
		q := newExplaining(t, tx)

		batches, err := db.ListBatches(ctx, q, db.BatchFilter{Recipient: "r"})
		if err != nil || len(batches) != 4 || batches[0].ID != 4 || batches[3].ID != 1 {
			t.Errorf("ListBatches: %d batches (%v), want r's 4 newest first", len(batches), err)
		}
		q.check("ListBatches", "batches_one_open", "batches_recipient")

		act, err := db.LastActivity(ctx, q, []string{"r"}, []string{"r"}, "k", now)
		if err != nil || !act["r"].HasOpen || !act["r"].Last.Equal(now) {
			t.Errorf("LastActivity: %+v (%v), want an open batch and the last event at %v", act, err, now)
		}
		q.check("LastActivity", "batches_one_open", "batches_recipient")

		rs, err := db.RecipientsByAddress(ctx, q, "R@example.com", "post")
		if err != nil || len(rs) != 1 || rs[0].ID != "r" {
			t.Errorf("RecipientsByAddress: %+v (%v), want r", rs, err)
		}
		q.check("RecipientsByAddress", "batches_one_open")

		items, _, err := db.Feed(ctx, q, "r", 0, 10, false, 1<<20)
		if got := feedIDs(items); err != nil || got != "4 2 1" {
			t.Errorf("Feed: %s (%v), want 4 2 1", got, err)
		}
		q.check("Feed", "notifications_unread", "notifications_read")
		items, _, err = db.Feed(ctx, q, "r", 4, 1, false, 1<<20)
		if got := feedIDs(items); err != nil || got != "2" {
			t.Errorf("Feed after 4, one item: %s (%v), want 2", got, err)
		}
		items, _, err = db.Feed(ctx, q, "r", 0, 10, true, 1<<20)
		if got := feedIDs(items); err != nil || got != "4 1" {
			t.Errorf("unread Feed: %s (%v), want 4 1", got, err)
		}
		q.check("unread Feed", "notifications_unread")

		counts, err := db.CountFeed(ctx, q, "r")
		if err != nil || counts.Unread != 2 {
			t.Errorf("CountFeed: %+v (%v), want 2 unread", counts, err)
		}
		q.check("CountFeed", "notifications_unread")

		if n, err := db.MarkSeen(ctx, q, "r", nil, now); err != nil || n != 4 {
			t.Errorf("MarkSeen marked %d (%v), want all 4 of r's", n, err)
		}
		q.check("MarkSeen", "notifications_unread", "notifications_read")

		// Marking everything read locks r's three open batches.
		n, _, err := db.MarkRead(ctx, q, "r", nil, now.Add(time.Second), now)
		if err != nil || n != 3 {
			t.Errorf("MarkRead marked %d (%v), want r's 3 unread (one retracted)", n, err)
		}
		q.check("MarkRead", "batches_one_open", "batches_recipient", "notifications_unread", "notifications_read")
		return errRollback
	})
	if err != errRollback {
		t.Fatal(err)
	}
}

func feedIDs(items []db.FeedItem) string {
	var ids []string
	for _, it := range items {
		ids = append(ids, fmt.Sprint(it.NotificationID))
	}
	return strings.Join(ids, " ")
}

// explaining is a db.Querier that plans each statement before running
// it, and keeps the plans for check.
type explaining struct {
	watched
	t     *testing.T
	plans []string
	// parents names the partitioned index each partition's index is part
	// of: PostgreSQL names the latter after its table and columns, the
	// same for two indexes on the same columns.
	parents map[string]string
	// custom plans every statement for its arguments, as PostgreSQL does
	// the first five times a connection runs a prepared statement.
	custom bool
}

// newExplaining plans in tx what runs in it.
func newExplaining(t *testing.T, tx pgx.Tx) *explaining {
	t.Helper()
	rows, err := tx.Query(context.Background(), `SELECT c.relname::text, p.relname::text FROM pg_inherits i
		JOIN pg_class c ON c.oid = i.inhrelid JOIN pg_class p ON p.oid = i.inhparent WHERE p.relkind = 'I'`)
	if err != nil {
		t.Fatal(err)
	}
	parents := map[string]string{}
	for rows.Next() {
		var child, parent string
		if err := rows.Scan(&child, &parent); err != nil {
			t.Fatal(err)
		}
		parents[child] = parent
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	e := &explaining{t: t, parents: parents}
	e.watched = watched{tx, e.explain}
	return e
}

// execer returns a function that runs a statement on d, with the type
// "post" saved first, and fails the test at an error.
func execer(t *testing.T, d *db.DB) func(sql string, args ...any) {
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := d.Pool.Exec(context.Background(), sql, args...); err != nil {
			t.Fatal(err)
		}
	}
	exec(`INSERT INTO notification_types (key, name, item_text, group_text) VALUES ('post', 'Post', 'x', 'x')`)
	return exec
}

// explain plans sql as it runs (see planOf).
func (e *explaining) explain(sql string, args []any) {
	e.plans = append(e.plans, planOf(e.t, e.tx, "FORMAT JSON", sql, args, !e.custom))
}

// planOf returns the JSON plan of sql in tx, EXPLAINed with options:
// planned for its arguments when asked so (listPlan) or when generic is
// false, otherwise as a prepared statement is once PostgreSQL settles on
// a plan for any arguments (a generic plan). What EXPLAIN ANALYZE does
// is undone.
func planOf(t *testing.T, tx pgx.Tx, options, sql string, args []any, generic bool) string {
	ctx := context.Background()
	if _, err := tx.Exec(ctx, "SAVEPOINT planning"); err != nil {
		t.Fatal(err)
	}
	defer tx.Exec(ctx, "ROLLBACK TO SAVEPOINT planning")
	var plan string
	if _, listed := args[0].(pgx.QueryExecMode); listed || !generic {
		if err := tx.QueryRow(ctx, "EXPLAIN ("+options+") "+sql, args...).Scan(&plan); err != nil {
			t.Fatalf("explain %s: %v", sql, err)
		}
		return plan
	}
	if _, err := tx.Exec(ctx, "PREPARE probe AS "+sql+"; SET LOCAL plan_cache_mode = force_generic_plan"); err != nil {
		t.Fatalf("prepare %s: %v", sql, err)
	}
	defer tx.Exec(ctx, "DEALLOCATE probe; SET LOCAL plan_cache_mode = auto")
	if err := tx.QueryRow(ctx, "EXPLAIN ("+options+") EXECUTE probe("+literals(args)+")").Scan(&plan); err != nil {
		t.Fatalf("explain %s: %v", sql, err)
	}
	return plan
}

// watched is a db.Querier on tx that shows see each statement before
// running it.
type watched struct {
	tx  pgx.Tx
	see func(sql string, args []any)
}

func (w watched) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	w.see(sql, args)
	return w.tx.Exec(ctx, sql, args...)
}

func (w watched) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	w.see(sql, args)
	return w.tx.Query(ctx, sql, args...)
}

func (w watched) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	w.see(sql, args)
	return w.tx.QueryRow(ctx, sql, args...)
}

// check wants the plans since the last check to read each index named
// (or its partitions') and to test recipient_id in no scan's filter:
// every recipient is found through an index. It forgets the plans.
func (e *explaining) check(what string, indexes ...string) {
	e.t.Helper()
	seen := map[string]bool{}
	for _, p := range e.plans {
		var root []struct{ Plan map[string]any }
		if err := json.Unmarshal([]byte(p), &root); err != nil {
			e.t.Fatal(err)
		}
		var walk func(n map[string]any)
		walk = func(n map[string]any) {
			rel, _ := n["Relation Name"].(string)
			index, _ := n["Index Name"].(string)
			index = cmp.Or(e.parents[index], index)
			if index != "" {
				seen[index] = true
			}
			// An index scan with no condition reads the index whole: a
			// bitmap's arm so read, or a recipient-keyed index read
			// only for its order, finds no recipient.
			ours := strings.HasPrefix(index, "batches_") || strings.HasPrefix(index, "notifications_")
			keyed := slices.Contains([]string{"batches_one_open", "batches_recipient", "notifications_unread", "notifications_read"}, index)
			if _, cond := n["Index Cond"]; !cond && (keyed || ours && n["Node Type"] == "Bitmap Index Scan") {
				e.t.Errorf("%s: %s reads all of %s", what, n["Node Type"], index)
			}
			// A bitmap's heap scan tests again what its index scans found.
			f, _ := n["Filter"].(string)
			filtered := strings.Contains(f, "recipient_id") && n["Node Type"] != "Bitmap Heap Scan"
			if filtered || n["Node Type"] == "Seq Scan" && (rel == "batches" || strings.HasPrefix(rel, "notifications")) {
				e.t.Errorf("%s: %s on %v filters recipients row by row: %v", what, n["Node Type"], n["Relation Name"], n["Filter"])
			}
			children, _ := n["Plans"].([]any)
			if n["Node Type"] == "BitmapOr" {
				// Each half of a recipient's rows is one arm: an index
				// read twice means a condition spread into several.
				arms := map[string]bool{}
				for _, c := range children {
					name, _ := c.(map[string]any)["Index Name"].(string)
					if arms[name] {
						e.t.Errorf("%s: one BitmapOr reads %s twice", what, name)
					}
					arms[name] = true
				}
			}
			for _, c := range children {
				walk(c.(map[string]any))
			}
		}
		walk(root[0].Plan)
	}
	for _, want := range indexes {
		if !seen[want] {
			e.t.Errorf("%s read no %s (indexes read: %v)", what, want, seen)
		}
	}
	if e.t.Failed() {
		e.t.Logf("%s planned:\n%s", what, strings.Join(e.plans, "\n"))
	}
	e.plans = nil
}

// The split migration, stopped after its work but before it was marked
// applied, runs again at the next start and leaves the same indexes.
func TestIndexSplitMigrationRunsAgain(t *testing.T) {
	t.Parallel()
	d := freshDB(t)
	ctx := context.Background()
	if _, err := d.Pool.Exec(ctx, `DELETE FROM bun_migrations WHERE name = '20261129030000'`); err != nil {
		t.Fatal(err)
	}
	if err := d.Migrate(ctx); err != nil {
		t.Fatalf("migrating again: %v", err)
	}
	rows, err := d.Pool.Query(ctx, `SELECT indexname || ': ' || indexdef FROM pg_indexes
		WHERE indexname IN ('batches_recipient', 'notifications_unread', 'notifications_read', 'notifications_recipient') ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	defs, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(defs) != 3 {
		t.Fatalf("indexes %q (%v), want batches_recipient, notifications_read and notifications_unread", defs, err)
	}
	want := []string{
		"batches_recipient: WHERE (((state = 'open'::text) AND (mode <> 'immediate'::text) AND (NOT sealed)) IS NOT TRUE)",
		"notifications_read: WHERE (((read_at IS NULL) AND (retracted_at IS NULL)) IS NOT TRUE)",
		"notifications_unread: WHERE ((read_at IS NULL) AND (retracted_at IS NULL))",
	}
	for i, def := range defs {
		name, _, _ := strings.Cut(def, ":")
		_, cond, _ := strings.Cut(def, " WHERE ")
		if got := name + ": WHERE " + cond; got != want[i] {
			t.Errorf("index %s, want %s", got, want[i])
		}
	}
}

// While the split migration builds an index, the table can still be read
// (the feed, the console, a flush): each part builds its new indexes
// before it drops the old, whose lock holds reads too. Each statement of
// the migration is run in turn in an open transaction, as a large table's
// build would stand, and after each index build a read of that table
// from another connection must not wait.
func TestIndexSplitMigrationLetsReadsThroughWhileItBuilds(t *testing.T) {
	t.Parallel()
	d := freshDB(t)
	ctx := context.Background()
	file, err := os.ReadFile("migrations/20261129030000_recipient_indexes_split.up.sql")
	if err != nil {
		t.Fatal(err)
	}
	for _, part := range strings.Split(string(file), "\n--bun:split\n") {
		var code []string
		for _, line := range strings.Split(part, "\n") {
			if !strings.HasPrefix(line, "--") {
				code = append(code, line)
			}
		}
		tx, err := d.Pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		for _, stmt := range strings.Split(strings.Join(code, "\n"), ";") {
			stmt = strings.TrimSpace(stmt)
			if stmt == "" {
				continue
			}
			if _, err := tx.Exec(ctx, stmt); err != nil {
				t.Fatalf("%s: %v", stmt, err)
			}
			// CREATE INDEX [IF NOT EXISTS] name ON table …
			f := strings.Fields(stmt)
			on := slices.Index(f, "ON")
			if !strings.HasPrefix(stmt, "CREATE INDEX") || on < 0 {
				continue
			}
			table := f[on+1]
			read, cancel := context.WithTimeout(ctx, time.Second)
			var n int
			err := d.Pool.QueryRow(read, `SELECT count(*) FROM `+table+` WHERE recipient_id = 'r'`).Scan(&n)
			cancel()
			if err != nil {
				t.Errorf("after %q, a read of %s: %v", stmt, table, err)
			}
		}
		if err := tx.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
	}
}
