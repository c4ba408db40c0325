package batching

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lull-dev/lull/db"
)

// ReadResult says what marking notifications read did.
type ReadResult struct {
	Read     int     `json:"read"`
	Canceled []int64 `json:"canceled_batches"`
}

// MarkRead marks a recipient's notifications read: ids, or when ids is
// empty all those that occurred before before (nil: all up to now). Those
// still waiting in an open batch leave it, and a batch left with nothing
// unread is canceled; the skip log says how many left each batch as read
// in the app.
func (e *Engine) MarkRead(ctx context.Context, recipientID string, ids []int64, before *time.Time) (*ReadResult, error) {
	now := e.now()
	// A second past now takes in notifications stamped this very moment,
	// and those from a host whose clock runs a little ahead.
	upTo := now.Add(time.Second)
	if before != nil {
		upTo = *before
	}
	res := &ReadResult{Canceled: []int64{}}
	err := e.DB.InTx(ctx, func(tx pgx.Tx) error {
		read, removals, err := db.MarkRead(ctx, tx, recipientID, ids, upTo, now)
		if err != nil {
			return err
		}
		// Every notification that leaves a batch is in the skip log, with
		// how many left, whether or not the batch is then canceled.
		skips := make([]db.Skip, len(removals))
		for i, rm := range removals {
			skips[i] = db.Skip{RecipientID: recipientID, TypeKey: rm.TypeKey, BatchID: &removals[i].BatchID, Items: rm.Removed, Reason: db.SkipRead}
			if rm.Left == 0 {
				res.Canceled = append(res.Canceled, rm.BatchID)
			}
		}
		if err := db.InsertSkips(ctx, tx, skips); err != nil {
			return err
		}
		res.Read = read
		return db.NotifyFeed(ctx, tx, []string{recipientID})
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}
