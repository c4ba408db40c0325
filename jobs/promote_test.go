package jobs_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/riverqueue/river"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/jobs"
	"github.com/lull-dev/lull/mail/smtptest"
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

// TestPromotersInSeveralProcessesRace: two promoters running at once, as
// in two lull processes, promote every imminent flush between them, with
// no error and no flush left scheduled.
func TestPromotersInSeveralProcessesRace(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.saveType(t, db.Type{Key: "soon", DefaultMode: "cooldown", WindowMS: 1000})
	b.clock.Set(time.Now())
	var ids []string
	for i := range 50 {
		id := fmt.Sprintf("r%02d", i)
		b.recipient(t, id, "UTC")
		ids = append(ids, id)
	}
	b.post(t, "soon", "alice", ids...)
	var logs strings.Builder
	var mu sync.Mutex
	logger := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return logs.Write(p)
	}), nil))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for range 2 {
		go (&jobs.Promoter{DB: b.db, Logger: logger}).Run(ctx)
	}
	deadline := time.Now().Add(10 * time.Second)
	for b.count(t, `SELECT count(*) FROM river_job WHERE kind = 'flush_batch' AND state = 'scheduled'`) > 0 {
		if time.Now().After(deadline) {
			t.Fatal("flushes due in a second still scheduled after 10 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if n := b.count(t, `SELECT count(*) FROM river_job WHERE kind = 'flush_batch' AND state = 'available'`); n != 50 {
		t.Fatalf("%d flushes available, want 50", n)
	}
	mu.Lock()
	defer mu.Unlock()
	if logs.Len() > 0 {
		t.Fatalf("promoters logged: %s", logs.String())
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// TestImminentFlushIsWrittenAvailableAndRunsOnTime: a flush due within
// seconds goes into River "available", sparing the promotion's update,
// and still runs no earlier than its batch closes; one due in an hour is
// written "scheduled" as before.
func TestImminentFlushIsWrittenAvailableAndRunsOnTime(t *testing.T) {
	t.Parallel()
	srv := smtptest.Start(t)
	b := running(t, srv, time.Second)
	b.saveType(t, db.Type{Key: "soon", DefaultMode: "cooldown", WindowMS: 2000})
	b.saveType(t, db.Type{Key: "later", DefaultMode: "cooldown", WindowMS: 3_600_000})
	b.recipient(t, "bob", "UTC")
	posted := time.Now()
	soon := b.post(t, "soon", "alice", "bob").Batches[0]
	later := b.post(t, "later", "alice", "bob").Batches[0].ID
	var states = map[int64]string{}
	rows, err := b.db.Pool.Query(context.Background(),
		`SELECT (args->>'batch_id')::bigint, state FROM river_job WHERE kind = 'flush_batch'`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id int64
		var s string
		if err := rows.Scan(&id, &s); err != nil {
			t.Fatal(err)
		}
		states[id] = s
	}
	if states[later] != "scheduled" {
		t.Errorf("flush due in an hour written %q, want scheduled", states[later])
	}
	if s := states[soon.ID]; s != "available" && s != "running" && s != "completed" {
		t.Errorf("flush due in two seconds written %q, want available", s)
	}
	msgs := srv.WaitFor(t, 1, 10*time.Second)
	var sentAt *time.Time
	waitFor(t, 10*time.Second, "the delivery to be recorded", func() bool {
		err := b.db.Pool.QueryRow(context.Background(),
			`SELECT sent_at FROM deliveries WHERE batch_id = $1`, soon.ID).Scan(&sentAt)
		return err == nil && sentAt != nil
	})
	if sentAt.Before(soon.ClosesAt) {
		t.Errorf("sent at %v, before its batch closed at %v (posted %v)", sentAt, soon.ClosesAt, posted)
	}
	if len(msgs) != 1 {
		t.Errorf("%d emails, want the one due", len(msgs))
	}
	// The flush snoozes when it runs before its batch closes, so the
	// email's time alone would not show River running it early.
	var snoozes int
	var early bool
	if err := b.db.Pool.QueryRow(context.Background(), `
		SELECT coalesce((metadata->>'snoozes')::int, 0), attempted_at < scheduled_at FROM river_job
		WHERE kind = 'flush_batch' AND (args->>'batch_id')::bigint = $1`, soon.ID).Scan(&snoozes, &early); err != nil {
		t.Fatal(err)
	}
	if snoozes != 0 || early {
		t.Errorf("the flush written available ran before its time (snoozed %d times, last run early %v)", snoozes, early)
	}
}
