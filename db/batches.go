package db

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/lull-dev/lull/preferences"
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
	// FoldedInto is the held batch this one's notifications went to when
	// it was over the recipient's daily email budget (state canceled).
	FoldedInto *int64 `json:"folded_into,omitempty"`
}

// Held reports whether b is its recipient's held digest (over-budget
// emails wait in it): known by its key and by holding no one type, since
// a type's own batch may carry the same key. heldDigest is the same test
// in SQL.
func (b *Batch) Held() bool { return b.BatchKey == preferences.HeldKey && b.TypeKey == nil }

const heldDigest = `(batch_key = '` + preferences.HeldKey + `' AND type_key IS NULL)`

const batchColumns = `id, recipient_id, batch_key, type_key, mode, state, opened_at, last_event_at, closes_at,
	window_ms, max_wait_ms, item_count, flushing_at, processed_at, flush_job_id, reason, folded_into`

func scanBatch(row interface{ Scan(...any) error }) (*Batch, error) {
	b := new(Batch)
	err := row.Scan(&b.ID, &b.RecipientID, &b.BatchKey, &b.TypeKey, &b.Mode, &b.State, &b.OpenedAt, &b.LastEventAt,
		&b.ClosesAt, &b.WindowMS, &b.MaxWaitMS, &b.ItemCount, &b.FlushingAt, &b.ProcessedAt, &b.FlushJobID, &b.Reason, &b.FoldedInto)
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
	_, err := q.Exec(ctx, `UPDATE batches SET closes_at = $2, wake_at = least(wake_at, $2) WHERE id = $1 AND state = 'open'`, id, now)
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
	// BatchKey is the event's own batch key ("document:7"), empty when it
	// named none: with TypeKey it names the item's conversation, which a
	// digest offers to mute item by item.
	BatchKey string `json:"-"`
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
	SELECT n.batch_id, n.id, n.event_id, n.type_key, e.actor, e.object, e.data, n.occurred_at, n.retracted_at, n.read_at, e.batch_key
	FROM notifications n
	JOIN events e ON e.id = n.event_id AND e.created_at = n.created_at`

// itemsQuery reads batch $1's items, retracted ones only when $2.
const itemsQuery = itemsFrom + `
	WHERE n.batch_id = $1 AND ($2 OR n.retracted_at IS NULL)
	ORDER BY n.id`

// itemFields are where a row of itemsFrom is scanned to: the batch id into
// batchID, the rest into it.
func itemFields(batchID *int64, it *Item) []any {
	return []any{batchID, &it.NotificationID, &it.EventID, &it.TypeKey, &it.Actor, &it.Object, &it.Data, &it.OccurredAt, &it.RetractedAt, &it.ReadAt, &it.BatchKey}
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
// its cost does not grow with history. The index is by wake time, which
// is never after the close time; a batch whose close slid past its wake
// time is passed over here and moved on by CatchUpWakes.
func DueBatches(ctx context.Context, q Querier, now time.Time, limit int) ([]int64, error) {
	rows, err := q.Query(ctx, `
		SELECT id FROM batches WHERE state = 'open' AND wake_at <= $1 AND closes_at <= $1
		ORDER BY wake_at LIMIT $2`, now, limit)
	if err != nil {
		return nil, fmt.Errorf("due batches: %w", err)
	}
	return collectIDs(rows)
}

// CatchUpWakes moves the wake time of at most limit open batches up to
// their close time where the close slid past now, so that DueBatches
// does not step over them on every sweep. A joining event slides a
// cool-down's close and leaves its wake time, the one indexed column it
// would otherwise change, as it was. Batches another transaction holds
// are left for the next sweep rather than waited for: an ingestion locks
// batches in its own order, and waiting here could deadlock with it.
func CatchUpWakes(ctx context.Context, q Querier, now time.Time, limit int) error {
	_, err := q.Exec(ctx, `
		UPDATE batches b SET wake_at = b.closes_at
		FROM (SELECT id FROM batches WHERE state = 'open' AND wake_at <= $1 AND closes_at > $1
		      ORDER BY wake_at LIMIT $2 FOR UPDATE SKIP LOCKED) s
		WHERE b.id = s.id`, now, limit)
	if err != nil {
		return fmt.Errorf("catch up wake times: %w", err)
	}
	return nil
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

// joinable is batches_one_open's condition: an open batch an event may
// join. notJoinable, batches_recipient's, holds every other batch; it is
// written "IS NOT TRUE", not NOT, so that PostgreSQL keeps it one
// condition instead of spreading it into an OR of three (which read the
// index once for each). A query must name either condition as written
// for PostgreSQL to read its index.
const (
	joinable    = `(state = 'open' AND mode <> 'immediate' AND NOT sealed)`
	notJoinable = `(` + joinable + ` IS NOT TRUE)`
)

// anyBatch is true of every batch: beside recipient_id = …, it lets
// PostgreSQL read a recipient's batches from both indexes that hold them
// between them (a BitmapOr), so that a fan-out opening 100,000 batches
// writes one index keyed by recipient, not two.
const anyBatch = `(` + joinable + ` OR ` + notJoinable + `)`

// ListBatches returns batches newest first, keyset-paged by id so a page
// deep in millions of rows costs the same as the first. It is planned for
// the filter it is given (listPlan), so that a page of open batches reads
// the index of open batches (batches_open), whose predicate a plan made
// for any state cannot use.
func ListBatches(ctx context.Context, q Querier, f BatchFilter) ([]*Batch, error) {
	if f.Limit <= 0 || f.Limit > 500 {
		f.Limit = 50
	}
	where := `($1 = '' OR state = $1)
		  AND ($3 = '' OR type_key = $3) AND ($4 = '' OR batch_key = $4)
		  AND ($5::bigint = 0 OR id < $5)
		  AND ($7::timestamptz IS NULL OR opened_at >= $7) AND ($8::timestamptz IS NULL OR opened_at < $8)`
	sql := `SELECT ` + batchColumns + ` FROM batches WHERE $2 = '' AND ` + where
	if f.Recipient != "" {
		// A recipient's batches are in two indexes: its few joinable
		// ones (one a key) from batches_one_open, the rest newest first
		// from batches_recipient, and the page is the newest of both.
		// As one condition (anyBatch), a page read the recipient's whole
		// list, or for one with many batches walked the primary key back
		// past everyone's newer ones.
		sql = `SELECT ` + batchColumns + ` FROM (
		    (SELECT ` + batchColumns + ` FROM batches WHERE recipient_id = $2 AND ` + joinable + ` AND ` + where + `)
		    UNION ALL
		    (SELECT ` + batchColumns + ` FROM batches WHERE recipient_id = $2 AND ` + notJoinable + ` AND ` + where + `
		     ORDER BY id DESC LIMIT $6)) b`
	}
	rows, err := q.Query(ctx, sql+`
		ORDER BY id DESC LIMIT $6`, listPlan, f.State, f.Recipient, f.Type, f.BatchKey, f.Before, f.Limit, nullTime(f.OpenedFrom), nullTime(f.OpenedUntil))
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

// RecentImmediate counts, per recipient, the immediate batches of typeKey
// opened since since: the burst guard's measure.
func RecentImmediate(ctx context.Context, q Querier, ids []string, typeKey string, since time.Time) (map[string]int, error) {
	rows, err := q.Query(ctx, `
		SELECT recipient_id, count(*) FROM batches
		WHERE mode = 'immediate' AND type_key = $2 AND recipient_id = ANY($1) AND opened_at > $3
		GROUP BY recipient_id`, ids, typeKey, since)
	if err != nil {
		return nil, fmt.Errorf("count recent emails: %w", err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			return nil, err
		}
		out[id] = n
	}
	return out, rows.Err()
}

// Activity is the last time a recipient had a notification under a batch
// key, and whether a batch for it is open to join.
type Activity struct {
	Last    time.Time
	HasOpen bool
}

// LastActivity reports Activity for recipients ids under batchKey:
// whether a batch (not an immediate one) is open to join at now (one due
// or sealed is not: it only waits for its flush), and, for those also in
// lead, when they last had a notification under the key (for the
// leading-item rule; for the others Last is zero). The open batches are
// read from batches_one_open, one index entry per recipient. Only the
// leading-item rule reads the recipients' past batches, so the burst
// guard, which every immediate fan-out applies, costs the same however
// long their histories are; asking every recipient for the last
// notification made it read every batch they ever had, or the whole table.
// It is planned for the list it is given (listPlan): planned once for any
// list while autovacuum had not yet counted a fan-out's open batches, it
// read them all and tested each against the whole list (10 s a chunk).
func LastActivity(ctx context.Context, q Querier, ids, lead []string, batchKey string, now time.Time) (map[string]Activity, error) {
	rows, err := q.Query(ctx, `
		SELECT recipient_id, true, NULL::timestamptz FROM batches
		WHERE recipient_id = ANY($1) AND batch_key = $3 AND `+joinable+` AND closes_at > $4
		UNION ALL
		SELECT recipient_id, false, max(last_event_at) FROM batches
		WHERE recipient_id = ANY($2) AND batch_key = $3 AND `+anyBatch+`
		GROUP BY recipient_id`, listPlan, ids, lead, batchKey, now)
	if err != nil {
		return nil, fmt.Errorf("last activity: %w", err)
	}
	defer rows.Close()
	out := map[string]Activity{}
	for rows.Next() {
		var id string
		var open bool
		var last *time.Time
		if err := rows.Scan(&id, &open, &last); err != nil {
			return nil, err
		}
		a := out[id]
		a.HasOpen = a.HasOpen || open
		if last != nil {
			a.Last = *last
		}
		out[id] = a
	}
	return out, rows.Err()
}

// MarkFresh marks the joins Fresh when none of their recipients has a
// batch open to join under the join's key (batches_one_open answers it),
// and reports whether it did. Fresh is all or nothing (see JoinBatches),
// so the probe stops at the first open batch. Immediate joins always open
// a batch of their own and are left as they are.
//
// In the same round trip it reserves an id from the batches' sequence for
// every join it marks, immediate ones included (see BatchJoin.Reserved),
// and none when it marks nothing. Ids a stale hint leaves unused are
// gaps in the sequence, like those of any rolled-back insert.
func MarkFresh(ctx context.Context, q Querier, joins []BatchJoin) (bool, error) {
	open := joins
	if slices.ContainsFunc(joins, isImmediate) {
		open = slices.DeleteFunc(slices.Clone(joins), isImmediate)
	}
	rids, pairs, keys := openBatchArgs(open)
	// The EXISTS names no outer column: it runs once, and nextval runs
	// only when it finds nothing.
	rows, err := q.Query(ctx, markFreshQuery, listPlan, rids, pairs, keys, len(joins))
	if err != nil {
		return false, fmt.Errorf("look for open batches: %w", err)
	}
	ids := make([]int64, 0, len(joins))
	var id int64
	if _, err := pgx.ForEachRow(rows, []any{&id}, func() error {
		ids = append(ids, id)
		return nil
	}); err != nil {
		return false, fmt.Errorf("look for open batches: %w", err)
	}
	if len(ids) != len(joins) {
		return false, nil
	}
	markReserved(joins, ids)
	return true, nil
}

// MarkNew is MarkFresh for joins whose recipients the caller has just
// created (a COPY that met none stored): they had no batch to find, so it
// only reserves the ids. A batch another event opened for one of them
// since is met as any stale hint is (JoinBatches).
func MarkNew(ctx context.Context, q Querier, joins []BatchJoin) error {
	rows, err := q.Query(ctx, `SELECT nextval('batches_id_seq') FROM generate_series(1, $1)`, len(joins))
	if err != nil {
		return fmt.Errorf("reserve batch ids: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return fmt.Errorf("reserve batch ids: %w", err)
	}
	markReserved(joins, ids)
	return nil
}

// markReserved gives each join its id, in order, and marks those that
// would open a batch to share Fresh.
func markReserved(joins []BatchJoin, ids []int64) {
	for i := range joins {
		joins[i].Fresh = joins[i].Mode != "immediate"
		joins[i].Reserved = ids[i]
	}
}

func isImmediate(j BatchJoin) bool { return j.Mode == "immediate" }

// BatchJoin asks for one notification to go into a batch: the open one for
// (RecipientID, BatchKey) if there is one that is neither due nor full,
// else a new one. Immediate joins always open a batch of their own.
type BatchJoin struct {
	RecipientID string
	BatchKey    string
	Mode        string
	TypeKey     string // empty for digests, which mix types
	Window      time.Duration
	MaxWait     time.Duration
	ClosesAt    time.Time // for a new batch
	// MaxItems is the type's max_items for a cooldown join (0: no limit),
	// so that a new batch takes no more of the joins for its key.
	MaxItems int
	// Fresh says the recipient had no batch open under BatchKey a moment
	// ago (read ahead of the transaction, see MarkFresh). It is a hint:
	// when every join of a statement has it, the batches are opened with
	// a plain INSERT, which PostgreSQL writes for about three quarters of
	// an upsert's work; if another event opened one of them meanwhile,
	// that INSERT fails on batches_one_open and the joins are upserted
	// as usual.
	Fresh bool
	// Reserved is an id MarkFresh took from the batches' sequence for the
	// batch this join would open, or 0. When every join of a statement
	// has one, the batches are opened with those ids and nothing is read
	// back: what the statement would return is known already (see
	// openedAs), which spares a fan-out reading 100,000 rows it wrote.
	Reserved int64
}

// JoinedBatch is a batch after a join, with what the engine needs to
// recompute when it closes.
type JoinedBatch struct {
	ID          int64
	RecipientID string
	BatchKey    string
	Mode        string
	OpenedAt    time.Time
	LastEventAt time.Time
	ClosesAt    time.Time
	Window      time.Duration
	MaxWait     time.Duration
	ItemCount   int
	Inserted    bool
}

// JoinBatches puts one notification per join into its batch and returns,
// for each join in order, the batch it went into as the last statement
// left it. The partial unique index batches_one_open makes concurrent
// ingests for one recipient and key meet in a single batch: the upsert
// either inserts it or locks and updates the existing open row, and the
// lock is held until the caller's transaction commits. Rows are written
// in one order so that concurrent fan-outs cannot deadlock: by bytes
// (COLLATE "C"), the order Go sorts strings in, because a large event is
// written in chunks cut in Go's order.
//
// Several joins may name the same recipient and key, as when events
// posted at the same moment go to one thread: they meet here, and the row
// is written once for all of them (its item count goes up by their
// number), not once each. A flood of events into one open batch then
// writes a row version per set of events, not per event.
//
// The upsert also slides a cooldown batch's close time
// (preferences.CooldownCloses, never earlier than it was) or, when the
// batch reaches max_items, makes it due; the caller computes the close
// time again with the recipient's quiet hours and writes it only where
// that differs. Each joined row is then written once in the common case.
//
// An open batch that is due (closes_at <= now) or has no room for its
// joins takes none of them: its flush is on its way, or late because the
// process running it died, and a batch that kept growing meanwhile would
// exceed max_items and go out ever later. The upsert locks such a batch
// without joining it. Those joins, and those beyond what a new batch may
// take, are then taken in rounds of one per key (joinEach), exactly as if
// their events had come one after another: the first fill the batch to
// max_items, the next seals it and opens a new one. A round locks only
// rows the first statement locked or this transaction created, so the
// order above still holds.
func JoinBatches(ctx context.Context, q Querier, joins []BatchJoin, now time.Time) ([]JoinedBatch, error) {
	out, _, err := JoinBatchesMeeting(ctx, q, joins, now)
	return out, err
}

// JoinBatchesMeeting is JoinBatches that also says whether the joins met a
// batch that was open already: joined it, found it due or full and
// sealed it, or met it in batches_one_open with a plain INSERT, then
// undone. Only then can the statement have waited for another
// transaction that committed, with one exception: a plain INSERT that
// waited for a transaction which took the batch it met out of open
// before committing (a flush, a cancel, a mark-read), and so met
// nothing. Such a transaction changes only the state of batches (and
// what they sent): a later chunk read before it commits sees them as
// they stood a moment earlier, as if the event had come then, and a
// batch it found open that is no longer is a hint the upsert corrects.
func JoinBatchesMeeting(ctx context.Context, q Querier, joins []BatchJoin, now time.Time) ([]JoinedBatch, bool, error) {
	groups := groupJoins(joins)
	out := make([]JoinedBatch, len(joins))
	// take gives the next k joins of g batch b, and b's new state to the
	// joins of g that went into it before.
	take := func(g *joinGroup, b JoinedBatch, k int) {
		if g.done > 0 {
			if prev := out[g.idx[g.done-1]]; prev.ID == b.ID {
				b.Inserted = b.Inserted || prev.Inserted
			}
		}
		for n, i := range g.idx[:g.done+k] {
			if n >= g.done || out[i].ID == b.ID {
				out[i] = b
			}
		}
		g.done += k
	}

	first := make([]BatchJoin, len(groups))
	counts := make([]int, len(groups))
	for i, g := range groups {
		first[i], counts[i] = joins[g.idx[0]], len(g.idx)
		if j := first[i]; j.Mode == "cooldown" && j.MaxItems > 0 {
			counts[i] = min(counts[i], j.MaxItems)
		}
	}
	rows, undone, err := openOrJoin(ctx, q, first, counts, now)
	if err != nil {
		return nil, false, err
	}
	found := byKey(rows)
	var rest []*joinGroup
	for i := range groups {
		g := &groups[i]
		if b, ok := found.next(first[i]); ok {
			take(g, b, counts[i])
		}
		if g.done < len(g.idx) {
			rest = append(rest, g)
		}
	}
	met := undone || len(rest) > 0 || slices.ContainsFunc(rows, func(b JoinedBatch) bool { return !b.Inserted })
	for len(rest) > 0 {
		round := make([]BatchJoin, len(rest))
		for i, g := range rest {
			round[i] = joins[g.idx[g.done]]
		}
		joined, err := joinEach(ctx, q, round, now)
		if err != nil {
			return nil, false, err
		}
		for i, g := range rest {
			take(g, joined[i], 1)
		}
		rest = slices.DeleteFunc(rest, func(g *joinGroup) bool { return g.done == len(g.idx) })
	}
	return out, met, nil
}

// joinGroup is the joins for one batch key of one recipient: idx are
// their places in the list, done how many have a batch. An immediate join
// is a group of its own.
type joinGroup struct {
	idx  []int
	done int
}

// groupJoins groups joins by recipient and key, in the order each group's
// first join comes; an immediate join is a group of its own. A group's
// idx starts as a slice of one shared array, and joins whose keys ascend
// (a fan-out's) are grouped by comparing each with the group before,
// others through a map: a map and a slice for each of 100,000 joins were
// a tenth of what a fan-out allocated.
func groupJoins(joins []BatchJoin) []joinGroup {
	groups := make([]joinGroup, 0, len(joins))
	places := make([]int, len(joins))
	sorted := keysAscend(joins)
	var at map[[2]string]int
	if !sorted {
		at = make(map[[2]string]int, len(joins))
	}
	last := -1 // the group of the last join not immediate
	for i, j := range joins {
		places[i] = i
		if j.Mode != "immediate" {
			k := joinKey(j)
			var g int
			var ok bool
			if sorted {
				g, ok = last, last >= 0 && joinKey(joins[groups[last].idx[0]]) == k
			} else {
				g, ok = at[k]
			}
			if ok {
				groups[g].idx = append(groups[g].idx, i)
				continue
			}
			if !sorted {
				at[k] = len(groups)
			}
			last = len(groups)
		}
		groups = append(groups, joinGroup{idx: places[i : i+1 : i+1]})
	}
	return groups
}

func joinKey(j BatchJoin) [2]string { return [2]string{j.RecipientID, j.BatchKey} }

// keysAscend says whether the joins that are not immediate come in
// recipient and key order, so that the joins of one key are neighbours.
func keysAscend(joins []BatchJoin) bool {
	var prev *BatchJoin
	for i := range joins {
		if j := &joins[i]; j.Mode != "immediate" {
			if prev != nil && cmp.Or(strings.Compare(prev.RecipientID, j.RecipientID), strings.Compare(prev.BatchKey, j.BatchKey)) > 0 {
				return false
			}
			prev = j
		}
	}
	return true
}

// joinedByKey finds the rows of an upsert by recipient and key, in id
// order: several immediate batches of one key come back in the order
// their joins were given.
type joinedByKey struct {
	rows []JoinedBatch // by recipient, key and id
	at   map[[2]string]int
}

func byKey(rows []JoinedBatch) joinedByKey {
	slices.SortFunc(rows, func(a, b JoinedBatch) int {
		return cmp.Or(cmp.Compare(a.RecipientID, b.RecipientID), cmp.Compare(a.BatchKey, b.BatchKey), cmp.Compare(a.ID, b.ID))
	})
	m := joinedByKey{rows: rows, at: make(map[[2]string]int, len(rows))}
	for i := len(rows) - 1; i >= 0; i-- {
		m.at[[2]string{rows[i].RecipientID, rows[i].BatchKey}] = i
	}
	return m
}

// next takes the next row for j's recipient and key, if the upsert
// returned one.
func (m joinedByKey) next(j BatchJoin) (JoinedBatch, bool) {
	k := [2]string{j.RecipientID, j.BatchKey}
	i, ok := m.at[k]
	if !ok || i == len(m.rows) || m.rows[i].RecipientID != j.RecipientID || m.rows[i].BatchKey != j.BatchKey {
		return JoinedBatch{}, false
	}
	m.at[k] = i + 1
	return m.rows[i], true
}

// joinEach puts one notification per join into its batch, the keys all
// different, and returns the batches in the order of joins: the open
// batch where it is neither due nor full, else (after sealing it) a new
// one.
func joinEach(ctx context.Context, q Querier, joins []BatchJoin, now time.Time) ([]JoinedBatch, error) {
	rows, err := upsertBatches(ctx, q, joins, nil, now)
	if err != nil {
		return nil, err
	}
	found := byKey(rows)
	out := make([]JoinedBatch, len(joins))
	var refused []int
	for i, j := range joins {
		var ok bool
		if out[i], ok = found.next(j); !ok {
			refused = append(refused, i)
		}
	}
	if len(refused) == 0 {
		return out, nil
	}
	again := make([]BatchJoin, len(refused))
	for k, i := range refused {
		again[k] = joins[i]
	}
	if err := sealBatches(ctx, q, again); err != nil {
		return nil, err
	}
	rows, err = upsertBatches(ctx, q, again, nil, now)
	if err != nil {
		return nil, err
	}
	if len(rows) != len(again) {
		return nil, fmt.Errorf("join batches: %d of %d new batches opened", len(rows), len(again))
	}
	found = byKey(rows)
	for k, i := range refused {
		out[i], _ = found.next(again[k])
	}
	return out, nil
}

// openOrJoin is the first statement of JoinBatches: the upsert, or a
// plain INSERT of new batches when every join is immediate (whose rows
// batches_one_open leaves out, so they meet nothing) or Fresh, else
// immediate. The INSERT of Fresh joins runs under a savepoint and in the
// upsert's order, so it waits for the same rows as the upsert would; when
// a hint was stale and the INSERT meets a batch another event opened
// since, the savepoint is rolled back, which undoes the INSERT and its
// locks, and the joins are upserted instead. Splitting the joins between
// an INSERT and an upsert would lock rows out of order and let two
// events deadlock, so it is all of them or none. undone says the INSERT
// was undone.
func openOrJoin(ctx context.Context, q Querier, joins []BatchJoin, counts []int, now time.Time) (rows []JoinedBatch, undone bool, err error) {
	fresh, hinted := len(joins) > 0, false
	for _, j := range joins {
		fresh = fresh && (j.Fresh || j.Mode == "immediate")
		hinted = hinted || j.Fresh
	}
	insert := func() ([]JoinedBatch, error) {
		if reservedInOrder(joins) {
			return insertReserved(ctx, q, joins, counts, now)
		}
		return insertBatches(ctx, q, joins, counts, now, "")
	}
	_, inTx := q.(pgx.Tx)
	switch {
	case fresh && !hinted:
		// Immediate joins only: batches_one_open leaves their rows out,
		// so the INSERT meets nothing.
		rows, err = insert()
	case !fresh || !inTx:
		// A savepoint needs a transaction.
		rows, err = upsertBatches(ctx, q, joins, counts, now)
	default:
		rows, err = insertElse(ctx, q, "batches_one_open", insert, func() ([]JoinedBatch, error) {
			undone = true
			return upsertBatches(ctx, q, joins, counts, now)
		})
	}
	return rows, undone, err
}

// insertElse runs insert, a plain INSERT, under a savepoint and, when it
// meets the unique index named (a row written since the caller looked),
// undoes it and runs fallback, an upsert, instead. The savepoint ends
// either way, so that the caller's later writes are not made in a
// subtransaction. Any other error of insert is returned as it is, so
// that callers can tell a lock timeout apart.
func insertElse[T any](ctx context.Context, q Querier, index string, insert, fallback func() (T, error)) (T, error) {
	var zero T
	if _, err := q.Exec(ctx, "SAVEPOINT insert_else"); err != nil {
		return zero, fmt.Errorf("savepoint: %w", err)
	}
	out, err := insert()
	met := violates(err, index)
	if err != nil && !met {
		return zero, err
	}
	end := "RELEASE SAVEPOINT insert_else"
	if met {
		end = "ROLLBACK TO SAVEPOINT insert_else; " + end
	}
	if _, err := q.Exec(ctx, end); err != nil {
		return zero, fmt.Errorf("savepoint: %w", err)
	}
	if met {
		return fallback()
	}
	return out, nil
}

// violates reports whether err is an INSERT refused by the unique index
// named.
func violates(err error, index string) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23505" && pgErr.ConstraintName == index
}

// upsertBatches is one statement of JoinBatches: it puts counts[i]
// notifications (one when counts is nil) into the batch of joins[i], or
// opens one with them, except where the open batch is due or has no room
// for them, which it only locks. The result has no row for those.
func upsertBatches(ctx context.Context, q Querier, joins []BatchJoin, counts []int, now time.Time) ([]JoinedBatch, error) {
	return insertBatches(ctx, q, joins, counts, now, joinOpenBatch)
}

// joinOpenBatch is the upsert's conflict clause. Fullness is checked
// against the type as stored: an ingest's now is read before its
// transaction starts, so a later one may fill the batch first, and
// another process's clock may run a little behind. An existing batch
// closes at once when the joins fill it, else slides to min(last event +
// window, opened + max wait) and never earlier than it was (only the
// caller moves a close time earlier, since it must then schedule a flush).
// Its wake time moves only when it closes at once: a slide leaves every
// indexed column as it was, so PostgreSQL updates the row in place
// (a HOT update, in the room the table's fill factor leaves) instead of
// writing a new entry in each of the batch's indexes.
const joinOpenBatch = `
		ON CONFLICT (recipient_id, batch_key) WHERE ` + joinable + `
		DO UPDATE SET item_count = b.item_count + EXCLUDED.item_count,
		              last_event_at = greatest(b.last_event_at, EXCLUDED.last_event_at),
		              closes_at = CASE
		                  WHEN b.mode <> 'cooldown' THEN b.closes_at
		                  WHEN ` + joinFills + ` THEN EXCLUDED.last_event_at
		                  ELSE greatest(b.closes_at, least(
		                      greatest(b.last_event_at, EXCLUDED.last_event_at) + b.window_ms * interval '1 millisecond',
		                      CASE WHEN b.max_wait_ms > 0 THEN b.opened_at + b.max_wait_ms * interval '1 millisecond' END))
		              END,
		              wake_at = CASE
		                  WHEN b.mode = 'cooldown' AND ` + joinFills + ` THEN least(b.wake_at, EXCLUDED.last_event_at)
		                  ELSE b.wake_at
		              END
		WHERE b.closes_at > $8 AND (b.mode <> 'cooldown' OR NOT ` + joinOverfills + `)`

// joinFills says the joins fill open batch b of joinOpenBatch, and
// joinOverfills that they would take it past max_items. Each asks first
// whether b's type has a max_items at all, in a list PostgreSQL reads
// once a statement (a hashed subplan), so that the type is looked up for
// each row only when it has one: three lookups a row were a quarter of
// the time the upsert took to join 10,000 open batches.
const (
	joinFills     = `(b.type_key IN (SELECT key FROM notification_types WHERE max_items > 0) AND EXISTS (` + typeCap + ` >= t.max_items))`
	joinOverfills = `(b.type_key IN (SELECT key FROM notification_types WHERE max_items > 0) AND EXISTS (` + typeCap + ` > t.max_items))`
	typeCap       = `SELECT 1 FROM notification_types t WHERE t.key = b.type_key AND t.max_items > 0 AND b.item_count + EXCLUDED.item_count`
)

// insertBatches opens a batch for each join, with counts[i] notifications
// (one when counts is nil), then onConflict: nothing for a plain INSERT,
// joinOpenBatch for the upsert. The close time written is
// preferences.SettleClose without quiet hours, which the caller applies:
// a new batch that its joins fill closes at once. Rows are inserted in the
// order of the list within a key, so immediate batches of one key get ids
// in the order of their joins.
func insertBatches(ctx context.Context, q Querier, joins []BatchJoin, counts []int, now time.Time, onConflict string) ([]JoinedBatch, error) {
	if len(joins) == 0 {
		return nil, nil
	}
	rows, err := q.Query(ctx, `
		INSERT INTO batches AS b (recipient_id, batch_key, mode, type_key, window_ms, max_wait_ms, closes_at, wake_at,
		                          opened_at, last_event_at, item_count)
		SELECT `+newBatchRows+onConflict+`
		RETURNING id, recipient_id, batch_key, mode, opened_at, last_event_at, closes_at,
		          window_ms, max_wait_ms, item_count, xmax = 0`,
		batchArgs(joins, counts, now, false)...)
	if err != nil {
		return nil, fmt.Errorf("join batches: %w", err)
	}
	defer rows.Close()
	out := make([]JoinedBatch, 0, len(joins))
	for rows.Next() {
		var b JoinedBatch
		var w, m int64
		if err := rows.Scan(&b.ID, &b.RecipientID, &b.BatchKey, &b.Mode, &b.OpenedAt, &b.LastEventAt, &b.ClosesAt,
			&w, &m, &b.ItemCount, &b.Inserted); err != nil {
			return nil, fmt.Errorf("join batches: %w", err)
		}
		b.Window, b.MaxWait = time.Duration(w)*time.Millisecond, time.Duration(m)*time.Millisecond
		out = append(out, b)
	}
	return out, rows.Err()
}

// insertReserved is insertBatches without ON CONFLICT for joins that each
// hold a Reserved id: the batches are opened with those ids, and what
// the INSERT would return is computed here (openedAs) instead of read
// back. Reading back a fan-out's 10,000 rows a chunk was a tenth of its
// time in lull and a round trip the server waited through. The rows go
// in with COPY where q can (a transaction or a pool can; a pipeline
// cannot), in the order the upsert locks rows in: PostgreSQL writes them
// for about four fifths of what the same INSERT … SELECT FROM unnest
// costs, on the critical path of a fan-out.
func insertReserved(ctx context.Context, q Querier, joins []BatchJoin, counts []int, now time.Time) ([]JoinedBatch, error) {
	if len(joins) == 0 {
		return nil, nil
	}
	out := make([]JoinedBatch, len(joins))
	for i, j := range joins {
		out[i] = j.openedAs(itemsOf(counts, i), now)
	}
	var opened int64
	var err error
	if c, ok := q.(copier); ok {
		opened, err = c.CopyFrom(ctx, pgx.Identifier{"batches"}, reservedColumns, reservedRows(joins, out, now))
	} else {
		var tag pgconn.CommandTag
		tag, err = q.Exec(ctx, `
			INSERT INTO batches (`+strings.Join(reservedColumns, ", ")+`)
			SELECT id, `+newBatchRows, batchArgs(joins, counts, now, true)...)
		opened = tag.RowsAffected()
	}
	if err != nil {
		return nil, fmt.Errorf("join batches: %w", err)
	}
	if opened != int64(len(joins)) {
		return nil, fmt.Errorf("join batches: %d of %d batches opened", opened, len(joins))
	}
	return out, nil
}

// copier is what a pgx transaction and pool can do that a pipeline
// cannot.
type copier interface {
	CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, rows pgx.CopyFromSource) (int64, error)
}

// reservedColumns are the columns insertReserved writes, in the order of
// reservedRows' values.
var reservedColumns = []string{"id", "recipient_id", "batch_key", "mode", "type_key", "window_ms", "max_wait_ms",
	"closes_at", "wake_at", "opened_at", "last_event_at", "item_count"}

// reservedRows are the rows of the batches joins open, as out holds them,
// ordered as newBatchRows orders them: by recipient and key in byte
// order, then as given.
func reservedRows(joins []BatchJoin, out []JoinedBatch, now time.Time) pgx.CopyFromSource {
	order := make([]int, len(joins))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		return cmp.Or(strings.Compare(joins[a].RecipientID, joins[b].RecipientID), strings.Compare(joins[a].BatchKey, joins[b].BatchKey))
	})
	// One row is filled in turn, as in copyNotifications.
	row := make([]any, len(reservedColumns))
	opened := any(now)
	return pgx.CopyFromSlice(len(order), func(k int) ([]any, error) {
		i := order[k]
		b := out[i]
		var typ *string
		if joins[i].TypeKey != "" {
			typ = &joins[i].TypeKey
		}
		closes := any(b.ClosesAt)
		row[0], row[1], row[2], row[3], row[4], row[5], row[6] = b.ID, b.RecipientID, b.BatchKey, b.Mode, typ, b.Window.Milliseconds(), b.MaxWait.Milliseconds()
		row[7], row[8], row[9], row[10], row[11] = closes, closes, opened, opened, int32(b.ItemCount)
		return row, nil
	})
}

// reservedInOrder says whether every join holds a Reserved id and the
// ids ascend in the order of the joins, as MarkFresh gives them.
// JoinBatches hands the rows of one recipient and key to its joins in id
// order (byKey), which the sequence makes their order; ids given out of
// order would put a notification in another join's batch, so those joins
// take ids from the sequence instead.
func reservedInOrder(joins []BatchJoin) bool {
	for i, j := range joins {
		if j.Reserved == 0 || i > 0 && j.Reserved <= joins[i-1].Reserved {
			return false
		}
	}
	return true
}

// newBatchRows selects the rows insertBatches and insertReserved write,
// from the arguments of batchArgs: the columns up to item_count, in the
// order rows are locked in. A new batch that its joins fill closes at
// once. The reserved ids are v.id, NULL when none were given.
const newBatchRows = `rid, key, mode, type_key, window_ms, max_wait_ms, ` + newClose + `, ` + newClose + `,
		       $8, $8, items
		FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[], $6::bigint[], $7::timestamptz[],
		            $9::int[], $10::int[], $11::bigint[]) WITH ORDINALITY
		     AS v(rid, key, mode, type_key, window_ms, max_wait_ms, closes_at, items, max_items, id, n)
		ORDER BY rid COLLATE "C", key COLLATE "C", n`

// newClose is a new batch's close time, and its wake time: at once when
// its joins fill it.
const newClose = `CASE WHEN mode = 'cooldown' AND max_items > 0 AND items >= max_items THEN $8 ELSE closes_at END`

// batchArgs are the arguments of newBatchRows for joins, with counts[i]
// notifications for joins[i] (one when counts is nil), and their Reserved
// ids when reserved.
func batchArgs(joins []BatchJoin, counts []int, now time.Time, reserved bool) []any {
	n := len(joins)
	rids, keys, modes, types := make([]string, n), make([]string, n), make([]string, n), make([]*string, n)
	windows, waits, closes := make([]int64, n), make([]int64, n), make([]time.Time, n)
	items, maxItems := make([]int32, n), make([]int32, n)
	ids := []int64{} // unnest pads an empty array with NULLs
	for i, j := range joins {
		rids[i], keys[i], modes[i] = j.RecipientID, j.BatchKey, j.Mode
		if j.TypeKey != "" {
			types[i] = &joins[i].TypeKey
		}
		windows[i], waits[i], closes[i] = j.Window.Milliseconds(), j.MaxWait.Milliseconds(), j.ClosesAt
		items[i], maxItems[i] = int32(itemsOf(counts, i)), int32(j.MaxItems)
		if reserved {
			ids = append(ids, j.Reserved)
		}
	}
	return []any{rids, keys, modes, types, windows, waits, closes, now, items, maxItems, ids}
}

func itemsOf(counts []int, i int) int {
	if counts == nil {
		return 1
	}
	return counts[i]
}

// openedAs is the row newBatchRows writes for j with items notifications,
// as the database returns it: times to the microsecond in the local zone,
// durations to the millisecond.
func (j BatchJoin) openedAs(items int, now time.Time) JoinedBatch {
	stored := func(t time.Time) time.Time { return t.Truncate(time.Microsecond).Local() }
	closes := j.ClosesAt
	if j.Mode == "cooldown" && j.MaxItems > 0 && items >= j.MaxItems {
		closes = now
	}
	return JoinedBatch{ID: j.Reserved, RecipientID: j.RecipientID, BatchKey: j.BatchKey, Mode: j.Mode,
		OpenedAt: stored(now), LastEventAt: stored(now), ClosesAt: stored(closes),
		Window: j.Window.Truncate(time.Millisecond), MaxWait: j.MaxWait.Truncate(time.Millisecond),
		ItemCount: items, Inserted: true}
}

// sealBatches seals the open batches the joins found due or full, which
// the caller's upsert has locked.
func sealBatches(ctx context.Context, q Querier, joins []BatchJoin) error {
	rids, pairs, keys := openBatchArgs(joins)
	_, err := q.Exec(ctx, sealQuery, listPlan, rids, pairs, keys)
	if err != nil {
		return fmt.Errorf("seal batches: %w", err)
	}
	return nil
}

// openBatchOf matches b, an open batch that joins can join (the rows of
// batches_one_open), whose recipient and key are one of the pairs that
// openBatchArgs gives as $1, $2 and $3. Open batches are what a fan-out
// has just written by the hundred thousand, before autovacuum counts
// them, so PostgreSQL may take them for one row. Joined to the list, they
// were then the outer side of a nested loop that read the whole list for
// each: 65 s to probe 10,000 recipients who each held an open batch
// under another key. Without a join, and planned for the lists given
// (listPlan), every plan is linear: the index looks up each recipient
// and key, or one pass over the open batches tests each against the
// lists, which PostgreSQL hashes.
const openBatchOf = `b.recipient_id = ANY($1::text[]) AND b.batch_key = ANY($3::text[])
		  AND replace(replace(b.recipient_id, '\', '\\'), ':', '\:') || ':' || b.batch_key = ANY($2::text[])
		  AND b.state = 'open' AND b.mode <> 'immediate' AND NOT b.sealed`

const (
	markFreshQuery = `SELECT nextval('batches_id_seq') FROM generate_series(1, $4)
		WHERE NOT EXISTS (SELECT 1 FROM batches b WHERE ` + openBatchOf + `)`
	sealQuery = `UPDATE batches b SET sealed = true WHERE ` + openBatchOf
)

// listPlan runs a statement that tests many rows against a long list
// planned for the list it is given, each time (an unnamed statement): a
// plan that pgx's statement cache lets PostgreSQL make once for any list
// cannot hash it, and tested each row against every entry in turn (11 s
// for the probe above, 10 s for LastActivity, once statistics lagged).
// It only works on a connection or transaction: a pipeline (PipelineTx)
// would take it for an argument. A server set to plan_cache_mode =
// force_generic_plan defeats it.
const listPlan = pgx.QueryExecModeDescribeExec

// openBatchArgs are the recipients of joins, each join's recipient and
// key as one string (the recipient with its ':' and '\' escaped, ':',
// the key: no two pairs read alike, in any encoding), and the keys once
// each.
func openBatchArgs(joins []BatchJoin) (rids, pairs, keys []string) {
	rids, pairs = make([]string, len(joins)), make([]string, len(joins))
	escape := strings.NewReplacer(`\`, `\\`, `:`, `\:`)
	keys, seen := []string{}, map[string]bool{}
	for i, j := range joins {
		rids[i], pairs[i] = j.RecipientID, escape.Replace(j.RecipientID)+":"+j.BatchKey
		if !seen[j.BatchKey] {
			seen[j.BatchKey] = true
			keys = append(keys, j.BatchKey)
		}
	}
	return rids, pairs, keys
}

// SetClosesAt moves batches' close times, and their wake times with them:
// the caller gives each a flush or a wake at its new time. One statement.
func SetClosesAt(ctx context.Context, q Querier, ids []int64, closes []time.Time) error {
	if len(ids) == 0 {
		return nil
	}
	_, err := q.Exec(ctx, `
		UPDATE batches b SET closes_at = v.closes_at, wake_at = v.closes_at
		FROM unnest($1::bigint[], $2::timestamptz[]) AS v(id, closes_at)
		WHERE b.id = v.id`, ids, closes)
	if err != nil {
		return fmt.Errorf("set close times: %w", err)
	}
	return nil
}

// EventRef is what each notification of an event repeats from it.
type EventRef struct {
	ID         int64
	Created    time.Time
	TypeKey    string
	OccurredAt time.Time
}

// NewNotifications are the notifications of one or more events: row i
// puts Events[Of[i]]'s notification for Recipients[i] into Batches[i]. Of
// may be nil when there is one event, which spares a fan-out to 100,000
// recipients a list of 100,000 zeros.
type NewNotifications struct {
	Events     []EventRef
	Of         []int32
	Recipients []string
	Batches    []int64
}

// CopyRows is the number of rows from which InsertNotifications copies
// them in: COPY writes a fan-out's rows for less than INSERT … SELECT
// FROM unnest, but costs pgx a round trip of its own to learn the
// columns' types, more than a small event's whole statement.
const CopyRows = 1000

// InsertNotifications stores notifications, set-based: with COPY when
// there are CopyRows or more and q can (a pipeline cannot).
func InsertNotifications(ctx context.Context, q Querier, ns NewNotifications) error {
	if len(ns.Recipients) == 0 {
		return nil
	}
	if c, ok := q.(copier); ok && len(ns.Recipients) >= CopyRows {
		return copyNotifications(ctx, c, ns)
	}
	n := len(ns.Events)
	ids, created, types, occurred := make([]int64, n), make([]time.Time, n), make([]string, n), make([]time.Time, n)
	for i, e := range ns.Events {
		ids[i], created[i], types[i], occurred[i] = e.ID, e.Created, e.TypeKey, e.OccurredAt
	}
	// unnest pads a shorter array with NULLs: a nil Of reads as event 0.
	_, err := q.Exec(ctx, `
		INSERT INTO notifications (event_id, created_at, type_key, occurred_at, recipient_id, batch_id)
		SELECT e.id, e.created, e.type_key, e.occurred, v.rid, v.bid
		FROM unnest($1::text[], $2::bigint[], $3::int[]) AS v(rid, bid, ev)
		JOIN unnest($4::bigint[], $5::timestamptz[], $6::text[], $7::timestamptz[]) WITH ORDINALITY
		     AS e(id, created, type_key, occurred, n) ON e.n = coalesce(v.ev, 0) + 1`,
		ns.Recipients, ns.Batches, ns.Of, ids, created, types, occurred)
	if err != nil {
		return fmt.Errorf("insert notifications: %w", err)
	}
	return nil
}

// copyNotifications copies ns in. Each event's fields are boxed once, and
// one row is filled in turn (CopyFrom encodes a row before it asks for
// the next): a fan-out's 100,000 rows otherwise allocate 17 MB.
func copyNotifications(ctx context.Context, c copier, ns NewNotifications) error {
	events := make([][4]any, len(ns.Events))
	for i, e := range ns.Events {
		events[i] = [4]any{e.ID, e.Created, e.TypeKey, e.OccurredAt}
	}
	row := make([]any, 6)
	_, err := c.CopyFrom(ctx, pgx.Identifier{"notifications"},
		[]string{"event_id", "created_at", "type_key", "occurred_at", "recipient_id", "batch_id"},
		pgx.CopyFromSlice(len(ns.Recipients), func(i int) ([]any, error) {
			e := events[0]
			if ns.Of != nil {
				e = events[ns.Of[i]]
			}
			copy(row, e[:])
			row[4], row[5] = ns.Recipients[i], ns.Batches[i]
			return row, nil
		}))
	if err != nil {
		return fmt.Errorf("insert notifications: %w", err)
	}
	return nil
}

// FlushContent is what a flush reads about its batch.
type FlushContent struct {
	Batch *Batch
	// Items leaves retracted notifications out, in arrival order.
	Items []Item
	// Types holds the types of the items.
	Types map[string]*Type
	// Settings holds the recipient's settings for each item type; it is
	// empty when the recipient is gone.
	Settings map[string]RecipientSettings
	// Suppression is the recipient's address's entry on the suppression
	// list, set by AttachSuppressions; nil when the address is not on it.
	Suppression *Suppression
	// ThreadMuted says the recipient unsubscribed from the batch's key.
	ThreadMuted bool
	// ThreadMutedItems counts, by type, the items taken out of the batch
	// because their thread is muted (a digest's), for the skip log.
	ThreadMutedItems map[string]int
	// Logged counts, by type and reason, the items an earlier attempt to
	// send the batch left out and logged (see FlushLogged).
	Logged map[string]map[string]int
}

// The reads of a flush, each about the batches in $1. Types and
// preferences are selected through subqueries rather than from the items
// read before, so that all four statements go to the server together.
// Preferences are read for every item type of any batch in $1; each
// batch keeps those of its own types.
const (
	readBatchesQuery = `SELECT ` + batchColumns + ` FROM batches WHERE id = ANY($1) ORDER BY id`
	lockBatchesQuery = readBatchesQuery + ` FOR UPDATE`
	// lockFreeBatchesQuery leaves held digests alone (see LockFreeForFlush).
	lockFreeBatchesQuery = `SELECT ` + batchColumns + ` FROM batches
		WHERE id = ANY($1) AND NOT ` + heldDigest + `
		ORDER BY id FOR UPDATE SKIP LOCKED`
	// flushItemsQuery reads the data of only the items an email can show:
	// per batch and type, the first or latest display_limit of those not
	// left out as read (mailtemplates picks them the same way). A digest
	// of 1,000 items whose events carry 64 KiB of data each then reads
	// 640 KiB of data for its ten lines instead of 64 MB. Every item still
	// counts and names its actor, and its event's batch key (its
	// conversation, which a digest offers to mute) comes from the event
	// row already joined, at no extra cost.
	flushItemsQuery = `
		SELECT n.batch_id, n.id, n.event_id, n.type_key, e.actor, e.object,
		       CASE WHEN row_number() OVER (
		                PARTITION BY n.batch_id, n.type_key, n.read_at IS NOT NULL AND t.skip_read
		                ORDER BY CASE WHEN t.item_order = 'first' THEN n.id ELSE -n.id END
		            ) <= greatest(t.display_limit, 1) THEN e.data END,
		       n.occurred_at, n.retracted_at, n.read_at, e.batch_key
		FROM notifications n
		JOIN events e ON e.id = n.event_id AND e.created_at = n.created_at
		LEFT JOIN notification_types t ON t.key = n.type_key
		WHERE n.batch_id = ANY($1) AND n.retracted_at IS NULL
		ORDER BY n.batch_id, n.id`
	itemTypesQuery  = `SELECT type_key FROM notifications WHERE batch_id = ANY($1) AND retracted_at IS NULL`
	flushTypesQuery = `SELECT ` + typeColumns + ` FROM notification_types WHERE key IN (` + itemTypesQuery + `)`
	flushPrefsQuery = `SELECT ` + settingsColumns + `
		FROM recipients r
		LEFT JOIN type_preferences tp ON tp.recipient_id = r.id AND tp.type_key IN (` + itemTypesQuery + `)
		WHERE r.id IN (SELECT recipient_id FROM batches WHERE id = ANY($1))`
)

// LockForFlush locks batch id, waiting for whoever holds it, and reads
// under that lock everything its flush needs, in one round trip.
func LockForFlush(ctx context.Context, tx pgx.Tx, id int64) (*FlushContent, error) {
	return readOneForFlush(ctx, tx, id, lockBatchesQuery)
}

// ReadForFlush reads what LockForFlush reads, without a lock: a preview
// shows what a flush would do without holding one up or waiting for one.
func ReadForFlush(ctx context.Context, q BatchSender, id int64) (*FlushContent, error) {
	return readOneForFlush(ctx, q, id, readBatchesQuery)
}

// BatchSender is what a pgx pool and a transaction share for sending
// statements together in one round trip.
type BatchSender interface {
	SendBatch(context.Context, *pgx.Batch) pgx.BatchResults
}

func readOneForFlush(ctx context.Context, q BatchSender, id int64, batchQuery string) (*FlushContent, error) {
	cs, err := lockForFlush(ctx, q, []int64{id}, batchQuery)
	if err != nil {
		return nil, err
	}
	if cs[id] == nil {
		return nil, fmt.Errorf("batch %d: %w", id, ErrNotFound)
	}
	return cs[id], nil
}

// LockFreeForFlush is LockForFlush for many batches at once: a flush wave
// runs thousands of flushes together, and one round trip of four
// statements for a hundred batches costs the server far less than a
// hundred. It skips batches another transaction holds (an ingest adding an
// item, a flush of their own), so it never waits and cannot deadlock
// against anyone locking batches in another order; the result has no
// entry for a batch skipped or missing. It skips held digests too: a set
// holding a recipient's held digest while it waits for budget locks
// deadlocks with a set that holds one of them and folds a batch into
// that digest. Their flushes go alone, which take no budget lock.
func LockFreeForFlush(ctx context.Context, tx pgx.Tx, ids []int64) (map[int64]*FlushContent, error) {
	return lockForFlush(ctx, tx, ids, lockFreeBatchesQuery)
}

func lockForFlush(ctx context.Context, tx BatchSender, ids []int64, lockQuery string) (map[int64]*FlushContent, error) {
	var q pgx.Batch
	q.Queue(lockQuery, ids)
	q.Queue(flushItemsQuery, ids)
	q.Queue(flushTypesQuery, ids)
	q.Queue(flushPrefsQuery, ids)
	q.Queue(mutedBatchesQuery, ids)
	res := tx.SendBatch(ctx, &q)
	defer res.Close()

	out := make(map[int64]*FlushContent, len(ids))
	rows, err := res.Query()
	batches, err := collectBatches(rows, err)
	if err != nil {
		return nil, fmt.Errorf("lock batches: %w", err)
	}
	for _, b := range batches {
		out[b.ID] = &FlushContent{Batch: b, Types: map[string]*Type{}, Settings: map[string]RecipientSettings{}}
	}
	if err := readFlushItems(res, out); err != nil {
		return nil, fmt.Errorf("batch items: %w", err)
	}
	rows, err = res.Query()
	types, err := collectTypes(rows, err)
	if err != nil {
		return nil, fmt.Errorf("batch types: %w", err)
	}
	byKey := make(map[string]*Type, len(types))
	for _, t := range types {
		byKey[t.Key] = t
	}
	for _, c := range out {
		for _, it := range c.Items {
			if t := byKey[it.TypeKey]; t != nil {
				c.Types[it.TypeKey] = t
			}
		}
	}
	if err := readFlushSettings(res, out); err != nil {
		return nil, fmt.Errorf("batch recipients: %w", err)
	}
	if err := readMutedBatches(res, out); err != nil {
		return nil, fmt.Errorf("muted threads: %w", err)
	}
	return out, res.Close()
}

func collectBatches(rows pgx.Rows, err error) ([]*Batch, error) {
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (*Batch, error) { return scanBatch(row) })
}

// readFlushItems hands each locked batch its items.
func readFlushItems(res pgx.BatchResults, out map[int64]*FlushContent) error {
	rows, err := res.Query()
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var batchID int64
		var it Item
		if err := rows.Scan(itemFields(&batchID, &it)...); err != nil {
			return err
		}
		if c := out[batchID]; c != nil {
			c.Items = append(c.Items, it)
		}
	}
	return rows.Err()
}

// readFlushSettings hands each locked batch its recipient's settings for
// each type among its items.
func readFlushSettings(res pgx.BatchResults, out map[int64]*FlushContent) error {
	type settings struct {
		rec   Recipient
		prefs map[string]*TypePreference
	}
	byRecipient := map[string]*settings{}
	rows, err := res.Query()
	err = scanSettings(rows, err, func(s RecipientSettings) {
		r := byRecipient[s.ID]
		if r == nil {
			r = &settings{rec: s.Recipient, prefs: map[string]*TypePreference{}}
			byRecipient[s.ID] = r
		}
		if s.Pref != nil {
			r.prefs[s.Pref.TypeKey] = s.Pref
		}
	})
	if err != nil {
		return err
	}
	for _, c := range out {
		r := byRecipient[c.Batch.RecipientID]
		if r == nil {
			continue
		}
		for key := range c.Types {
			c.Settings[key] = RecipientSettings{Recipient: r.rec, Pref: r.prefs[key]}
		}
	}
	return nil
}
