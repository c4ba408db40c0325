package jobs

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/preferences"
	"github.com/lull-dev/lull/preferences/batching"
)

// spendBudget applies the recipient's daily email budget to a due batch,
// under their budget lock: within the budget the batch is counted against
// the recipient's local day and goes on; over it, its notifications fold
// into the held digest, which goes out at the next day's digest time, and
// the skip log says where each went. Required types are neither counted
// nor held: a digest holding some goes on with only those. It returns the
// content left to send, nil when nothing is.
func (w *FlushWorker) spendBudget(ctx context.Context, tx pgx.Tx, fc *db.FlushContent, now time.Time) (*db.FlushContent, error) {
	bud := batching.BudgetOf(fc, w.DailyBudget)
	if bud.Limit == 0 {
		return fc, nil
	}
	b := fc.Batch
	if err := db.LockBudgets(ctx, tx, []string{b.RecipientID}); err != nil {
		return nil, err
	}
	sched := batching.Schedule(bud.Recipient)
	day := preferences.BudgetDay(now, sched)
	spent, err := db.BudgetSpent(ctx, tx, b.RecipientID, day, b.ID)
	if err != nil {
		return nil, err
	}
	if spent < bud.Limit {
		return fc, db.SpendBudget(ctx, tx, b.ID, day)
	}
	closes := preferences.HeldCloses(now, sched)
	f, err := db.FoldIntoHeld(ctx, tx, b, bud.Counted, preferences.HeldKey, closes, preferences.BudgetDay(closes, sched), now)
	if err != nil {
		return nil, err
	}
	var skips []db.Skip
	for _, key := range slices.Sorted(maps.Keys(f.Moved)) {
		skips = append(skips, db.Skip{RecipientID: b.RecipientID, TypeKey: key, BatchID: &b.ID, Items: f.Moved[key], Reason: db.HeldReason(f.Held)})
	}
	if err := db.InsertSkips(ctx, tx, skips); err != nil {
		return nil, err
	}
	if f.Opened && w.Scheduler != nil {
		// Without a scheduler (a test working jobs by hand) the sweep, or
		// the test, finds the held digest when it is due.
		if err := w.Scheduler.ScheduleFlushes(ctx, tx, []batching.Flush{{BatchID: f.Held, At: closes}}); err != nil {
			return nil, err
		}
	}
	if f.Left == 0 {
		return nil, nil
	}
	return batching.Without(fc, bud.Counted, f.Left), nil
}

// lockBudgets takes, in one order, the budget locks of every recipient of
// a set of batches whose flush may count against a budget, so that two
// sets deciding batches of the same recipients in different orders do not
// wait on each other in a circle.
func (w *FlushWorker) lockBudgets(ctx context.Context, tx pgx.Tx, cs map[int64]*db.FlushContent) error {
	var ids []string
	for _, fc := range cs {
		if fc.Batch.State == db.StateOpen && batching.BudgetOf(fc, w.DailyBudget).Limit > 0 {
			ids = append(ids, fc.Batch.RecipientID)
		}
	}
	return db.LockBudgets(ctx, tx, ids)
}

// tryBudget takes the budget lock of a batch taken along into a shared
// email if its flush counts against a budget, without waiting: the flush
// holds other recipients' budget locks already, and another flush holding
// this one may be waiting for one of those. It reports false when the
// lock is busy; the batch is then left to its own job.
func (w *FlushWorker) tryBudget(ctx context.Context, tx pgx.Tx, fc *db.FlushContent) (bool, error) {
	if fc.Batch.State != db.StateOpen || batching.BudgetOf(fc, w.DailyBudget).Limit == 0 {
		return true, nil
	}
	return db.TryLockBudget(ctx, tx, fc.Batch.RecipientID)
}
