package db_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/lull-dev/lull/db"
)

// scanning is a db.Querier that runs each statement under EXPLAIN
// ANALYZE first (planned for its arguments or generically) and notes,
// per statement, the rows each scan of notifications and events read and
// the sequential scans among them.
type scanning struct {
	t       *testing.T
	tx      pgx.Tx
	generic bool
	read    map[string]float64
	seq     map[string]float64 // rows read by sequential scans, by partition
	ms      float64
	jit     float64 // ms spent compiling statements JIT
}

func (s *scanning) analyze(sql string, args []any) {
	ctx := context.Background()
	if _, err := s.tx.Exec(ctx, "SAVEPOINT scanning"); err != nil {
		s.t.Fatal(err)
	}
	defer s.tx.Exec(ctx, "ROLLBACK TO SAVEPOINT scanning")
	var plan string
	if s.generic {
		if _, err := s.tx.Exec(ctx, "PREPARE scanned AS "+sql+"; SET LOCAL plan_cache_mode = force_generic_plan"); err != nil {
			s.t.Fatal(err)
		}
		defer s.tx.Exec(ctx, "DEALLOCATE scanned; SET LOCAL plan_cache_mode = auto")
		if err := s.tx.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE scanned("+literals(args)+")").Scan(&plan); err != nil {
			s.t.Fatal(err)
		}
	} else if err := s.tx.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) "+sql, args...).Scan(&plan); err != nil {
		s.t.Fatal(err)
	}
	var root []struct {
		Plan          map[string]any
		ExecutionTime float64 `json:"Execution Time"`
		JIT           struct {
			Timing struct {
				Total float64
			}
		}
	}
	if err := json.Unmarshal([]byte(plan), &root); err != nil {
		s.t.Fatal(err)
	}
	s.ms += root[0].ExecutionTime
	s.jit += root[0].JIT.Timing.Total
	if root[0].ExecutionTime > 50 && os.Getenv("LULL_DUMP_PLANS") != "" {
		var text []string
		var rows pgx.Rows
		var err error
		if s.generic {
			rows, err = s.tx.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS) EXECUTE scanned("+literals(args)+")")
		} else {
			rows, err = s.tx.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS) "+sql, args...)
		}
		if err == nil {
			text, err = pgx.CollectRows(rows, pgx.RowTo[string])
		}
		if err != nil {
			s.t.Fatal(err)
		}
		s.t.Logf("%s\n%s", sql, strings.Join(text, "\n"))
	}
	var walk func(n map[string]any)
	walk = func(n map[string]any) {
		rel, _ := n["Relation Name"].(string)
		node := fmt.Sprint(n["Node Type"])
		if strings.Contains(node, "Scan") && rel != "" && (strings.HasPrefix(rel, "notifications") || strings.HasPrefix(rel, "events")) {
			rows, _ := n["Actual Rows"].(float64)
			loops, _ := n["Actual Loops"].(float64)
			removed, _ := n["Rows Removed by Filter"].(float64)
			recheck, _ := n["Rows Removed by Index Recheck"].(float64)
			r := (rows + removed + recheck) * loops
			s.read[strings.SplitN(rel, "_", 2)[0]] += r
			if node == "Seq Scan" && loops > 0 {
				s.seq[rel] += r
			}
		}
		children, _ := n["Plans"].([]any)
		for _, c := range children {
			walk(c.(map[string]any))
		}
	}
	walk(root[0].Plan)
}

func (s *scanning) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	s.analyze(sql, args)
	return s.tx.Exec(ctx, sql, args...)
}

func (s *scanning) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	s.analyze(sql, args)
	return s.tx.Query(ctx, sql, args...)
}

func (s *scanning) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	s.analyze(sql, args)
	return s.tx.QueryRow(ctx, sql, args...)
}

