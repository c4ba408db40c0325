package jobs_test

import (
	"context"
	"testing"
	"time"

	"github.com/riverqueue/river"

	"github.com/lull-dev/lull/jobs"
)

// The sweep moves up to its close the wake time of an open batch whose
// close slid past it, so that it stops stepping over the batch on every
// pass (db.CatchUpWakes); a batch whose wake is still ahead is left alone.
func TestSweepCatchesUpWakesSlidPast(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	now := b.clock.Now()
	for _, r := range []struct {
		id         string
		wake, ends time.Time
	}{
		{"slid", now.Add(-time.Hour), now.Add(time.Hour)},
		{"ahead", now.Add(30 * time.Minute), now.Add(time.Hour)},
	} {
		if _, err := b.db.Pool.Exec(ctx, `INSERT INTO batches (recipient_id, batch_key, type_key, mode, opened_at, last_event_at, closes_at, wake_at)
			VALUES ($1, 'k', 't', 'cooldown', $2, $2, $3, $4)`, r.id, now.Add(-2*time.Hour), r.ends, r.wake); err != nil {
			t.Fatal(err)
		}
	}
	w := &jobs.SweepWorker{DB: b.db, RescueAfter: time.Hour, Now: b.clock.Now}
	if err := w.Work(ctx, &river.Job[jobs.SweepArgs]{}); err != nil {
		t.Fatal(err)
	}
	if n := b.count(t, `SELECT count(*) FROM batches WHERE recipient_id = 'slid' AND wake_at = closes_at`); n != 1 {
		t.Error("the sweep left the wake time a slide stepped past behind its close")
	}
	if n := b.count(t, `SELECT count(*) FROM batches WHERE recipient_id = 'ahead' AND wake_at < closes_at`); n != 1 {
		t.Error("the sweep moved a wake time still ahead")
	}
}
