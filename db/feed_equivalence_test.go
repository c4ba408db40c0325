package db_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/preferences"
)

// feed9b32c40 is Feed as of 9b32c40 (before 539f884): the page's events
// joined, not read through a LATERAL subquery.
func feed9b32c40(ctx context.Context, q db.Querier, recipientID string, before int64, limit int, unreadOnly bool, maxBytes int) (items []db.FeedItem, cut bool, err error) {
	arm := func(half string) string {
		return `(SELECT id, created_at, event_id, type_key, occurred_at, read_at, seen_at FROM notifications n
		     WHERE recipient_id = $1 AND ` + half + ` AND ($2::bigint = 0 OR id < $2)
		       AND EXISTS (SELECT FROM events e WHERE e.id = n.event_id AND e.created_at = n.created_at)
		     ORDER BY id DESC LIMIT $3)`
	}
	rows, err := q.Query(ctx, `
		SELECT n.id, n.event_id, n.type_key, e.actor, e.object, e.data, n.occurred_at, n.read_at, n.seen_at, e.batch_key
		FROM (`+arm(db.UnreadCond)+` UNION ALL `+arm(db.NotUnreadCond+` AND retracted_at IS NULL AND NOT $4`)+`
		      ORDER BY id DESC LIMIT $3) n
		JOIN events e ON e.id = n.event_id AND e.created_at = n.created_at
		ORDER BY n.id DESC`, recipientID, before, limit, unreadOnly)
	if err != nil {
		return nil, false, fmt.Errorf("feed: %w", err)
	}
	defer rows.Close()
	size := 0
	for rows.Next() {
		var f db.FeedItem
		if err := rows.Scan(&f.NotificationID, &f.EventID, &f.TypeKey, &f.Actor, &f.Object, &f.Data, &f.OccurredAt, &f.ReadAt, &f.SeenAt, &f.BatchKey); err != nil {
			return nil, false, fmt.Errorf("feed: %w", err)
		}
		size += len(f.Actor) + len(f.Object) + len(f.Data)
		if len(items) > 0 && size > maxBytes {
			return items, true, nil
		}
		items = append(items, f)
	}
	return items, false, rows.Err()
}

// markRead9b32c40 is MarkRead as of 9b32c40: one UPDATE for ids or a
// cut, with an OR over both.
func markRead9b32c40(ctx context.Context, q db.Querier, recipientID string, ids []int64, before, now time.Time) (int, []db.Removal, error) {
	rows, err := q.Query(ctx, `
		SELECT id FROM batches WHERE recipient_id = $1 AND state = 'open' AND `+db.AnyBatchCond+`
		ORDER BY batch_key = $2, batch_key COLLATE "C", id FOR UPDATE`, recipientID, preferences.HeldKey)
	if err != nil {
		return 0, nil, err
	}
	locked, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return 0, nil, err
	}
	rows, err = q.Query(ctx, `
		SELECT id FROM batches WHERE recipient_id = $1 AND state = 'open' AND batch_key = $2
		  AND id <> ALL($3) AND `+db.AnyBatchCond+` FOR UPDATE`, recipientID, preferences.HeldKey, locked)
	if err != nil {
		return 0, nil, err
	}
	held, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return 0, nil, err
	}
	locked = append(locked, held...)
	tag, err := q.Exec(ctx, `
		UPDATE notifications SET read_at = $4, seen_at = coalesce(seen_at, $4)
		WHERE recipient_id = $1 AND read_at IS NULL AND `+db.AnyNotificationCond+`
		  AND (id = ANY($2::bigint[]) OR (coalesce(cardinality($2::bigint[]), 0) = 0 AND occurred_at < $3))
		  AND (batch_id = ANY($5) OR NOT EXISTS (SELECT 1 FROM batches b WHERE b.id = batch_id AND b.state = 'open'))`,
		recipientID, ids, before, now, locked)
	if err != nil {
		return 0, nil, err
	}
	if len(locked) == 0 {
		return int(tag.RowsAffected()), nil, nil
	}
	rows, err = q.Query(ctx, `
		WITH counts AS (
		    SELECT n.batch_id AS id, max(b.item_count) AS was,
		           count(*) FILTER (WHERE n.retracted_at IS NULL
		           AND (n.read_at IS NULL OR NOT t.skip_read)) AS left
		    FROM notifications n
		    JOIN batches b ON b.id = n.batch_id
		    JOIN notification_types t ON t.key = n.type_key
		    WHERE n.batch_id = ANY($1)
		    GROUP BY n.batch_id
		)
		UPDATE batches b SET item_count = c.left,
		    state = CASE WHEN c.left = 0 THEN 'canceled' ELSE b.state END,
		    reason = CASE WHEN c.left = 0 THEN 'read in app' ELSE b.reason END,
		    processed_at = CASE WHEN c.left = 0 THEN $2 ELSE b.processed_at END
		FROM counts c WHERE b.id = c.id AND b.item_count <> c.left
		RETURNING b.id, b.recipient_id, coalesce(b.type_key, ''), c.was - c.left, c.left`, locked, now)
	if err != nil {
		return 0, nil, err
	}
	removals, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (db.Removal, error) {
		var r db.Removal
		err := row.Scan(&r.BatchID, &r.RecipientID, &r.TypeKey, &r.Removed, &r.Left)
		return r, err
	})
	return int(tag.RowsAffected()), removals, err
}

