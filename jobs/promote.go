package jobs

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/lull-dev/lull/db"
)

// River keeps a job inserted for later in the "scheduled" state and moves
// it to "available" in a maintenance pass of its elected leader every five
// seconds, so a flush could start up to five seconds after its batch
// closes, and about twenty after a leader that died without stopping,
// until its lease runs out. River's fetch takes an available job only once
// its scheduled time has come, so promoting flush jobs a little early
// changes nothing about when they run except that it is on time: within a
// fetch poll of closes_at.
//
// promoteEvery is how often the promotion runs, and promoteAhead how far
// ahead it looks; ahead exceeds every so that no flush is missed between
// two runs.
const (
	promoteEvery = time.Second
	promoteAhead = 3 * time.Second
)

// Promoter promotes imminent flush jobs, and the wakes that write a
// fan-out's flush jobs, in every lull process, so flushes start on time
// whichever processes are alive, the leader or not. Several
// processes promoting at once skip each other's rows.
type Promoter struct {
	DB     *db.DB
	Logger *slog.Logger
}

// Run promotes every promoteEvery until ctx ends. A failure (the database
// is down) is logged once, not every second, until a run succeeds again.
func (p *Promoter) Run(ctx context.Context) {
	t := time.NewTicker(promoteEvery)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := promote(ctx, p.DB)
		switch {
		case err != nil && !failing && ctx.Err() == nil:
			p.Logger.Warn("cannot promote flush jobs; River's scheduler still will, a few seconds later", "err", err)
			failing = true
		case err == nil:
			failing = false
		}
	}
}

// promote names every priority so that River's index on (state, queue,
// priority, scheduled_at) reads only the jobs falling due: without a
// condition on priority, the column before scheduled_at, PostgreSQL read
// every scheduled job, one per open batch, every second (280 ms a run
// with 800,000 open batches, 0.1 ms now).
func promote(ctx context.Context, d *db.DB) error {
	_, err := d.Pool.Exec(ctx, `
		UPDATE river_job SET state = 'available'
		WHERE id IN (
			SELECT id FROM river_job
			WHERE state = 'scheduled' AND queue = 'default' AND priority IN (1, 2, 3, 4) AND kind IN ('flush_batch', 'wake_flushes')
			  AND scheduled_at <= now() + make_interval(secs => $1)
			FOR UPDATE SKIP LOCKED)`, promoteAhead.Seconds())
	if err != nil {
		return fmt.Errorf("promote flushes: %w", err)
	}
	return nil
}

// PromoteArgs is the promotion as a periodic job, which earlier versions
// enqueued; its worker stays so that such jobs left in the queue during an
// upgrade still run.
type PromoteArgs struct{}

// Kind is River's name for the job.
func (PromoteArgs) Kind() string { return "promote_flushes" }

// PromoteWorker runs the promotion once.
type PromoteWorker struct {
	river.WorkerDefaults[PromoteArgs]
	DB *db.DB
}

// Work promotes the flush jobs due within promoteAhead.
func (w *PromoteWorker) Work(ctx context.Context, job *river.Job[PromoteArgs]) error {
	return promote(ctx, w.DB)
}

// insertAvailableAhead is how far ahead of its time a flush or wake job
// is written "available" rather than "scheduled". River fetches an
// available job only once its time has come, so this changes nothing
// about when it runs; it spares the job the promotion's update, a new
// version of its row and of every entry in river_job's five indexes
// (two of them GIN), about a fifth of what River writes for a flush.
// It covers the flush jobs a wake writes wakeAhead before their batches
// close, the whole of a flush wave.
const insertAvailableAhead = wakeAhead + 5*time.Second

// availableSoon is River insert middleware applying insertAvailableAhead.
type availableSoon struct {
	river.JobInsertMiddlewareDefaults
}

func (*availableSoon) InsertMany(ctx context.Context, many []*rivertype.JobInsertParams, doInner func(context.Context) ([]*rivertype.JobInsertResult, error)) ([]*rivertype.JobInsertResult, error) {
	horizon := time.Now().Add(insertAvailableAhead)
	for _, p := range many {
		if p.State == rivertype.JobStateScheduled && p.ScheduledAt != nil && p.ScheduledAt.Before(horizon) &&
			(p.Kind == (FlushArgs{}).Kind() || p.Kind == (WakeArgs{}).Kind()) {
			p.State = rivertype.JobStateAvailable
		}
	}
	return doInner(ctx)
}
