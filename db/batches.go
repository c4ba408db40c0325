package db

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Batch states.
const (
	StateOpen     = "open"
	StateFlushing = "flushing"
	StateSent     = "sent"
	StateCanceled = "canceled"
	StateFailed   = "failed"
)

// Batch is a bucket of notifications for one recipient and batch key.
type Batch struct {
	ID          int64      `json:"id"`
	RecipientID string     `json:"recipient"`
	BatchKey    string     `json:"batch_key"`
	TypeKey     *string    `json:"type,omitempty"`
	Mode        string     `json:"mode"`
	State       string     `json:"state"`
	OpenedAt    time.Time  `json:"opened_at"`
	LastEventAt time.Time  `json:"last_event_at"`
	ClosesAt    time.Time  `json:"closes_at"`
	WindowMS    int64      `json:"-"`
	MaxWaitMS   int64      `json:"-"`
	ItemCount   int        `json:"item_count"`
	FlushingAt  *time.Time `json:"flushing_at,omitempty"`
	ProcessedAt *time.Time `json:"processed_at"`
	FlushJobID  *int64     `json:"-"`
	Reason      string     `json:"reason,omitempty"`
}

const batchColumns = `id, recipient_id, batch_key, type_key, mode, state, opened_at, last_event_at, closes_at,
	window_ms, max_wait_ms, item_count, flushing_at, processed_at, flush_job_id, reason`

func scanBatch(row interface{ Scan(...any) error }) (*Batch, error) {
	b := new(Batch)
	err := row.Scan(&b.ID, &b.RecipientID, &b.BatchKey, &b.TypeKey, &b.Mode, &b.State, &b.OpenedAt, &b.LastEventAt,
		&b.ClosesAt, &b.WindowMS, &b.MaxWaitMS, &b.ItemCount, &b.FlushingAt, &b.ProcessedAt, &b.FlushJobID, &b.Reason)
	return b, err
}

// GetBatch loads one batch.
func GetBatch(ctx context.Context, q Querier, id int64) (*Batch, error) {
	b, err := scanBatch(q.QueryRow(ctx, `SELECT `+batchColumns+` FROM batches WHERE id = $1`, id))
	if err != nil {
		return nil, notFound(err, fmt.Sprintf("batch %d", id))
	}
	return b, nil
}

// LockBatch loads one batch and locks its row until the transaction ends:
// whoever holds it is the only one flushing, canceling or changing it.
func LockBatch(ctx context.Context, q Querier, id int64) (*Batch, error) {
	b, err := scanBatch(q.QueryRow(ctx, `SELECT `+batchColumns+` FROM batches WHERE id = $1 FOR UPDATE`, id))
	if err != nil {
		return nil, notFound(err, fmt.Sprintf("batch %d", id))
	}
	return b, nil
}

// SetBatchState moves a batch to state, stamping processed_at for final
// states and flushing_at (with the owning job) for flushing.
func SetBatchState(ctx context.Context, q Querier, id int64, state, reason string, jobID int64, now time.Time) error {
	_, err := q.Exec(ctx, `
		UPDATE batches SET state = $2,
		    reason = CASE WHEN $3 = '' THEN reason ELSE $3 END,
		    flushing_at = CASE WHEN $2 = 'flushing' THEN $5 ELSE flushing_at END,
		    flush_job_id = CASE WHEN $2 = 'flushing' THEN $4 ELSE flush_job_id END,
		    processed_at = CASE WHEN $2 IN ('sent', 'canceled', 'failed') THEN $5 ELSE processed_at END
		WHERE id = $1`, id, state, reason, jobID, now)
	if err != nil {
		return fmt.Errorf("batch %d to %s: %w", id, state, err)
	}
	return nil
}

// MakeDue sets a batch's close time to now, for "flush now".
func MakeDue(ctx context.Context, q Querier, id int64, now time.Time) error {
	_, err := q.Exec(ctx, `UPDATE batches SET closes_at = $2 WHERE id = $1 AND state = 'open'`, id, now)
	return err
}

// Item is one notification of a batch with its event's content.
type Item struct {
	NotificationID int64           `json:"id"`
	EventID        int64           `json:"event_id"`
	TypeKey        string          `json:"type"`
	Actor          json.RawMessage `json:"actor"`
	Object         json.RawMessage `json:"object"`
	Data           json.RawMessage `json:"data"`
	OccurredAt     time.Time       `json:"occurred_at"`
	RetractedAt    *time.Time      `json:"retracted_at,omitempty"`
	ReadAt         *time.Time      `json:"read_at,omitempty"`
}

// BatchItems returns a batch's notifications in arrival order, retracted
// ones included (marked) when withRetracted is set.
func BatchItems(ctx context.Context, q Querier, batchID int64, withRetracted bool) ([]Item, error) {
	rows, err := q.Query(ctx, itemsQuery, batchID, withRetracted)
	items, err := collectItems(rows, err)
	if err != nil {
		return nil, fmt.Errorf("batch %d items: %w", batchID, err)
	}
	return items, nil
}

