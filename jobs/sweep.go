package jobs

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/lull-dev/lull/db"
)

// SweepArgs is the periodic safety net that flushes any due batch. Like
// every periodic job it is enqueued only by River's elected leader, so
// several lull processes on one database run one sweep, not one each.
type SweepArgs struct{}

// Kind is River's name for the job.
func (SweepArgs) Kind() string { return "sweep_due_batches" }

// SweepWorker enqueues a flush for every open batch past its close time.
// Flush jobs are inserted with their batch, so normally this finds
// nothing; it exists so that no batch can be stranded whatever happened to
// its job (a lost insert, a job deleted by hand, a bug).
//
// It also reclaims batches stuck in "flushing" because the process
// flushing them died (their job is running for longer than RescueAfter, or
// gone), so they are sent again at once rather than when River's own
// rescuer gets to the job; and it flags at-most-once deliveries that were
// marked sent but never confirmed as possibly lost.
type SweepWorker struct {
	river.WorkerDefaults[SweepArgs]
	DB          *db.DB
	RescueAfter time.Duration
	Now         func() time.Time
}

// Work enqueues flushes for due batches, a thousand at a time. A batch
// whose job is merely late gets a second job; the flush is idempotent.
func (w *SweepWorker) Work(ctx context.Context, job *river.Job[SweepArgs]) error {
	now := time.Now()
	if w.Now != nil {
		now = w.Now()
	}
	if err := db.FlagUnconfirmed(ctx, w.DB.Pool, now.Add(-w.RescueAfter)); err != nil {
		return err
	}
	stuck, err := db.ReclaimStuck(ctx, w.DB.Pool, now.Add(-w.RescueAfter))
	if err != nil {
		return err
	}
	// Batches due only a moment ago still have their own job running.
	due := now.Add(-30 * time.Second)
	if err := db.CatchUpWakes(ctx, w.DB.Pool, due, 10000); err != nil {
		return err
	}
	ids, err := db.DueBatches(ctx, w.DB.Pool, due, 1000)
	if err != nil {
		return err
	}
	ids = append(ids, stuck...)
	if len(ids) == 0 {
		return nil
	}
	client := river.ClientFromContext[pgx.Tx](ctx)
	params := make([]river.InsertManyParams, len(ids))
	for i, id := range ids {
		params[i] = river.InsertManyParams{Args: FlushArgs{BatchID: id}}
	}
	_, err = client.InsertMany(ctx, params)
	return err
}
