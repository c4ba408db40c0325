package db_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/db/dbtest"
)

// A fan-out has just opened thousands of batches and autovacuum has not
// counted them yet, so PostgreSQL takes the open batches for next to
// none. The probes for open batches (MarkFresh, and sealing the batches
// a join found full) must then still find the right rows, and be planned
// for the lists they are given, never looping over one side for each row
// of the other: joined to the list, such a probe took 65 s for 10,000
// recipients each holding an open batch under another key.
func TestOpenBatchProbesStayLinearWithStaleStatistics(t *testing.T) {
	t.Parallel()
	d := freshDB(t)
	ctx := context.Background()
	const n = 3000
	// The statistics see only sent batches; then as many open ones come.
	addBatches := func(prefix, state string) {
		t.Helper()
		if _, err := d.Pool.Exec(ctx, `INSERT INTO batches (recipient_id, batch_key, type_key, mode, state, opened_at, last_event_at, closes_at, window_ms, item_count)
			SELECT $2 || i, 'task', 'task', 'cooldown', $3, now(), now(), now() + interval '1 hour', 3600000, 1 FROM generate_series(0, $1 - 1) AS i`, n, prefix, state); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := d.Pool.Exec(ctx, `ALTER TABLE batches SET (autovacuum_enabled = false)`); err != nil {
		t.Fatal(err)
	}
	addBatches("s", "sent")
	if _, err := d.Pool.Exec(ctx, `ANALYZE batches`); err != nil {
		t.Fatal(err)
	}
	addBatches("p", "open")
	joins := make([]db.BatchJoin, n)
	for i := range joins {
		joins[i] = db.BatchJoin{RecipientID: fmt.Sprint("p", i), BatchKey: "digest:daily", Mode: "daily", ClosesAt: freshNow}
	}
	if fresh, err := db.MarkFresh(ctx, d.Pool, joins); err != nil || !fresh || joins[n-1].Reserved == 0 {
		t.Fatalf("fresh %v (%v), last id %d; want every daily digest new, each with an id", fresh, err, joins[n-1].Reserved)
	}
	// One recipient's digest is open after all: the probe sees it.
	if _, err := d.Pool.Exec(ctx, `INSERT INTO batches (recipient_id, batch_key, mode, opened_at, last_event_at, closes_at, item_count)
		VALUES ('p1234', 'digest:daily', 'daily', now(), now(), now() + interval '1 day', 1)`); err != nil {
		t.Fatal(err)
	}
	again := unmarked(joins)
	if fresh, err := db.MarkFresh(ctx, d.Pool, again); err != nil || fresh || again[0].Reserved != 0 {
		t.Fatalf("fresh %v (%v) with p1234's digest open; want it seen, and no ids taken", fresh, err)
	}

	rids, pairs, keys := db.OpenBatchArgs(joins)
	// Neither probe, nor the history read of the leading item, is kept as
	// a prepared statement, which PostgreSQL would come to plan once for
	// any lists.
	c, err := d.Pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Release()
	for range 7 {
		if _, err := db.MarkFresh(ctx, c, unmarked(joins)); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Exec(ctx, db.SealQuery, db.ListPlan, []string{"nobody"}, []string{"nobody:task"}, []string{"task"}); err != nil {
			t.Fatal(err)
		}
		if _, err := db.LastActivity(ctx, c, rids, rids[:10], "task", freshNow); err != nil {
			t.Fatal(err)
		}
	}
	var kept int
	if err := c.QueryRow(ctx, `SELECT count(*) FROM pg_prepared_statements WHERE (statement LIKE '%' || 'b.sealed' || '%' OR statement LIKE '%' || 'max(last_event_at)' || '%')
		AND statement NOT LIKE '%pg_prepared_statements%'`).Scan(&kept); err != nil || kept != 0 {
		t.Fatalf("%d probes kept as prepared statements (%v), want none", kept, err)
	}
	// Even the plan PostgreSQL would make for any lists, the one the
	// statement cache led to, has nothing that loops: there is no join.
	for name, q := range map[string]struct {
		sql  string
		args []any
	}{
		"MarkFresh": {db.MarkFreshQuery, []any{rids, pairs, keys, n}},
		"sealing":   {db.SealQuery, []any{rids, pairs, keys}},
	} {
		plan := explainAnalyze(t, d, q.sql, q.args)
		if bad := loopedNodes(t, plan); len(bad) > 0 {
			t.Fatalf("%s: %s\n%s", name, strings.Join(bad, "; "), plan)
		}
	}
	// Sealing sealed p1234's digest only, the one open batch the pairs name.
	var sealed int
	if _, err := d.Pool.Exec(ctx, db.SealQuery, db.ListPlan, rids, pairs, keys); err != nil {
		t.Fatal(err)
	}
	if err := d.Pool.QueryRow(ctx, `SELECT count(*) FROM batches WHERE sealed AND recipient_id = 'p1234' AND batch_key = 'digest:daily'`).Scan(&sealed); err != nil || sealed != 1 {
		t.Errorf("%d of p1234's digests sealed (%v), want 1", sealed, err)
	}
	if err := d.Pool.QueryRow(ctx, `SELECT count(*) FROM batches WHERE sealed`).Scan(&sealed); err != nil || sealed != 1 {
		t.Errorf("%d batches sealed (%v), want only p1234's digest", sealed, err)
	}
}

// unmarked is joins as the probe first sees them: neither Fresh nor with ids.
func unmarked(joins []db.BatchJoin) []db.BatchJoin {
	out := make([]db.BatchJoin, len(joins))
	for i, j := range joins {
		j.Fresh, j.Reserved = false, 0
		out[i] = j
	}
	return out
}

// explainAnalyze runs sql with the plan PostgreSQL makes for any
// arguments (a generic plan, as a prepared statement reaches), inside a
// transaction rolled back, and returns that plan as JSON. (EXPLAIN of
// the statement itself would plan for the arguments given.)
func explainAnalyze(t *testing.T, d *db.DB, sql string, args []any) string {
	t.Helper()
	ctx := context.Background()
	// EXECUTE takes no parameters of its own: the arguments go in as
	// literals.
	var plan string
	err := d.InTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `PREPARE probe AS `+sql+`; SET LOCAL plan_cache_mode = force_generic_plan`); err != nil {
			return err
		}
		defer tx.Exec(ctx, `DEALLOCATE probe`)
		if err := tx.QueryRow(ctx, "EXPLAIN (ANALYZE, VERBOSE, FORMAT JSON) EXECUTE probe("+literals(args)+")").Scan(&plan); err != nil {
			return err
		}
		return errRollback
	})
	if err != errRollback {
		t.Fatal(err)
	}
	return plan
}

