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
// delivery attempts go with them), skips, outbox emails, bounce reports
// and idempotency keys written before it, expired operator sessions and
// ended mutes. Open and flushing
// batches stay however old they are, and so does the audit log. It returns
// how many rows went, by table.
func Prune(ctx context.Context, q Querier, cutoff time.Time) (map[string]int64, error) {
	out := map[string]int64{}
	// A batch goes only once no notification of it can remain: before the
	// oldest day partition still kept (retention keeps a day whole, and
	// longer while an unsent batch needs it), so history that the console
	// and the simulator read never points at a batch that is gone.
	kept, err := oldestKeptDay(ctx, q)
	if err != nil {
		return out, err
	}
	walks := []struct {
		table, written, cond string
		before               time.Time
	}{
		{"batches", "opened_at", "t.state IN ('sent', 'canceled', 'failed') AND t.processed_at < $2", minTime(cutoff, kept)},
		{"skips", "created_at", "t.created_at < $2", cutoff},
		{"outbox", "created_at", "t.created_at < $2", cutoff},
		// Bounce reports stay for the rates' window at least.
		{"bounce_reports", "received_at", "t.received_at < $2", minTime(cutoff, time.Now().Add(-RateWindow))},
	}
	for _, w := range walks {
		n, err := pruneInOrder(ctx, q, w.table, w.written, w.cond, w.before)
		if err != nil {
			return out, fmt.Errorf("prune %s: %w", w.table, err)
		}
		out[w.table] = n
	}
	// An idempotency key stays while its event does, so a retry or a
	// retraction by key still finds an event that waits in a long batch.
	if out["event_keys"], err = deleteChunks(ctx, q, `DELETE FROM event_keys WHERE (api_key_id, key) IN (
		SELECT k.api_key_id, k.key FROM event_keys k
		WHERE k.created_at < $1 AND NOT EXISTS (SELECT 1 FROM events e WHERE e.id = k.event_id)
		LIMIT $2)`, cutoff); err != nil {
		return out, fmt.Errorf("prune event_keys: %w", err)
	}
	tag, err := q.Exec(ctx, `DELETE FROM operator_sessions WHERE expires_at < now()`)
	if err != nil {
		return out, fmt.Errorf("prune operator_sessions: %w", err)
	}
	out["operator_sessions"] = tag.RowsAffected()
	// A mute past its end stops nothing and is listed nowhere.
	if tag, err = q.Exec(ctx, `DELETE FROM muted_threads WHERE until < now()`); err != nil {
		return out, fmt.Errorf("prune muted_threads: %w", err)
	}
	out["muted_threads"] = tag.RowsAffected()
	// A watch past its end is one a stream stopped renewing: its process
	// closed without saying so, or died.
	if tag, err = q.Exec(ctx, `DELETE FROM feed_watchers WHERE expires_at < now()`); err != nil {
		return out, fmt.Errorf("prune feed_watchers: %w", err)
	}
	out["feed_watchers"] = tag.RowsAffected()
	return out, nil
}

// oldestKeptDay is the first day of the oldest notifications partition
// still kept, or the far future when there is none.
func oldestKeptDay(ctx context.Context, q Querier) (time.Time, error) {
	var day *time.Time
	err := q.QueryRow(ctx, `SELECT min(`+partitionDay+`)::timestamp AT TIME ZONE 'UTC' `+dayPartitions+`
		  AND p.relname = 'notifications'`).Scan(&day)
	if err != nil || day == nil {
		return time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC), err
	}
	return *day, nil
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
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