// TestMarkReadOfManyIDsOverAMonthOfPartitions plans Feed and MarkRead
// for a recipient with 40,000 notifications among 2,000 others, spread
// over 30 of 93 day partitions: with partitions never analyzed (as after
// they fill and before autovacuum comes, or after a restore), analyzed
// one by one as autovacuum does (never the partitioned tables), and all
// analyzed; planned for the arguments and generically. Marking ids read
// (3, or 1,000 as a "select all" sends, the recipient's or another's)
// reads those ids, with no sequential scan, and is not JIT-compiled
// first: looked up in the primary key of every partition, 1,000 ids
// were costed past jit_above_cost (263,000 with statistics, a million
// without) and compiled for 0.4-0.5 s (4.8-5.1 s with optimization and
// inlining, beside a sequential scan of every partition holding rows,
// 160,000, when they were never analyzed), to mark 1,000 rows the
// statement of 9b32c40 marked in 40-60 ms. The feed and marking all read are only
// logged: they read no more than 9b32c40's did, but with partitions
// analyzed and not the partitioned tables (as autovacuum leaves them),
// or none, an unread page planned for its arguments reads all of the
// recipient's unread notifications and hashes every event (the arms'
// EXISTS, unchanged by 539f884), and marking all read reads all of the
// recipient's notifications, read ones too, and is JIT-compiled.
func TestMarkReadOfManyIDsOverAMonthOfPartitions(t *testing.T) {
	t.Parallel()
	d := freshDB(t)
	ctx := context.Background()
	exec := execer(t, d)
	exec(`SELECT lull_ensure_partitions(60)`)
	exec(`DO $$ DECLARE d date; BEGIN
		FOR d IN SELECT generate_series((now() AT TIME ZONE 'UTC')::date - 31, (now() AT TIME ZONE 'UTC')::date - 2, interval '1 day')::date LOOP
			FOR t IN 0..1 LOOP
				EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES FROM (%L) TO (%L)',
					(ARRAY['events', 'notifications'])[t+1] || '_p' || to_char(d, 'YYYYMMDD'), (ARRAY['events', 'notifications'])[t+1],
					d::timestamp AT TIME ZONE 'UTC', (d + 1)::timestamp AT TIME ZONE 'UTC');
			END LOOP;
		END LOOP; END $$`)
	exec(`DO $$ DECLARE r regclass; BEGIN
		FOR r IN SELECT inhrelid FROM pg_inherits WHERE inhparent IN ('events'::regclass, 'notifications'::regclass) LOOP
			EXECUTE format('ALTER TABLE %s SET (autovacuum_enabled = false)', r);
		END LOOP; END $$`)
	var parts int
	if err := d.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_inherits WHERE inhparent = 'notifications'::regclass`).Scan(&parts); err != nil {
		t.Fatal(err)
	}
	exec(`INSERT INTO recipients (id, email) SELECT 'r' || i, 'r' || i || '@example.com' FROM generate_series(1, 2000) AS i`)
	exec(`INSERT INTO recipients (id, email) VALUES ('heavy', 'heavy@example.com'), ('reader', 'reader@example.com')`)
	// 40,000 events over the last 30 days: each to heavy (two in three
	// unread), to reader (all but 5 read) and to two others.
	exec(`INSERT INTO events (id, created_at, type_key, occurred_at)
		SELECT i, date_trunc('day', now()) - interval '29 days' + i * interval '65 seconds', 'post', now() - interval '31 days' + i * interval '65 seconds'
		FROM generate_series(1, 40000) AS i`)
	exec(`INSERT INTO notifications (created_at, event_id, recipient_id, type_key, occurred_at, read_at)
		SELECT e.created_at, e.id, r, 'post', e.occurred_at,
		       CASE WHEN r = 'heavy' THEN CASE WHEN e.id % 3 = 0 THEN now() END
		            WHEN r = 'reader' THEN CASE WHEN e.id % 8000 <> 0 THEN now() END
		            WHEN random() < 0.5 THEN now() END
		FROM events e, LATERAL (VALUES ('heavy'), ('reader'), ('r' || 1 + e.id % 2000), ('r' || 1 + (e.id * 7) % 2000)) AS v(r) ORDER BY e.id`)
	idsOf := func(sql string) []int64 {
		rows, err := d.Pool.Query(ctx, sql)
		if err != nil {
			t.Fatal(err)
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			t.Fatal(err)
		}
		return ids
	}
	three := idsOf(`SELECT id FROM notifications WHERE recipient_id = 'heavy' AND read_at IS NULL ORDER BY id DESC LIMIT 3`)
	thousand := idsOf(`SELECT id FROM notifications WHERE recipient_id = 'heavy' AND read_at IS NULL ORDER BY id LIMIT 1000 OFFSET 500`)
	type call struct {
		name   string
		byID   bool    // checked whatever the statistics
		budget float64 // notifications it may read
		run    func(q db.Querier) (int, error)
	}
	now := time.Now()
	calls := []call{
		{"Feed heavy", false, -1, func(q db.Querier) (int, error) {
			items, _, err := db.Feed(ctx, q, "heavy", 0, 120, false, 1<<20)
			return len(items), err
		}},
		{"Feed heavy unread", false, -1, func(q db.Querier) (int, error) {
			items, _, err := db.Feed(ctx, q, "heavy", 0, 120, true, 1<<20)
			return len(items), err
		}},
		{"Feed(9b32c40) heavy", false, -1, func(q db.Querier) (int, error) {
			items, _, err := feed9b32c40(ctx, q, "heavy", 0, 120, false, 1<<20)
			return len(items), err
		}},
		{"Feed(9b32c40) heavy unread", false, -1, func(q db.Querier) (int, error) {
			items, _, err := feed9b32c40(ctx, q, "heavy", 0, 120, true, 1<<20)
			return len(items), err
		}},
		{"MarkRead 3", true, 30, func(q db.Querier) (int, error) {
			n, _, err := db.MarkRead(ctx, q, "heavy", three, now, now)
			return n, err
		}},
		{"MarkRead 1000", true, 2000, func(q db.Querier) (int, error) {
			n, _, err := db.MarkRead(ctx, q, "heavy", thousand, now, now)
			return n, err
		}},
		{"MarkRead 1000 of another", true, 2000, func(q db.Querier) (int, error) {
			n, _, err := db.MarkRead(ctx, q, "r1", thousand, now, now)
			return n, err
		}},
		{"MarkRead(9b32c40) 1000", false, -1, func(q db.Querier) (int, error) {
			n, _, err := markRead9b32c40(ctx, q, "heavy", thousand, now, now)
			return n, err
		}},
		{"MarkRead reader all", false, -1, func(q db.Querier) (int, error) {
			n, _, err := db.MarkRead(ctx, q, "reader", nil, now, now)
			return n, err
		}},
	}
	for _, stats := range []string{"never analyzed", "partitions analyzed", "all analyzed"} {
		switch stats {
		case "partitions analyzed":
			exec(`DO $$ DECLARE r regclass; BEGIN
				FOR r IN SELECT inhrelid FROM pg_inherits WHERE inhparent IN ('events'::regclass, 'notifications'::regclass) LOOP
					EXECUTE format('ANALYZE %s', r);
				END LOOP; END $$`)
		case "all analyzed":
			exec(`ANALYZE events, notifications`)
		}
		for _, generic := range []bool{false, true} {
			for _, c := range calls {
				err := d.InTx(ctx, func(tx pgx.Tx) error {
					s := &scanning{t: t, tx: tx, generic: generic, read: map[string]float64{}, seq: map[string]float64{}}
					n, err := c.run(s)
					if err != nil {
						t.Fatalf("%s: %v", c.name, err)
					}
					var seq []string
					for rel, rows := range s.seq {
						if rows > 0 {
							seq = append(seq, fmt.Sprintf("%s:%.0f", rel, rows))
						}
					}
					sort.Strings(seq)
					msg := fmt.Sprintf("%s, generic %v, %s: %d rows, read %.0f notifications, %.0f events, %.1f ms (JIT %.1f ms); sequential: %v",
						stats, generic, c.name, n, s.read["notifications"], s.read["events"], s.ms, s.jit, seq)
					checked := c.budget >= 0 && (c.byID || stats != "never analyzed")
					if checked && (s.read["notifications"] > c.budget || s.read["events"] > 480 || len(seq) > 0 || s.jit > 0) {
						t.Error(msg)
					} else {
						t.Log(msg)
					}
					return errRollback
				})
				if err != errRollback {
					t.Fatal(err)
				}
			}
		}
	}
	t.Logf("%d partitions of notifications", parts)
}
