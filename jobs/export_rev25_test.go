package jobs

import (
	"context"

	"github.com/riverqueue/river"
)

// PrepareSetItems runs step one for set as one group would, and gives for
// each job the items of the email it started (-1: none started).
func (w *FlushWorker) PrepareSetItems(ctx context.Context, set []*river.Job[FlushArgs]) []int {
	calls := make([]flushCall, len(set))
	for i, job := range set {
		calls[i] = flushCall{ctx, job}
	}
	var out []int
	for _, p := range w.prepareSet(ctx, calls) {
		n := -1
		if p.plan != nil && p.plan.delivery != nil {
			n = len(p.plan.content.Items)
		}
		out = append(out, n)
	}
	return out
}
