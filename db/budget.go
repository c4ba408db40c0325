package db

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// SkipHeldByBudget starts the skip log's reason for notifications the
// daily email budget held back: "held by budget: folded into batch 42".
const SkipHeldByBudget = "held by budget"

// HeldReason is the reason logged for a batch folded into batch held.
func HeldReason(held int64) string {
	return fmt.Sprintf("%s: folded into batch %d", SkipHeldByBudget, held)
}

// LockBudgets takes, until the transaction ends, the budget lock of each
// recipient: whoever holds it is the only one counting and spending that
// recipient's emails of the day, so two flushes at once cannot both take
// the last one. The locks are advisory, not the recipient rows, which an
// ingest locks before its batches while a flush holds its batch first.
// They are taken in the order of the ids, sorted here, so two flushes of
// several recipients cannot wait on each other in a circle; a function
// scan of unnest returns, and so locks, in array order.
func LockBudgets(ctx context.Context, q Querier, recipientIDs []string) error {
	ids := slices.Compact(slices.Sorted(slices.Values(recipientIDs)))
	if len(ids) == 0 {
		return nil
	}
	_, err := q.Exec(ctx, `
		SELECT pg_advisory_xact_lock(hashtextextended('lull budget ' || id, 0))
		FROM unnest($1::text[]) AS id`, ids)
	if err != nil {
		return fmt.Errorf("lock email budgets: %w", err)
	}
	return nil
}

// TryLockBudget takes the recipient's budget lock, as LockBudgets does, if
// no other transaction holds it, and reports whether it did. A flush that
// holds budget locks already and wants one more, out of LockBudgets'
// order, must not wait for it.
func TryLockBudget(ctx context.Context, q Querier, recipientID string) (bool, error) {
	var ok bool
	err := q.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock(hashtextextended('lull budget ' || $1, 0))`, recipientID).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("lock email budget: %w", err)
	}
	return ok, nil
}

// BudgetSpent counts the emails counted against the recipient's local day
// (a date): those going out or sent, and the held digest due that day,
// which is spoken for before it goes. Canceled batches sent nothing and
// do not count; failed ones are counted (the recipient may have got them).
// Batch self is left out: a flush tried again after its email failed to
// compose finds itself counted already.
func BudgetSpent(ctx context.Context, q Querier, recipientID string, day time.Time, self int64) (int, error) {
	var n int
	err := q.QueryRow(ctx, `
		SELECT count(*) FROM batches
		WHERE recipient_id = $1 AND budget_day = $2 AND state <> 'canceled' AND id <> $3`, recipientID, day, self).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("email budget of %s: %w", recipientID, err)
	}
	return n, nil
}

// SpendBudget counts batch id against its recipient's local day.
func SpendBudget(ctx context.Context, q Querier, id int64, day time.Time) error {
	if _, err := q.Exec(ctx, `UPDATE batches SET budget_day = $2 WHERE id = $1`, id, day); err != nil {
		return fmt.Errorf("spend email budget on batch %d: %w", id, err)
	}
	return nil
}

// Fold is an over-budget batch's notifications moved into the held digest.
type Fold struct {
	// Held is the held batch; Opened says this fold opened it, so it needs
	// a flush job.
	Held   int64
	Opened bool
	// Moved counts the notifications moved, by type.
	Moved map[string]int
	// Left is how many notifications stayed (of required types).
	Left int
}

// FoldIntoHeld moves the notifications of the given types out of batch b
// into the recipient's open held digest (key heldKey), or a new one that
// closes at closes and counts against day. Notifications read in the app
// that their type leaves out of emails stay: they left the count, and
// were logged, when read. A batch left with nothing is canceled with the
// reason and where it went; otherwise it keeps what stayed, to be sent.
func FoldIntoHeld(ctx context.Context, q Querier, b *Batch, types []string, heldKey string, closes, day, now time.Time) (Fold, error) {
	f := Fold{Moved: map[string]int{}}
	err := q.QueryRow(ctx, `
		INSERT INTO batches AS b (recipient_id, batch_key, mode, closes_at, wake_at, opened_at, last_event_at, item_count, budget_day)
		VALUES ($1, $2, 'daily', $3, $3, $4, $4, 0, $5)
		ON CONFLICT (recipient_id, batch_key) WHERE `+joinable+`
		DO UPDATE SET last_event_at = greatest(b.last_event_at, EXCLUDED.last_event_at)
		RETURNING id, xmax = 0`, b.RecipientID, heldKey, closes, now, day).Scan(&f.Held, &f.Opened)
	if err != nil {
		return f, fmt.Errorf("open held digest of %s: %w", b.RecipientID, err)
	}
	rows, err := q.Query(ctx, `
		WITH moved AS (
		    UPDATE notifications n SET batch_id = $2
		    WHERE n.batch_id = $1 AND n.retracted_at IS NULL AND n.type_key = ANY($3)
		      AND (n.read_at IS NULL OR NOT EXISTS (
		          SELECT 1 FROM notification_types t WHERE t.key = n.type_key AND t.skip_read))
		    RETURNING n.type_key)
		SELECT type_key, count(*) FROM moved GROUP BY type_key`, b.ID, f.Held, types)
	if err != nil {
		return f, fmt.Errorf("fold batch %d: %w", b.ID, err)
	}
	total := 0
	for rows.Next() {
		var key string
		var n int
		if err := rows.Scan(&key, &n); err != nil {
			rows.Close()
			return f, fmt.Errorf("fold batch %d: %w", b.ID, err)
		}
		f.Moved[key], total = n, total+n
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return f, fmt.Errorf("fold batch %d: %w", b.ID, err)
	}
	f.Left = max(b.ItemCount-total, 0)
	if total == 0 && f.Left > 0 {
		// Nothing to hold (what counts was all read in the app): a held
		// digest opened for nothing would hold a place in tomorrow's
		// budget and, canceled empty, log an item it never held.
		if f.Opened {
			if _, err := q.Exec(ctx, `DELETE FROM batches WHERE id = $1`, f.Held); err != nil {
				return f, fmt.Errorf("fold batch %d: %w", b.ID, err)
			}
		}
		return Fold{Moved: f.Moved, Left: f.Left}, nil
	}
	_, err = q.Exec(ctx, `
		WITH held AS (UPDATE batches SET item_count = item_count + $3 WHERE id = $2)
		UPDATE batches SET item_count = $4, folded_into = $2,
		    state = CASE WHEN $4 = 0 THEN 'canceled' ELSE state END,
		    reason = CASE WHEN $4 = 0 THEN $5 ELSE reason END,
		    processed_at = CASE WHEN $4 = 0 THEN $6 ELSE processed_at END
		WHERE id = $1`, b.ID, f.Held, total, f.Left, HeldReason(f.Held), now)
	if err != nil {
		return f, fmt.Errorf("fold batch %d: %w", b.ID, err)
	}
	return f, nil
}

// FoldedFrom lists, oldest first, up to limit batches whose notifications
// were folded into batch id (a held digest).
func FoldedFrom(ctx context.Context, q Querier, id int64, limit int) ([]int64, error) {
	rows, err := q.Query(ctx, `SELECT id FROM batches WHERE folded_into = $1 ORDER BY id LIMIT $2`, id, limit)
	if err != nil {
		return nil, fmt.Errorf("batches folded into %d: %w", id, err)
	}
	return pgx.CollectRows(rows, pgx.RowTo[int64])
}
