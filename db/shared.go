package db

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// SharedSiblings returns up to limit batches that may join a shared email
// with a batch of typeKey and batchKey flushed by job jobID at now: other
// recipients' open batches of that key already due, and batches left
// flushing by this job's earlier attempt or by a job that died (the sweep
// cleared their owner), so a retry sends the same group again. Only
// recipients in zone with locale are asked for: others' emails read
// differently, and locking their batches would only hold up their own
// flushes. Batches in exclude are already in hand. Nothing is locked:
// the caller locks what it takes with LockFreeForFlush. The wake time,
// never after the close, lets the open ones be found in batches_due.
func SharedSiblings(ctx context.Context, q Querier, typeKey, batchKey string, exclude []int64, jobID int64, zone, locale string, now time.Time, limit int) ([]int64, error) {
	rows, err := q.Query(ctx, `
		SELECT b.id FROM batches b JOIN recipients r ON r.id = b.recipient_id
		WHERE b.type_key = $1 AND b.batch_key = $2 AND b.id <> ALL($3)
		  AND ((b.state = 'open' AND b.wake_at <= $5 AND b.closes_at <= $5)
		       OR (b.state = 'flushing' AND (b.flush_job_id = $4 OR b.flush_job_id IS NULL)))
		  AND r.timezone = $7 AND r.locale = $8
		ORDER BY b.id LIMIT $6`, typeKey, batchKey, exclude, jobID, now, limit, zone, locale)
	if err != nil {
		return nil, fmt.Errorf("shared siblings of %s: %w", batchKey, err)
	}
	return collectIDs(rows)
}

// MarkShared records that the deliveries of batches went out as one
// email, sent by the job flushing lead.
func MarkShared(ctx context.Context, q Querier, lead int64, batches []int64) error {
	_, err := q.Exec(ctx, `UPDATE deliveries SET shared_by = $1 WHERE batch_id = ANY($2)`, lead, batches)
	if err != nil {
		return fmt.Errorf("mark shared delivery of batch %d: %w", lead, err)
	}
	return nil
}

// SharedWith returns the batches whose email went out together with
// batch id's, id included, in id order; nil when it went out alone.
func SharedWith(ctx context.Context, q Querier, id int64) ([]int64, error) {
	rows, err := q.Query(ctx, `
		SELECT batch_id FROM deliveries
		WHERE shared_by = (SELECT shared_by FROM deliveries WHERE batch_id = $1)
		ORDER BY batch_id`, id)
	if err != nil {
		return nil, fmt.Errorf("shared delivery of batch %d: %w", id, err)
	}
	return collectIDs(rows)
}

// Unshare records that batch id's email went out alone after all, as
// messageID: its shared email was refused and each member got their own.
func Unshare(ctx context.Context, q Querier, id int64, messageID string) error {
	_, err := q.Exec(ctx, `UPDATE deliveries SET message_id = $2, shared_by = NULL WHERE batch_id = $1`, id, messageID)
	if err != nil {
		return fmt.Errorf("unshare delivery of batch %d: %w", id, err)
	}
	return nil
}

// SharedCounts returns, for those of ids whose email went out shared,
// how many batches that email served.
func SharedCounts(ctx context.Context, q Querier, ids []int64) (map[int64]int, error) {
	rows, err := q.Query(ctx, `
		SELECT d.batch_id, (SELECT count(*) FROM deliveries s WHERE s.shared_by = d.shared_by)
		FROM deliveries d WHERE d.batch_id = ANY($1) AND d.shared_by IS NOT NULL`, ids)
	if err != nil {
		return nil, fmt.Errorf("shared deliveries: %w", err)
	}
	defer rows.Close()
	out := map[int64]int{}
	for rows.Next() {
		var id int64
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			return nil, err
		}
		out[id] = n
	}
	return out, rows.Err()
}

// SharedLeftOut returns the skip log of the members left out of the
// shared email batch id went out in: batches of its type and key,
// outside the email, that closed between the first of its batches and
// its send and were skipped (suppressed, muted, read, inactive). Those
// that got an email of their own (another zone or language) are not
// left out. Nil when the email did not go out shared.
func SharedLeftOut(ctx context.Context, q Querier, id int64, limit int) ([]SkipEntry, error) {
	rows, err := q.Query(ctx, `
		WITH g AS (
		    SELECT b.id, b.type_key, b.batch_key, b.closes_at, coalesce(d.sent_at, d.created_at) AS at
		    FROM deliveries d JOIN batches b ON b.id = d.batch_id
		    WHERE d.shared_by = (SELECT shared_by FROM deliveries WHERE batch_id = $1)),
		w AS (SELECT min(type_key) AS t, min(batch_key) AS k, min(closes_at) AS lo, max(at) AS hi, array_agg(id) AS ids FROM g)
		SELECT s.created_at, s.recipient_id, s.type_key, s.event_id, s.batch_id, s.items, s.reason
		FROM w JOIN batches b ON b.type_key = w.t AND b.batch_key = w.k AND b.id <> ALL(w.ids)
		    AND b.state = 'canceled' AND b.closes_at BETWEEN w.lo AND w.hi
		JOIN skips s ON s.batch_id = b.id
		ORDER BY s.id LIMIT $2`, id, limit)
	if err != nil {
		return nil, fmt.Errorf("left out of the shared email of batch %d: %w", id, err)
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[SkipEntry])
}