// itemsFrom selects items (itemFields) with their events' content; a
// WHERE clause completes it.
const itemsFrom = `
	SELECT n.batch_id, n.id, n.event_id, n.type_key, e.actor, e.object, e.data, n.occurred_at, n.retracted_at, n.read_at
	FROM notifications n
	JOIN events e ON e.id = n.event_id AND e.created_at = n.created_at`

// itemsQuery reads batch $1's items, retracted ones only when $2.
const itemsQuery = itemsFrom + `
	WHERE n.batch_id = $1 AND ($2 OR n.retracted_at IS NULL)
	ORDER BY n.id`

// itemFields are where a row of itemsFrom is scanned to: the batch id into
// batchID, the rest into it.
func itemFields(batchID *int64, it *Item) []any {
	return []any{batchID, &it.NotificationID, &it.EventID, &it.TypeKey, &it.Actor, &it.Object, &it.Data, &it.OccurredAt, &it.RetractedAt, &it.ReadAt}
}

func collectItems(rows pgx.Rows, err error) ([]Item, error) {
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (Item, error) {
		var batchID int64
		var it Item
		err := row.Scan(itemFields(&batchID, &it)...)
		return it, err
	})
}

// DueBatches returns open batches whose close time has passed, oldest
// first: the sweep's safety net for any batch whose job went missing. It
// reads the partial index batches_due, which holds only open batches, so
// its cost does not grow with history.
func DueBatches(ctx context.Context, q Querier, now time.Time, limit int) ([]int64, error) {
	rows, err := q.Query(ctx, `
		SELECT id FROM batches WHERE state = 'open' AND closes_at <= $1
		ORDER BY closes_at LIMIT $2`, now, limit)
	if err != nil {
		return nil, fmt.Errorf("due batches: %w", err)
	}
	return collectIDs(rows)
}

// BatchClose is a batch's id and close time.
type BatchClose struct {
	ID       int64
	ClosesAt time.Time
}

// FanOutBatches returns, in id order and at most limit of them, the open
// batches with an id above after and up to last that were opened at
// opened, closing before until (any time when until is zero): the batches
// a fan-out opened, for its wake job (package batching, wake.go). It
// reads a range of the primary key; the opening instant leaves out the
// batches other events opened in between.
func FanOutBatches(ctx context.Context, q Querier, after, last int64, opened, until time.Time, limit int) ([]BatchClose, error) {
	rows, err := q.Query(ctx, `
		SELECT id, closes_at FROM batches
		WHERE id > $1 AND id <= $2 AND opened_at = $3 AND state = 'open'
		  AND ($4::timestamptz IS NULL OR closes_at < $4)
		ORDER BY id LIMIT $5`, after, last, opened, nullTime(until), limit)
	if err != nil {
		return nil, fmt.Errorf("fan-out batches: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[BatchClose])
	if err != nil {
		return nil, fmt.Errorf("fan-out batches: %w", err)
	}
	return out, nil
}

// BatchFilter selects batches for the operator listing.
type BatchFilter struct {
	State     string
	Recipient string
	Type      string
	BatchKey  string
	Before    int64 // cursor: only ids below this
	// OpenedFrom and OpenedUntil bound opened_at when set.
	OpenedFrom, OpenedUntil time.Time
	Limit                   int
}

// ListBatches returns batches newest first, keyset-paged by id so a page
// deep in millions of rows costs the same as the first.
func ListBatches(ctx context.Context, q Querier, f BatchFilter) ([]*Batch, error) {
	if f.Limit <= 0 || f.Limit > 500 {
		f.Limit = 50
	}
	rows, err := q.Query(ctx, `
		SELECT `+batchColumns+` FROM batches
		WHERE ($1 = '' OR state = $1) AND ($2 = '' OR recipient_id = $2)
		  AND ($3 = '' OR type_key = $3) AND ($4 = '' OR batch_key = $4)
		  AND ($5::bigint = 0 OR id < $5)
		  AND ($7::timestamptz IS NULL OR opened_at >= $7) AND ($8::timestamptz IS NULL OR opened_at < $8)
		ORDER BY id DESC LIMIT $6`, f.State, f.Recipient, f.Type, f.BatchKey, f.Before, f.Limit, nullTime(f.OpenedFrom), nullTime(f.OpenedUntil))
	if err != nil {
		return nil, fmt.Errorf("list batches: %w", err)
	}
	defer rows.Close()
	var out []*Batch
	for rows.Next() {
		b, err := scanBatch(rows)
		if err != nil {
			return nil, fmt.Errorf("list batches: %w", err)
		}
		out = append(out, b)
	}
	return out, rows.Err()
}

// Removal is what taking notifications out of an open batch did to it:
// how many left it and how many are still to send. The skip log records
// each removal, so that every notification not sent says why.
type Removal struct {
	BatchID     int64
	RecipientID string
	TypeKey     string // empty for a digest
	Removed     int
	Left        int
}

// RetractEvent marks an event retracted and takes its notifications out of
// every batch that has not started flushing. It returns how many it
// marked, and what it took out of each batch's count: a notification read
// in the app (of a type with skip_read) left the count when it was read.
// Batch rows are locked in id order first, so a concurrent flush either
// finishes before (and its items stay sent) or sees the retraction.
func RetractEvent(ctx context.Context, q Querier, eventID int64, now time.Time) (int, []Removal, error) {
	if _, err := q.Exec(ctx, `UPDATE events SET retracted_at = $2 WHERE id = $1 AND retracted_at IS NULL`, eventID, now); err != nil {
		return 0, nil, fmt.Errorf("retract event %d: %w", eventID, err)
	}
	if _, err := q.Exec(ctx, `
		SELECT b.id FROM batches b
		WHERE b.state = 'open' AND b.id IN (SELECT batch_id FROM notifications WHERE event_id = $1)
		ORDER BY b.id FOR UPDATE`, eventID); err != nil {
		return 0, nil, fmt.Errorf("retract event %d: %w", eventID, err)
	}
	rows, err := q.Query(ctx, `
		WITH gone AS (
		    UPDATE notifications n SET retracted_at = $2
		    FROM batches b, notification_types t
		    WHERE n.event_id = $1 AND n.retracted_at IS NULL AND b.id = n.batch_id AND b.state = 'open'
		      AND t.key = n.type_key
		    RETURNING n.batch_id, n.read_at IS NULL OR NOT t.skip_read AS counted
		)
		UPDATE batches b SET item_count = b.item_count - g.n
		FROM (SELECT batch_id, count(*) AS marked, count(*) FILTER (WHERE counted) AS n FROM gone GROUP BY batch_id) g
		WHERE b.id = g.batch_id
		RETURNING b.id, b.recipient_id, coalesce(b.type_key, ''), g.n, b.item_count, g.marked`, eventID, now)
	if err != nil {
		return 0, nil, fmt.Errorf("retract event %d: %w", eventID, err)
	}
	marked := 0
	removals, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Removal, error) {
		var r Removal
		var n int
		err := row.Scan(&r.BatchID, &r.RecipientID, &r.TypeKey, &r.Removed, &r.Left, &n)
		marked += n
		return r, err
	})
	if err != nil {
		return 0, nil, fmt.Errorf("retract event %d: %w", eventID, err)
	}
	return marked, removals, nil
}

