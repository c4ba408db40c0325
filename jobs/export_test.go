package jobs

import (
	"context"

	"github.com/riverqueue/river"
)

// PrepareSet runs step one for set as one group would, and says for each
// job whether it was left to go alone and whether a delivery was started.
func (w *FlushWorker) PrepareSet(ctx context.Context, set []*river.Job[FlushArgs]) (alone, started []bool) {
	calls := make([]flushCall, len(set))
	for i, job := range set {
		calls[i] = flushCall{ctx, job}
	}
	for _, p := range w.prepareSet(ctx, calls) {
		alone = append(alone, p.alone)
		started = append(started, p.plan != nil && p.plan.delivery != nil)
	}
	return alone, started
}
