package jobs

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/preferences/batching"
)

// WakeArgs asks for the flush jobs of the batches a fan-out opened that
// are still open and close before Until (whenever they close, when it is
// absent): those with an id in [First, Last] opened at OpenedAt. See
// batching.Wake, and preferences/batching/wake.go for why no batch is
// left without a job.
type WakeArgs struct {
	First    int64      `json:"first"`
	Last     int64      `json:"last"`
	OpenedAt time.Time  `json:"opened_at"`
	Until    *time.Time `json:"until,omitempty"`
	// After is how far an earlier attempt got: the batches up to it have
	// their jobs, so a wake cut short (a crash, its timeout) does not
	// give them a second one.
	After int64 `json:"after,omitempty"`
}

// Kind is River's name for the job.
func (WakeArgs) Kind() string { return "wake_flushes" }

// wakeAhead is how long before its first batch closes a wake runs, so that
// the flush jobs it writes (a page of ten thousand takes a few tenths of a
// second) are in place and promoted like any other by the time they are
// due.
const wakeAhead = 10 * time.Second

// wakePage is how many flush jobs a wake writes per transaction, so the
// first flushes may start before the last are written and the memory a
// fan-out's jobs take stays small: River builds its insert of a job in
// about 10 KB, and a page of 10,000 took lull's heap to 130 MB in the
// digest peak benchmark (RSS 370 MB), where 2,000 cost a fan-out of
// 100,000 a few hundredths of a second more in commits.
const wakePage = 2_000

// WakeWorker writes the flush jobs of a fan-out's batches.
type WakeWorker struct {
	river.WorkerDefaults[WakeArgs]
	DB        *db.DB
	Scheduler *Scheduler
	// Page is how many jobs go in per transaction; wakePage when zero.
	Page int
}

// Work writes the flush jobs a page at a time, each page in a transaction
// that also records how far the wake got.
func (w *WakeWorker) Work(ctx context.Context, job *river.Job[WakeArgs]) error {
	a := job.Args
	var until time.Time
	if a.Until != nil {
		until = *a.Until
	}
	after := max(a.After, a.First-1)
	size := cmp.Or(w.Page, wakePage)
	for {
		var page []db.BatchClose
		err := w.DB.InTx(ctx, func(tx pgx.Tx) error {
			var err error
			page, err = db.FanOutBatches(ctx, tx, after, a.Last, a.OpenedAt, until, size)
			if err != nil || len(page) == 0 {
				return err
			}
			flushes := make([]batching.Flush, len(page))
			for i, b := range page {
				flushes[i] = batching.Flush{BatchID: b.ID, At: b.ClosesAt}
			}
			if err := w.Scheduler.ScheduleFlushes(ctx, tx, flushes); err != nil {
				return err
			}
			_, err = tx.Exec(ctx, `UPDATE river_job SET args = jsonb_set(args, '{after}', to_jsonb($2::bigint)) WHERE id = $1`,
				job.ID, page[len(page)-1].ID)
			return err
		})
		if err != nil {
			return fmt.Errorf("wake for batches %d–%d: %w", a.First, a.Last, err)
		}
		if len(page) < size {
			return nil
		}
		after = page[len(page)-1].ID
	}
}
