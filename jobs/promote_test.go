package jobs_test

import (
	"context"
	"testing"
	"time"

	"github.com/riverqueue/river"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/jobs"
)

func TestPromoteMakesOnlyImminentFlushesAvailable(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.saveType(t, db.Type{Key: "soon", DefaultMode: "cooldown", WindowMS: 1000})
	b.saveType(t, db.Type{Key: "later", DefaultMode: "cooldown", WindowMS: 3_600_000})
	b.recipient(t, "bob", "UTC")
	// The engine's clock is the test clock; River compares with now().
	b.clock.Set(time.Now())
	soon := b.post(t, "soon", "alice", "bob").Batches[0].ID
	later := b.post(t, "later", "alice", "bob").Batches[0].ID
	w := &jobs.PromoteWorker{DB: b.db}
	if err := w.Work(context.Background(), &river.Job[jobs.PromoteArgs]{}); err != nil {
		t.Fatal(err)
	}
	state := func(batch int64) (s string) {
		err := b.db.Pool.QueryRow(context.Background(),
			`SELECT state FROM river_job WHERE kind = 'flush_batch' AND (args->>'batch_id')::bigint = $1`, batch).Scan(&s)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if s := state(soon); s != "available" {
		t.Errorf("flush due in a second is %s, want available", s)
	}
	if s := state(later); s != "scheduled" {
		t.Errorf("flush due in an hour is %s, want scheduled", s)
	}
}