var equivBase = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// seedEquivalence gives two recipients every state a notification and its
// batch can be in, over several partitions and the default one, and
// notifications whose event is gone.
func seedEquivalence(t *testing.T, d *db.DB) {
	t.Helper()
	exec := execer(t, d)
	exec(`INSERT INTO notification_types (key, name, item_text, group_text, skip_read) VALUES
		('sk', 'Skip', 'x', 'x', true), ('ns', 'NoSkip', 'x', 'x', false)`)
	exec(`INSERT INTO recipients (id, email) VALUES ('r1', 'r1@example.com'), ('r2', 'r2@example.com')`)
	// Batches: for each recipient, of each type, one per state; a sealed
	// open one, an immediate open one, and an open held digest.
	exec(`INSERT INTO batches (recipient_id, batch_key, type_key, mode, state, sealed, opened_at, last_event_at, closes_at, item_count)
		SELECT r, k, k, m, s, sealed, $1, $1, $1::timestamptz + interval '1 hour', 0
		FROM unnest(ARRAY['r1', 'r2']) r, unnest(ARRAY['sk', 'ns']) k,
		     (VALUES ('cooldown', 'open', false), ('cooldown', 'open', true), ('immediate', 'open', false),
		             ('cooldown', 'flushing', false), ('cooldown', 'sent', false), ('cooldown', 'canceled', false)) v(m, s, sealed)
		ORDER BY r, k, m, s, sealed`, equivBase)
	exec(`INSERT INTO batches (recipient_id, batch_key, type_key, mode, state, opened_at, last_event_at, closes_at, item_count)
		SELECT r, $2, NULL, 'daily', 'open', $1, $1, $1::timestamptz + interval '1 day', 0 FROM unnest(ARRAY['r1', 'r2']) r`, equivBase, preferences.HeldKey)
	// Events over yesterday, today, tomorrow and a day far back (the
	// default partition), with data of varying size.
	exec(`INSERT INTO events (id, created_at, type_key, occurred_at, actor, data, batch_key)
		SELECT i, CASE WHEN i % 17 = 0 THEN timestamptz '2020-01-01' + i * interval '1 minute'
		               ELSE date_trunc('day', now()) - interval '1 day' + i * interval '20 minutes' END,
		       CASE WHEN i % 2 = 0 THEN 'sk' ELSE 'ns' END,
		       $1::timestamptz - interval '3 days' + (i % 40) * interval '3 hours',
		       jsonb_build_object('name', repeat('a', i % 7)), jsonb_build_object('n', repeat('b', (i * 13) % 50)), 'k' || i % 3
		FROM generate_series(1, 200) i`, equivBase)
	// Notifications: each event to r1 or r2 (or both), in each kind of
	// batch or none, read, retracted, seen in every combination.
	exec(`INSERT INTO notifications (created_at, event_id, recipient_id, type_key, batch_id, occurred_at, read_at, retracted_at, seen_at)
		SELECT e.created_at, e.id, r, e.type_key,
		       CASE WHEN e.id % 9 = 0 THEN NULL
		            WHEN e.id % 9 = 1 THEN (SELECT id FROM batches b WHERE b.recipient_id = r AND b.batch_key = $2)
		            ELSE (SELECT id FROM batches b WHERE b.recipient_id = r AND b.type_key = e.type_key ORDER BY id OFFSET (e.id / 2) % 6 LIMIT 1) END,
		       e.occurred_at,
		       CASE WHEN e.id % 4 = 0 THEN $1::timestamptz - interval '1 hour' END,
		       CASE WHEN e.id % 5 = 0 THEN $1::timestamptz - interval '2 hours' END,
		       CASE WHEN e.id % 3 = 0 THEN $1::timestamptz - interval '3 hours' END
		FROM events e, unnest(ARRAY['r1', 'r2']) r
		WHERE r = 'r1' OR e.id % 3 <> 1
		ORDER BY e.id, r`, equivBase, preferences.HeldKey)
	// Each batch counts what it still has to send, but one is off by one.
	exec(`UPDATE batches b SET item_count = (SELECT count(*) FROM notifications n JOIN notification_types t ON t.key = n.type_key
		WHERE n.batch_id = b.id AND n.retracted_at IS NULL AND (n.read_at IS NULL OR NOT t.skip_read))`)
	exec(`UPDATE batches SET item_count = item_count + 1 WHERE id = (SELECT min(id) FROM batches WHERE state = 'open' AND type_key = 'ns')`)
	// A few events are gone (retention dropped a day of events first).
	exec(`DELETE FROM events WHERE id % 23 = 0`)
	exec(`ANALYZE`)
}

