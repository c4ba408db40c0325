// Package jobs holds lull's River workers: the flush that turns a batch into
// an email, the wake that writes a fan-out's flush jobs, the sweep that
// catches any due batch without a job, and the maintenance of partitions
// and retention. One file per job kind.
package jobs

import (
	"cmp"
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/preferences/batching"
)

// Config tunes the River client.
type Config struct {
	Workers int
	// JobTimeout bounds one flush. RescueAfter is when River considers a
	// job whose process died (still "running") stuck and retries it.
	JobTimeout  time.Duration
	RescueAfter time.Duration
	// SweepEvery is how often the sweep looks for due batches without a job.
	SweepEvery time.Duration
	// Retention is how long notifications and events are kept.
	Retention time.Duration
	// FetchCooldown is River's pause between fetches; lower is faster.
	FetchCooldown time.Duration
	// FetchPollInterval is how often River looks for jobs that became
	// due without a notification (a retry after its backoff, say); 1 s
	// when zero.
	FetchPollInterval time.Duration
	// RiverLogger takes River's own log lines; nil sends them to the
	// logger NewClient is given.
	RiverLogger *slog.Logger
}

// NewClient builds the River client with every worker and periodic job.
// With insertOnly set it only inserts jobs (for commands that do no work).
func NewClient(d *db.DB, cfg Config, flush *FlushWorker, logger *slog.Logger, insertOnly bool) (*river.Client[pgx.Tx], error) {
	workers := river.NewWorkers()
	river.AddWorker(workers, flush)
	wake := &WakeWorker{DB: d}
	river.AddWorker(workers, wake)
	river.AddWorker(workers, &SweepWorker{DB: d, RescueAfter: cfg.RescueAfter, Now: flush.Now})
	river.AddWorker(workers, &PromoteWorker{DB: d})
	river.AddWorker(workers, &RetentionWorker{DB: d, Retention: cfg.Retention, Logger: logger})

	rc := &river.Config{
		Logger:               cmp.Or(cfg.RiverLogger, logger),
		Workers:              workers,
		JobTimeout:           cfg.JobTimeout,
		RescueStuckJobsAfter: cfg.RescueAfter,
		FetchCooldown:        cfg.FetchCooldown,
		FetchPollInterval:    cmp.Or(cfg.FetchPollInterval, time.Second),
		Middleware:           []rivertype.Middleware{&availableSoon{}},
	}
	// The sweep also reclaims stuck flushes, so it runs at least twice per
	// RescueAfter.
	sweep := min(cfg.SweepEvery, max(cfg.RescueAfter/2, time.Second))
	if !insertOnly {
		rc.Queues = map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: max(cfg.Workers, 1)}}
		rc.PeriodicJobs = []*river.PeriodicJob{
			river.NewPeriodicJob(river.PeriodicInterval(sweep), func() (river.JobArgs, *river.InsertOpts) {
				return SweepArgs{}, nil
			}, &river.PeriodicJobOpts{RunOnStart: true}),
			river.NewPeriodicJob(river.PeriodicInterval(time.Hour), func() (river.JobArgs, *river.InsertOpts) {
				return RetentionArgs{}, nil
			}, &river.PeriodicJobOpts{RunOnStart: true}),
		}
	}
	client, err := river.NewClient(riverpgxv5.New(d.Pool), rc)
	if err != nil {
		return nil, err
	}
	wake.Scheduler = &Scheduler{Client: client}
	flush.Scheduler = wake.Scheduler
	return client, nil
}

// Scheduler inserts flush jobs with a River client; it is what the batching
// engine calls, in the same transaction as the batch it writes.
type Scheduler struct {
	Client *river.Client[pgx.Tx]
}

// copyFrom is how many flush jobs make COPY worth its setup. PostgreSQL
// spends about 2 ms preparing a COPY into river_job, ten times what an
// INSERT of a few rows costs, but a fan-out's thousands of rows go in
// several times faster by COPY.
const copyFrom = 100

// ScheduleFlushes inserts one flush job per request, due at its time.
func (s *Scheduler) ScheduleFlushes(ctx context.Context, tx pgx.Tx, fl []batching.Flush) error {
	if len(fl) == 0 {
		return nil
	}
	params := make([]river.InsertManyParams, len(fl))
	for i, f := range fl {
		params[i] = river.InsertManyParams{Args: FlushArgs{BatchID: f.BatchID}, InsertOpts: &river.InsertOpts{ScheduledAt: f.At}}
	}
	if len(params) < copyFrom {
		_, err := s.Client.InsertManyTx(ctx, tx, params)
		return err
	}
	_, err := s.Client.InsertManyFastTx(ctx, tx, params)
	return err
}

// ScheduleWakes inserts one wake job per request, due wakeAhead before its
// first batch closes.
func (s *Scheduler) ScheduleWakes(ctx context.Context, tx pgx.Tx, wakes []batching.Wake) error {
	if len(wakes) == 0 {
		return nil
	}
	params := make([]river.InsertManyParams, len(wakes))
	for i, w := range wakes {
		args := WakeArgs{First: w.First, Last: w.Last, OpenedAt: w.OpenedAt}
		if !w.Until.IsZero() {
			args.Until = &w.Until
		}
		params[i] = river.InsertManyParams{Args: args, InsertOpts: &river.InsertOpts{ScheduledAt: w.At.Add(-wakeAhead)}}
	}
	_, err := s.Client.InsertManyTx(ctx, tx, params)
	return err
}
