package db

import (
	"context"
	"fmt"
	"time"
)

// pruneChunk is how many rows one statement of Prune looks at, so that no
// lock is held for long and a large backlog goes away in small steps.
const pruneChunk = 5000

// Prune deletes what lull keeps about finished work once it is older than
// cutoff: batches sent, canceled or failed before it (their deliveries and
// delivery attempts go with them), skips, outbox emails and idempotency
// keys written before it, and expired operator sessions. Open and flushing
// batches stay however old they are, and so does the audit log. It returns
// how many rows went, by table.
func Prune(ctx context.Context, q Querier, cutoff time.Time) (map[string]int64, error) {
	out := map[string]int64{}
	walks := []struct{ table, written, cond string }{
		{"batches", "opened_at", "t.state IN ('sent', 'canceled', 'failed') AND t.processed_at < $2"},
		{"skips", "created_at", "t.created_at < $2"},
		{"outbox", "created_at", "t.created_at < $2"},
	}
	for _, w := range walks {
		n, err := pruneInOrder(ctx, q, w.table, w.written, w.cond, cutoff)
		if err != nil {
			return out, fmt.Errorf("prune %s: %w", w.table, err)
		}
		out[w.table] = n
	}
	var err error
	if out["event_keys"], err = deleteChunks(ctx, q, `DELETE FROM event_keys WHERE (api_key_id, key) IN (
		SELECT api_key_id, key FROM event_keys WHERE created_at < $1 LIMIT $2)`, cutoff); err != nil {
		return out, fmt.Errorf("prune event_keys: %w", err)
	}
	tag, err := q.Exec(ctx, `DELETE FROM operator_sessions WHERE expires_at < now()`)
	if err != nil {
		return out, fmt.Errorf("prune operator_sessions: %w", err)
	}
	out["operator_sessions"] = tag.RowsAffected()
	return out, nil
}

// pruneInOrder walks table in id order, pruneChunk rows at a time,
// deleting those that meet cond, and stops at the first chunk written
// entirely at or after cutoff: ids follow the order rows were written, so
// nothing after that chunk can be old enough. The rows it walks past are
// the few old ones that stay (a weekly digest still open), so an hourly
// run reads about an hour of rows, not the whole table.
func pruneInOrder(ctx context.Context, q Querier, table, written, cond string, cutoff time.Time) (int64, error) {
	sql := fmt.Sprintf(`
		WITH chunk AS (SELECT id, %[2]s AS written FROM %[1]s WHERE id > $1 ORDER BY id LIMIT %[4]d),
		gone AS (DELETE FROM %[1]s t USING chunk WHERE t.id = chunk.id AND %[3]s RETURNING 1)
		SELECT (SELECT max(id) FROM chunk), (SELECT min(written) FROM chunk), (SELECT count(*) FROM gone)`,
		table, written, cond, pruneChunk)
	var after, total int64
	for {
		var last *int64
		var first *time.Time
		var n int64
		if err := q.QueryRow(ctx, sql, after, cutoff).Scan(&last, &first, &n); err != nil {
			return total, err
		}
		total += n
		if last == nil || !first.Before(cutoff) {
			return total, nil
		}
		after = *last
	}
}

// deleteChunks runs a DELETE taking the cutoff and a limit until it
// deletes fewer rows than the limit.
func deleteChunks(ctx context.Context, q Querier, sql string, cutoff time.Time) (int64, error) {
	var total int64
	for {
		tag, err := q.Exec(ctx, sql, cutoff, pruneChunk)
		if err != nil {
			return total, err
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < pruneChunk {
			return total, nil
		}
	}
}
