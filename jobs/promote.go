package jobs

import (
	"context"
	"fmt"
	"time"

	"github.com/riverqueue/river"

	"github.com/lull-dev/lull/db"
)

// PromoteArgs makes flush jobs due in the next few seconds available.
//
// River keeps a job inserted for later in the "scheduled" state and moves
// it to "available" in a maintenance pass every five seconds, so a flush
// could start up to five seconds after its batch closes. River's fetch
// takes an available job only once its scheduled time has come, so
// promoting flush jobs a little early changes nothing about when they run
// except that it is on time: within a fetch poll of closes_at.
type PromoteArgs struct{}

// Kind is River's name for the job.
func (PromoteArgs) Kind() string { return "promote_flushes" }

// promoteEvery is how often the promotion runs, and promoteAhead how far
// ahead it looks; ahead exceeds every so that no flush is missed between
// two runs.
const (
	promoteEvery = time.Second
	promoteAhead = 3 * time.Second
)

// PromoteWorker runs the promotion.
type PromoteWorker struct {
	river.WorkerDefaults[PromoteArgs]
	DB *db.DB
}

// Work promotes the flush jobs due within promoteAhead.
func (w *PromoteWorker) Work(ctx context.Context, job *river.Job[PromoteArgs]) error {
	_, err := w.DB.Pool.Exec(ctx, `
		UPDATE river_job SET state = 'available'
		WHERE state = 'scheduled' AND queue = 'default' AND kind = 'flush_batch'
		  AND scheduled_at <= now() + make_interval(secs => $1)`, promoteAhead.Seconds())
	if err != nil {
		return fmt.Errorf("promote flushes: %w", err)
	}
	return nil
}