// TestFeedAnswersAsBeforeTheLateralRead compares Feed with 9b32c40's over
// recipients, cursors (every id, beside them, none, out of range), limits
// (0 to past the end), both filters and byte caps, planned for the
// arguments and generically.
func TestFeedAnswersAsBeforeTheLateralRead(t *testing.T) {
	t.Parallel()
	d := freshDB(t)
	seedEquivalence(t, d)
	ctx := context.Background()
	rows, err := d.Pool.Query(ctx, `SELECT id FROM notifications ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	befores := []int64{0, -1, 1, 1 << 62}
	for i := 0; i < len(ids); i += 11 {
		befores = append(befores, ids[i], ids[i]+1)
	}
	compared := 0
	for _, generic := range []bool{false, true} {
		err := d.InTx(ctx, func(tx pgx.Tx) error {
			if generic {
				if _, err := tx.Exec(ctx, `SET LOCAL plan_cache_mode = force_generic_plan`); err != nil {
					return err
				}
			}
			for _, rid := range []string{"r1", "r2", "nobody", ""} {
				for _, before := range befores {
					for _, limit := range []int{0, 1, 3, 20, 120, 1000} {
						for _, unreadOnly := range []bool{false, true} {
							for _, maxBytes := range []int{0, 40, 1 << 20} {
								if rid != "r1" && (maxBytes != 1<<20 || limit == 3) {
									continue
								}
								was, wasCut, wasErr := feed9b32c40(ctx, tx, rid, before, limit, unreadOnly, maxBytes)
								is, isCut, isErr := db.Feed(ctx, tx, rid, before, limit, unreadOnly, maxBytes)
								compared++
								if fmt.Sprint(was, wasCut, wasErr) != fmt.Sprint(is, isCut, isErr) {
									t.Errorf("generic %v, Feed(%q, %d, %d, %v, %d):\nwas %d items cut %v (%v)\nis  %d items cut %v (%v)",
										generic, rid, before, limit, unreadOnly, maxBytes, len(was), wasCut, wasErr, len(is), isCut, isErr)
								}
							}
						}
					}
				}
			}
			return errRollback
		})
		if err != errRollback {
			t.Fatal(err)
		}
	}
	t.Logf("%d calls compared", compared)
}

// state is every column MarkRead may change, in order.
func markReadState(t *testing.T, tx pgx.Tx) string {
	t.Helper()
	ctx := context.Background()
	var n, b string
	if err := tx.QueryRow(ctx, `SELECT coalesce(string_agg(format('%s:%s:%s', id, read_at, seen_at), ' ' ORDER BY id), '') FROM notifications`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if err := tx.QueryRow(ctx, `SELECT coalesce(string_agg(format('%s:%s:%s:%s:%s', id, state, item_count, reason, processed_at), ' ' ORDER BY id), '') FROM batches`).Scan(&b); err != nil {
		t.Fatal(err)
	}
	return n + "\n" + b
}

// TestMarkReadAnswersAsBeforeTheSplitStatement compares MarkRead with
// 9b32c40's for ids of the recipient's own (unread, read, retracted, in
// open batches of types with skip_read and without, in the held digest,
// in flushing, sent and canceled batches, in none), of another recipient,
// unknown, negative, duplicated, nil and empty, and cuts before, among
// and after the notifications: rows marked, counts returned, removals,
// batch states.
func TestMarkReadAnswersAsBeforeTheSplitStatement(t *testing.T) {
	t.Parallel()
	d := freshDB(t)
	seedEquivalence(t, d)
	ctx := context.Background()
	list := func(sql string, args ...any) []int64 {
		rows, err := d.Pool.Query(ctx, sql, args...)
		if err != nil {
			t.Fatal(err)
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			t.Fatal(err)
		}
		return ids
	}
	kinds := map[string][]int64{
		"nil":     nil,
		"empty":   {},
		"unknown": {1 << 40, 0, -1},
	}
	for _, rid := range []string{"r1", "r2"} {
		q := `SELECT n.id FROM notifications n LEFT JOIN batches b ON b.id = n.batch_id WHERE n.recipient_id = '` + rid + `' AND `
		kinds[rid+" unread"] = list(q + `n.read_at IS NULL AND n.retracted_at IS NULL ORDER BY n.id`)
		kinds[rid+" read"] = list(q + `n.read_at IS NOT NULL ORDER BY n.id`)
		kinds[rid+" retracted"] = list(q + `n.retracted_at IS NOT NULL ORDER BY n.id`)
		kinds[rid+" open sk"] = list(q + `b.state = 'open' AND b.type_key = 'sk' ORDER BY n.id`)
		kinds[rid+" open ns"] = list(q + `b.state = 'open' AND b.type_key = 'ns' ORDER BY n.id`)
		kinds[rid+" held"] = list(q+`b.batch_key = $1 ORDER BY n.id`, preferences.HeldKey)
		kinds[rid+" settled"] = list(q + `b.state <> 'open' ORDER BY n.id`)
		kinds[rid+" no batch"] = list(q + `n.batch_id IS NULL ORDER BY n.id`)
		kinds[rid+" event gone"] = list(q + `NOT EXISTS (SELECT FROM events e WHERE e.id = n.event_id)`)
		kinds[rid+" one"] = kinds[rid+" unread"][:1]
	}
	all := list(`SELECT id FROM notifications ORDER BY id`)
	kinds["everyone's"] = all
	kinds["duplicated"] = append(append([]int64{}, kinds["r1 unread"][:5]...), kinds["r1 unread"][:5]...)
	kinds["mixed"] = append(append(append([]int64{}, kinds["r1 one"]...), kinds["r2 unread"][:3]...), 1<<40, kinds["r1 read"][0], kinds["r1 held"][0])
	many := make([]int64, 1000)
	for i := range many {
		many[i] = all[i%len(all)] + int64(i/len(all))*1_000_000
	}
	kinds["1000"] = many
	var occurred []time.Time
	if err := d.Pool.QueryRow(ctx, `SELECT array_agg(DISTINCT occurred_at ORDER BY occurred_at) FROM notifications`).Scan(&occurred); err != nil {
		t.Fatal(err)
	}
	cuts := []time.Time{{}, equivBase.Add(-1000 * time.Hour), equivBase.Add(1000 * time.Hour)}
	for i := 0; i < len(occurred); i += 7 {
		cuts = append(cuts, occurred[i], occurred[i].Add(time.Microsecond))
	}
	now := equivBase.Add(time.Minute)
	run := func(f func(context.Context, db.Querier, string, []int64, time.Time, time.Time) (int, []db.Removal, error), generic bool, rid string, ids []int64, cut time.Time) string {
		var out string
		err := d.InTx(ctx, func(tx pgx.Tx) error {
			if generic {
				if _, err := tx.Exec(ctx, `SET LOCAL plan_cache_mode = force_generic_plan`); err != nil {
					return err
				}
			}
			n, removals, err := f(ctx, tx, rid, ids, cut, now)
			slices.SortFunc(removals, func(a, b db.Removal) int { return int(a.BatchID - b.BatchID) })
			out = fmt.Sprintf("marked %d, removals %+v, err %v\n%s", n, removals, err, markReadState(t, tx))
			return errRollback
		})
		if err != errRollback {
			t.Fatal(err)
		}
		return out
	}
	compared, marked := 0, 0
	names := make([]string, 0, len(kinds))
	for k := range kinds {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, generic := range []bool{false, true} {
		for _, rid := range []string{"r1", "r2", "nobody"} {
			for _, name := range names {
				ids := kinds[name]
				ridCuts := cuts
				if len(ids) > 0 {
					ridCuts = cuts[:2] // a cut is not read when ids are given
				}
				for _, cut := range ridCuts {
					was := run(markRead9b32c40, generic, rid, ids, cut)
					is := run(db.MarkRead, generic, rid, ids, cut)
					compared++
					if !strings.HasPrefix(is, "marked 0,") {
						marked++
					}
					if was != is {
						t.Errorf("generic %v, MarkRead(%q, %s, %v):\nwas %.300s\nis  %.300s", generic, rid, name, cut, was, is)
					}
				}
			}
		}
	}
	if marked < compared/4 {
		t.Errorf("only %d of %d calls marked anything", marked, compared)
	}
	t.Logf("%d calls compared, %d marked some", compared, marked)
}
