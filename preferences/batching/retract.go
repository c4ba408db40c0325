package batching

import (
	"context"
	"fmt"
	"sort"

	"github.com/jackc/pgx/v5"

	"github.com/lull-dev/lull/db"
)

// RetractResult says what a retraction removed.
type RetractResult struct {
	EventID  int64   `json:"id"`
	Removed  int     `json:"removed"`
	Canceled []int64 `json:"canceled_batches"`
}

// EventRef names the event to retract: by its id, or by the idempotency
// key it was posted with. Exactly one is set, and neither is ever taken
// for the other: a key "42" that was never stored does not name event 42.
type EventRef struct {
	ID  int64
	Key string
}

// find resolves the reference among apiKeyID's own events.
func (ref EventRef) find(ctx context.Context, tx pgx.Tx, apiKeyID int64) (int64, error) {
	if ref.Key != "" {
		return db.EventIDByKey(ctx, tx, apiKeyID, ref.Key)
	}
	return ref.ID, db.CheckEventOwner(ctx, tx, apiKeyID, ref.ID)
}

// Retract takes an event's notifications out of every batch that has not
// flushed, and records in the skip log how many left each; a batch left
// empty is canceled rather than sent.
func (e *Engine) Retract(ctx context.Context, apiKeyID int64, ref EventRef) (*RetractResult, error) {
	res := &RetractResult{Canceled: []int64{}}
	err := e.DB.InTx(ctx, func(tx pgx.Tx) error {
		id, err := ref.find(ctx, tx, apiKeyID)
		if err != nil {
			return err
		}
		res.EventID = id
		now := e.now()
		marked, removals, err := db.RetractEvent(ctx, tx, id, now)
		if err != nil {
			return err
		}
		res.Removed = marked
		var skips []db.Skip
		for i, r := range removals {
			if r.Removed > 0 {
				skips = append(skips, db.Skip{RecipientID: r.RecipientID, TypeKey: r.TypeKey, BatchID: &removals[i].BatchID, EventID: &id, Items: r.Removed, Reason: db.SkipRetracted})
			}
			if r.Left > 0 {
				continue
			}
			if err := db.SetBatchState(ctx, tx, r.BatchID, db.StateCanceled, db.SkipRetracted, 0, now); err != nil {
				return err
			}
			res.Canceled = append(res.Canceled, r.BatchID)
		}
		sort.Slice(res.Canceled, func(i, j int) bool { return res.Canceled[i] < res.Canceled[j] })
		return db.InsertSkips(ctx, tx, skips)
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// ErrNotOpen is returned by operator actions on a batch that already left
// the open state.
var ErrNotOpen = fmt.Errorf("batch is not open")

// FlushNow makes an open batch due and schedules its flush at once.
func (e *Engine) FlushNow(ctx context.Context, batchID int64) error {
	return e.DB.InTx(ctx, func(tx pgx.Tx) error {
		b, err := db.LockBatch(ctx, tx, batchID)
		if err != nil {
			return err
		}
		if b.State != db.StateOpen {
			return fmt.Errorf("flush batch %d (%s): %w", batchID, b.State, ErrNotOpen)
		}
		now := e.now()
		if err := db.MakeDue(ctx, tx, batchID, now); err != nil {
			return err
		}
		return e.Scheduler.ScheduleFlushes(ctx, tx, []Flush{{BatchID: batchID, At: now}})
	})
}

// Cancel cancels an open batch for an operator; its notifications are not
// sent and the skip log says who decided.
func (e *Engine) Cancel(ctx context.Context, batchID int64, reason string) error {
	if reason == "" {
		reason = db.SkipOperator
	}
	return e.DB.InTx(ctx, func(tx pgx.Tx) error {
		b, err := db.LockBatch(ctx, tx, batchID)
		if err != nil {
			return err
		}
		if b.State != db.StateOpen {
			return fmt.Errorf("cancel batch %d (%s): %w", batchID, b.State, ErrNotOpen)
		}
		if err := db.SetBatchState(ctx, tx, batchID, db.StateCanceled, reason, 0, e.now()); err != nil {
			return err
		}
		return db.InsertSkips(ctx, tx, []db.Skip{{RecipientID: b.RecipientID, TypeKey: deref(b.TypeKey), BatchID: &batchID, Items: b.ItemCount, Reason: reason}})
	})
}

// ErrNotFailed is returned when retrying a batch whose delivery did not fail.
var ErrNotFailed = fmt.Errorf("batch has no failed delivery")

// Retry sends a failed batch again, for an operator who fixed the cause
// (a full mailbox, a mail server setting).
func (e *Engine) Retry(ctx context.Context, batchID int64) error {
	return e.DB.InTx(ctx, func(tx pgx.Tx) error {
		b, err := db.LockBatch(ctx, tx, batchID)
		if err != nil {
			return err
		}
		if b.State != db.StateFailed {
			return fmt.Errorf("retry batch %d (%s): %w", batchID, b.State, ErrNotFailed)
		}
		now := e.now()
		if err := db.ReopenForRetry(ctx, tx, batchID, now); err != nil {
			return err
		}
		return e.Scheduler.ScheduleFlushes(ctx, tx, []Flush{{BatchID: batchID, At: now}})
	})
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
