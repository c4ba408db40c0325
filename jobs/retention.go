package jobs

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/riverqueue/river"

	"github.com/lull-dev/lull/db"
)

// RetentionArgs is the hourly maintenance of day partitions.
type RetentionArgs struct{}

// Kind is River's name for the job.
func (RetentionArgs) Kind() string { return "retention" }

// InsertOpts keeps one retention job per hour across all processes.
func (RetentionArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{UniqueOpts: river.UniqueOpts{ByPeriod: time.Hour}}
}

// RetentionWorker creates the coming days' partitions and drops those
// older than Retention: one cheap DROP TABLE per day instead of a DELETE
// over millions of rows. Then it deletes, in small steps, the finished
// batches, skips, outbox emails and idempotency keys older than Retention
// (db.Prune), which grow by a row or so per email.
type RetentionWorker struct {
	river.WorkerDefaults[RetentionArgs]
	DB        *db.DB
	Retention time.Duration
	Logger    *slog.Logger
}

// Timeout gives a run far longer than a flush gets (LULL_JOB_TIMEOUT):
// the first run on a large old database has a backlog to delete.
func (*RetentionWorker) Timeout(*river.Job[RetentionArgs]) time.Duration { return 30 * time.Minute }

// Work runs the maintenance.
func (w *RetentionWorker) Work(ctx context.Context, job *river.Job[RetentionArgs]) error {
	cutoff := time.Now().Add(-w.Retention)
	dropped, err := db.MaintainPartitions(ctx, w.DB.Pool, cutoff)
	if err != nil {
		return fmt.Errorf("retention: %w", err)
	}
	if len(dropped) > 0 {
		w.Logger.Info("dropped old partitions", "tables", dropped)
	}
	// Each chunk commits on its own: a run cut short by the job timeout
	// keeps what it deleted, and the next run goes on from there.
	pruned, err := db.Prune(ctx, w.DB.Pool, cutoff)
	var total int64
	for _, n := range pruned {
		total += n
	}
	if total > 0 {
		w.Logger.Info("pruned finished work", "before", cutoff.Format(time.RFC3339), "rows", pruned)
	}
	if err != nil {
		return fmt.Errorf("retention: %w", err)
	}
	return nil
}
