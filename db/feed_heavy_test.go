package db_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lull-dev/lull/db"
)

// analyzing is a db.Querier that runs each statement under EXPLAIN
// ANALYZE first (planned for its arguments or generically, see planOf)
// and counts the rows its scans read, by table.
type analyzing struct {
	watched
	t       *testing.T
	generic bool
	read    map[string]float64 // rows read by scans, by table prefix
	jit     float64            // ms spent compiling statements
}

func newAnalyzing(t *testing.T, tx pgx.Tx, generic bool) *analyzing {
	a := &analyzing{t: t, generic: generic, read: map[string]float64{}}
	a.watched = watched{tx, a.analyze}
	return a
}

func (a *analyzing) analyze(sql string, args []any) {
	plan := planOf(a.t, a.tx, "ANALYZE, FORMAT JSON", sql, args, a.generic)
	var root []struct {
		Plan map[string]any
		JIT  struct{ Timing struct{ Total float64 } }
	}
	if err := json.Unmarshal([]byte(plan), &root); err != nil {
		a.t.Fatal(err)
	}
	a.jit += root[0].JIT.Timing.Total
	var walk func(n map[string]any)
	walk = func(n map[string]any) {
		rel, _ := n["Relation Name"].(string)
		if strings.Contains(fmt.Sprint(n["Node Type"]), "Scan") && rel != "" {
			rows, _ := n["Actual Rows"].(float64)
			loops, _ := n["Actual Loops"].(float64)
			removed, _ := n["Rows Removed by Filter"].(float64)
			a.read[strings.SplitN(rel, "_", 2)[0]] += (rows + removed) * loops
		}
		children, _ := n["Plans"].([]any)
		for _, c := range children {
			walk(c.(map[string]any))
		}
	}
	walk(root[0].Plan)
}

// A feed page of a recipient with a long unread backlog reads about a
// page of its notifications and their events, however it is planned: not
// every unread notification (keyed by recipient alone,
// notifications_unread no longer gave them in id order) or every event
// (a join planned for the recipient hashed them all) on every page, which
// makes paging through the backlog quadratic, over a month of day
// partitions with statistics as autovacuum leaves them. Marking a few
// read reads those few, and nothing is compiled first (JIT).
func TestFeedPageOfAHeavyRecipientReadsAboutAPage(t *testing.T) {
	t.Parallel()
	d := freshDB(t)
	ctx := context.Background()
	exec := execer(t, d)
	exec(`INSERT INTO recipients (id, email) SELECT 'r' || i, 'r' || i || '@example.com' FROM generate_series(1, 2000) AS i`)
	exec(`INSERT INTO recipients (id, email) VALUES ('heavy', 'heavy@example.com')`)
	// A month of day partitions, as a month's retention keeps.
	exec(`DO $$ DECLARE d date; t text; BEGIN
		FOR d IN SELECT generate_series(current_date - 31, current_date - 2, interval '1 day')::date LOOP
			FOREACH t IN ARRAY ARRAY['events', 'notifications'] LOOP
				EXECUTE format('CREATE TABLE IF NOT EXISTS %I PARTITION OF %I FOR VALUES FROM (%L) TO (%L)',
					t || '_p' || to_char(d, 'YYYYMMDD'), t, d::timestamp AT TIME ZONE 'UTC', (d + 1)::timestamp AT TIME ZONE 'UTC');
			END LOOP;
		END LOOP; END $$`)
	// 20,000 events over the last 30 days, each to the heavy recipient
	// (two in three unread) and to two others.
	exec(`INSERT INTO events (id, created_at, type_key, occurred_at)
		SELECT i, date_trunc('day', now()) - interval '29 days' + i * interval '130 seconds', 'post', now() FROM generate_series(1, 20000) AS i`)
	exec(`INSERT INTO notifications (created_at, event_id, recipient_id, type_key, occurred_at, read_at)
		SELECT e.created_at, e.id, r, 'post', e.occurred_at, CASE WHEN r <> 'heavy' AND random() < 0.5 OR r = 'heavy' AND e.id % 3 = 0 THEN now() END
		FROM events e, LATERAL (VALUES ('heavy'), ('r' || 1 + e.id % 2000), ('r' || 1 + (e.id * 7) % 2000)) AS v(r) ORDER BY e.id`)
	// Statistics as autovacuum leaves them: each partition's, none for
	// the partitioned tables, which it never analyzes.
	exec(`ANALYZE recipients`)
	exec(`DO $$ DECLARE r regclass; BEGIN
		FOR r IN SELECT inhrelid FROM pg_inherits WHERE inhparent IN ('events'::regclass, 'notifications'::regclass) LOOP
			EXECUTE format('ANALYZE %s', r);
		END LOOP; END $$`)
	const limit = 120 // a page of 20 and the API's groupSlack
	for _, generic := range []bool{false, true} {
		for _, unreadOnly := range []bool{false, true} {
			err := d.InTx(ctx, func(tx pgx.Tx) error {
				q := newAnalyzing(t, tx, generic)
				items, _, err := db.Feed(ctx, q, "heavy", 0, limit, unreadOnly, 1<<20)
				if err != nil || len(items) != limit {
					t.Fatalf("Feed: %d items (%v), want %d", len(items), err, limit)
				}
				// Each half may read a page (and a few more whose event
				// is gone), and the events of those: each looked up in
				// its day's partition (a small one is read whole, once a
				// row), not all 20,000 hashed.
				if q.read["notifications"] > 4*limit || q.read["events"] > 5000 {
					t.Errorf("generic %v, unread only %v: a page of %d read %.0f notifications and %.0f events",
						generic, unreadOnly, limit, q.read["notifications"], q.read["events"])
				}
				return errRollback
			})
			if err != errRollback {
				t.Fatal(err)
			}
		}
		// Marking three of them read, as a click on the bell does, reads
		// those three, not the recipient's whole list; marking 1,000 (a
		// "select all") reads those, and is not compiled first: looked up
		// in every partition's primary key, the planner costs them past
		// jit_above_cost.
		for _, n := range []int{3, 1000} {
			err := d.InTx(ctx, func(tx pgx.Tx) error {
				rows, err := tx.Query(ctx, `SELECT id FROM notifications WHERE recipient_id = 'heavy' AND read_at IS NULL ORDER BY id DESC LIMIT $1`, n)
				if err != nil {
					return err
				}
				ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
				if err != nil {
					return err
				}
				q := newAnalyzing(t, tx, generic)
				marked, _, err := db.MarkRead(ctx, q, "heavy", ids, time.Now(), time.Now())
				if err != nil || marked != n {
					t.Fatalf("MarkRead marked %d (%v), want %d", marked, err, n)
				}
				if q.read["notifications"] > float64(2*n) || q.jit > 0 {
					t.Errorf("generic %v: marking %d read read %.0f notifications, compiled for %.0f ms", generic, n, q.read["notifications"], q.jit)
				}
				return errRollback
			})
			if err != errRollback {
				t.Fatal(err)
			}
		}
	}
}