func collectRemovals(rows pgx.Rows) ([]Removal, error) {
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (Removal, error) {
		var r Removal
		err := row.Scan(&r.BatchID, &r.RecipientID, &r.TypeKey, &r.Removed, &r.Left)
		return r, err
	})
}

// ReclaimStuck releases batches left in "flushing" by a process that died:
// their owning job no longer exists, has finished, or has been running
// since before cutoff (longer than any flush may take). It returns their
// ids; the caller enqueues a flush for each, and that job takes them over.
// Batches whose job waits to retry after a temporary failure keep it, so
// the backoff is respected.
func ReclaimStuck(ctx context.Context, q Querier, cutoff time.Time) ([]int64, error) {
	rows, err := q.Query(ctx, `
		UPDATE batches b SET flush_job_id = NULL
		WHERE b.state = 'flushing' AND b.flushing_at < $1
		  AND NOT EXISTS (
		      SELECT 1 FROM river_job j
		      WHERE j.id = b.flush_job_id
		        AND (j.state IN ('available', 'pending', 'scheduled', 'retryable')
		             OR (j.state = 'running' AND j.attempted_at >= $1)))
		RETURNING b.id`, cutoff)
	if err != nil {
		return nil, fmt.Errorf("reclaim stuck batches: %w", err)
	}
	return collectIDs(rows)
}

func collectIDs(rows pgx.Rows) ([]int64, error) {
	return pgx.CollectRows(rows, pgx.RowTo[int64])
}

// ReopenForRetry puts a failed batch back to "flushing" with no owning job
// and its delivery to pending, so the next flush job sends it again.
func ReopenForRetry(ctx context.Context, q Querier, id int64, now time.Time) error {
	_, err := q.Exec(ctx, `
		WITH d AS (UPDATE deliveries SET state = 'pending', failed_at = NULL WHERE batch_id = $1)
		UPDATE batches SET state = 'flushing', flush_job_id = NULL, flushing_at = $2, processed_at = NULL, reason = ''
		WHERE id = $1 AND state = 'failed'`, id, now)
	if err != nil {
		return fmt.Errorf("retry batch %d: %w", id, err)
	}
	return nil
}

func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}