// literals writes args as SQL literals, for EXECUTE, which takes no
// parameters of its own.
func literals(args []any) string {
	quote := func(v string) string { return "'" + strings.ReplaceAll(v, "'", "''") + "'" }
	params := make([]string, len(args))
	for i, a := range args {
		switch a := a.(type) {
		case string:
			params[i] = quote(a) + "::text"
		case []string:
			quoted := make([]string, len(a))
			for j, v := range a {
				quoted[j] = `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(v) + `"`
			}
			params[i] = quote("{"+strings.Join(quoted, ",")+"}") + "::text[]"
		case []int64:
			ns := make([]string, len(a))
			for j, v := range a {
				ns[j] = fmt.Sprint(v)
			}
			params[i] = quote("{"+strings.Join(ns, ",")+"}") + "::bigint[]"
		case time.Time:
			params[i] = quote(a.Format(time.RFC3339Nano)) + "::timestamptz"
		default:
			params[i] = fmt.Sprint(a)
		}
	}
	return strings.Join(params, ", ")
}

var errRollback = errors.New("rolled back on purpose")

// loopedNodes names the nodes of a JSON plan that ran more than once or
// that join by looping.
func loopedNodes(t *testing.T, plan string) []string {
	t.Helper()
	var root []struct{ Plan map[string]any }
	if err := json.Unmarshal([]byte(plan), &root); err != nil || len(root) != 1 {
		t.Fatalf("plan: %v", err)
	}
	var bad []string
	var walk func(n map[string]any)
	walk = func(n map[string]any) {
		if loops, _ := n["Actual Loops"].(float64); loops > 1 || n["Node Type"] == "Nested Loop" {
			bad = append(bad, fmt.Sprintf("%v ran %v times", n["Node Type"], n["Actual Loops"]))
		}
		children, _ := n["Plans"].([]any)
		for _, c := range children {
			if m, ok := c.(map[string]any); ok {
				walk(m)
			}
		}
	}
	walk(root[0].Plan)
	return bad
}

// The probes find a recipient's open batch whatever the connection's
// client encoding (text is converted between it and the database's, so
// a length counted in Go's bytes could differ from the server's), and
// whatever ':' or '\' the recipient's id and the key hold.
func TestOpenBatchProbesMatchPairsExactly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u := dbtest.NewURL(t)
	for _, encoding := range []string{"UTF8", "LATIN1"} {
		t.Run(encoding, func(t *testing.T) {
			cfg, err := pgx.ParseConfig(u)
			if err != nil {
				t.Fatal(err)
			}
			cfg.RuntimeParams["client_encoding"] = encoding
			conn, err := pgx.ConnectConfig(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(ctx)
			open := [][2]string{{"josé" + encoding, "task"}, {`a:b` + encoding, "c"}, {`a\` + encoding, `:x`}}
			for _, p := range open {
				if _, err := conn.Exec(ctx, `INSERT INTO batches (recipient_id, batch_key, mode, opened_at, last_event_at, closes_at, item_count)
					VALUES ($1, $2, 'cooldown', now(), now(), now() + interval '1 hour', 1)`, p[0], p[1]); err != nil {
					t.Fatal(err)
				}
			}
			probe := func(pairs ...string) bool {
				var joins []db.BatchJoin
				for i := 0; i < len(pairs); i += 2 {
					joins = append(joins, db.BatchJoin{RecipientID: pairs[i], BatchKey: pairs[i+1], Mode: "cooldown"})
				}
				fresh, err := db.MarkFresh(ctx, conn, joins)
				if err != nil {
					t.Fatal(err)
				}
				return !fresh
			}
			for _, p := range open {
				if !probe(p[0], p[1]) {
					t.Errorf("%q's batch under %q not found", p[0], p[1])
				}
			}
			// A probe whose lists name the open batch's recipient and key,
			// and a pair that would read like it joined without escaping.
			if probe("a", "b"+encoding+":c", "a:b"+encoding, "other", "z", "c") {
				t.Error(`"a" under "b:c" found, though only "a:b" under "c" is open`)
			}
			if probe("josé", encoding+"task", "josé"+encoding, "other", "z", "task") {
				t.Error(`"josé" found, though only "josé…" is open`)
			}
		})
	}
}
