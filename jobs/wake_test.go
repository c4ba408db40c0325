package jobs_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/jobs"
	"github.com/lull-dev/lull/mail/smtptest"
	"github.com/lull-dev/lull/preferences/batching"
)

// fanOutSize is large enough for an event to be scheduled by wakes.
const fanOutSize = 150

// audience creates n recipients named prefix000… in zone and returns
// their ids.
func (b *testBundle) audience(t *testing.T, prefix string, n int, zone string) []string {
	t.Helper()
	_, err := b.db.Pool.Exec(context.Background(), `
		INSERT INTO recipients (id, email, name, timezone)
		SELECT $1 || lpad(i::text, 3, '0'), $1 || lpad(i::text, 3, '0') || '@example.com', 'R' || i, $3
		FROM generate_series(0, $2 - 1) AS i`, prefix, n, zone)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s%03d", prefix, i)
	}
	return ids
}

// runJobs works the wake and flush jobs due at the test clock's time, as
// River would, until none is left due: a flush that snoozes is due again
// later, and a wake writes flush jobs that may be due at once. Nothing
// else flushes a batch (no sweep), so a batch without a job stays open.
func (b *testBundle) runJobs(t *testing.T) {
	t.Helper()
	if err := b.workDueJobs(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// dueJob is a River job row as runJobs works it.
type dueJob struct {
	id   int64
	kind string
	args []byte
}

// workDueJobs is runJobs, safe to call from any goroutine.
func (b *testBundle) workDueJobs(ctx context.Context) error {
	wake := &jobs.WakeWorker{DB: b.db, Scheduler: &jobs.Scheduler{Client: b.client}}
	for {
		rows, err := b.db.Pool.Query(ctx, `
			SELECT id, kind, args FROM river_job
			WHERE state IN ('available', 'scheduled') AND kind IN ('wake_flushes', 'flush_batch') AND scheduled_at <= $1
			ORDER BY scheduled_at, id`, b.clock.Now())
		if err != nil {
			return err
		}
		var due []dueJob
		var d dueJob
		if _, err := pgx.ForEachRow(rows, []any{&d.id, &d.kind, &d.args}, func() error {
			due = append(due, d)
			return nil
		}); err != nil {
			return err
		}
		if len(due) == 0 {
			return nil
		}
		for _, d := range due {
			row := &rivertype.JobRow{ID: d.id, Attempt: 1, MaxAttempts: 8, Kind: d.kind}
			var err error
			if d.kind == "wake_flushes" {
				job := &river.Job[jobs.WakeArgs]{JobRow: row}
				if err := json.Unmarshal(d.args, &job.Args); err != nil {
					return err
				}
				err = wake.Work(ctx, job)
			} else {
				job := &river.Job[jobs.FlushArgs]{JobRow: row}
				if err := json.Unmarshal(d.args, &job.Args); err != nil {
					return err
				}
				err = b.flush.Work(ctx, job)
			}
			if err := b.finishJob(ctx, d.id, err); err != nil {
				return err
			}
		}
	}
}

// finishJob records what working a job came to: completed, or scheduled
// again for a snooze.
func (b *testBundle) finishJob(ctx context.Context, id int64, err error) error {
	var snooze *river.JobSnoozeError
	switch {
	case errors.As(err, &snooze):
		_, err = b.db.Pool.Exec(ctx, `UPDATE river_job SET state = 'scheduled', scheduled_at = $2 WHERE id = $1`, id, b.clock.Now().Add(snooze.Duration))
	case err == nil:
		_, err = b.db.Pool.Exec(ctx, `UPDATE river_job SET state = 'completed', finalized_at = now() WHERE id = $1`, id)
	default:
		return fmt.Errorf("job %d: %w", id, err)
	}
	return err
}

// walkCloses moves the clock through every close time of the open
// batches, working the jobs due a few seconds before each (when wakes
// run) and at it.
func (b *testBundle) walkCloses(t *testing.T) {
	t.Helper()
	for {
		var next *time.Time
		err := b.db.Pool.QueryRow(context.Background(),
			`SELECT min(closes_at) FROM batches WHERE state = 'open' AND closes_at > $1`, b.clock.Now()).Scan(&next)
		if err != nil {
			t.Fatal(err)
		}
		if next == nil {
			b.runJobs(t)
			return
		}
		b.clock.Set(next.Add(-5 * time.Second))
		b.runJobs(t)
		b.clock.Set(*next)
		b.runJobs(t)
	}
}

// checkFlushedOnceOnTime checks every batch left the open state, and that
// each sent batch was flushed at its close time and sent once, by its one
// flush job.
func (b *testBundle) checkFlushedOnceOnTime(t *testing.T) {
	t.Helper()
	if n := b.count(t, `SELECT count(*) FROM batches WHERE state NOT IN ('sent', 'canceled')`); n != 0 {
		t.Fatalf("%d batches neither sent nor canceled: stranded without a job", n)
	}
	if n := b.count(t, `SELECT count(*) FROM batches WHERE state = 'sent' AND flushing_at <> closes_at`); n != 0 {
		t.Errorf("%d batches flushed at another time than their close", n)
	}
	sent := b.count(t, `SELECT count(*) FROM batches WHERE state = 'sent'`)
	if got := len(b.outbox(t)); got != sent {
		t.Errorf("%d emails for %d sent batches", got, sent)
	}
	if n := b.count(t, `SELECT count(*) FROM batches WHERE state = 'sent' AND flush_job_id IS NULL`); n != 0 {
		t.Errorf("%d batches sent by no flush job", n)
	}
}

func TestFanOutIsFlushedOnceOnTimeThroughWakes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.saveType(t, db.Type{Key: "post", DefaultMode: "cooldown", WindowMS: 3_600_000})
	res := b.post(t, "post", "star", b.audience(t, "f", fanOutSize, "UTC")...)
	closes := res.Batches[0].ClosesAt
	if n := b.count(t, `SELECT count(*) FROM river_job WHERE kind = 'flush_batch'`); n != 0 {
		t.Fatalf("the fan-out wrote %d flush jobs in its request, want none (a wake writes them)", n)
	}
	if n := b.count(t, `SELECT count(*) FROM river_job WHERE kind = 'wake_flushes'`); n != 1 {
		t.Fatalf("%d wakes for batches closing together, want 1", n)
	}

	// The console lists the wake with the batch's jobs until it has one.
	if js, err := db.ListJobs(context.Background(), b.db.Pool, nil, res.Batches[0].ID, 10); err != nil || len(js) != 1 || js[0].Kind != "wake_flushes" {
		t.Fatalf("a fan-out batch's jobs: %+v, %v; want its wake", js, err)
	}
	b.clock.Set(closes.Add(-time.Minute))
	b.runJobs(t)
	if n := b.count(t, `SELECT count(*) FROM river_job WHERE kind = 'flush_batch'`); n != 0 {
		t.Fatalf("%d flush jobs a minute before the close: the wake ran early", n)
	}
	b.clock.Set(closes.Add(-5 * time.Second))
	b.runJobs(t)
	if n := b.count(t, `SELECT count(*) FROM river_job WHERE kind = 'flush_batch' AND scheduled_at = $1`, closes); n != fanOutSize {
		t.Fatalf("%d flush jobs due at the close once the wake ran, want %d", n, fanOutSize)
	}
	if n := len(b.outbox(t)); n != 0 {
		t.Fatalf("%d emails before the close", n)
	}
	b.clock.Set(closes)
	b.runJobs(t)
	b.checkFlushedOnceOnTime(t)
	if n := b.count(t, `SELECT count(*) FROM batches WHERE state = 'sent'`); n != fanOutSize {
		t.Fatalf("%d batches sent, want %d", n, fanOutSize)
	}
	if n := b.count(t, `SELECT count(*) FROM river_job WHERE kind = 'flush_batch'`); n != fanOutSize {
		t.Fatalf("%d flush jobs for %d batches, want one each", n, fanOutSize)
	}
}

// TestFanOutDigestsInSeveralZones: a fan-out's digests close at 08:00 in
// three zones, so it has three wakes; one digest's close then moves past
// the next wake's start, into that wake's range. Every digest is sent once at its close.
func TestFanOutDigestsInSeveralZones(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.saveType(t, db.Type{Key: "like", DefaultMode: "daily"})
	var ids []string
	for i, zone := range []string{"Europe/Berlin", "UTC", "America/New_York"} {
		ids = append(ids, b.audience(t, fmt.Sprintf("z%d", i), fanOutSize/3, zone)...)
	}
	b.post(t, "like", "star", ids...)
	if n := b.count(t, `SELECT count(*) FROM river_job WHERE kind = 'wake_flushes'`); n != 3 {
		t.Fatalf("%d wakes for digests closing in three zones, want 3", n)
	}
	// 08:00 in Berlin is 07:00 UTC, before the UTC digests' wake at
	// 08:00. A digest keeps the close time it opened with, so nothing a
	// recipient does moves it; a close moved by hand (as an operator
	// might) into the next wake's range stands for any close that slides.
	want := time.Date(2026, 11, 24, 8, 30, 0, 0, time.UTC)
	if _, err := b.db.Pool.Exec(context.Background(), `UPDATE batches SET closes_at = $1 WHERE recipient_id = 'z0000'`, want); err != nil {
		t.Fatal(err)
	}
	b.walkCloses(t)
	b.checkFlushedOnceOnTime(t)
	if n := b.count(t, `SELECT count(*) FROM batches WHERE state = 'sent'`); n != fanOutSize {
		t.Fatalf("%d digests sent, want %d", n, fanOutSize)
	}
	// Each wake wrote the jobs of its own range only.
	if n := b.count(t, `SELECT count(*) FROM river_job WHERE kind = 'flush_batch'`); n != fanOutSize {
		t.Fatalf("%d flush jobs for %d digests, want one each", n, fanOutSize)
	}
	var flushedAt time.Time
	if err := b.db.Pool.QueryRow(context.Background(), `SELECT flushing_at FROM batches WHERE recipient_id = 'z0000'`).Scan(&flushedAt); err != nil || !flushedAt.Equal(want) {
		t.Fatalf("moved digest flushed at %v (%v), want %v", flushedAt, err, want)
	}
}

// TestFanOutBatchExtendedByALaterEvent: one batch of a fan-out slides
// later before its wake runs, another after (its job then snoozes); both
// are sent at their new close, the rest at theirs.
func TestFanOutBatchExtendedByALaterEvent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.saveType(t, db.Type{Key: "post", DefaultMode: "cooldown", WindowMS: 10 * 60_000})
	start := b.clock.Now()
	b.post(t, "post", "star", b.audience(t, "f", fanOutSize, "UTC")...)

	b.clock.Set(start.Add(5 * time.Minute))
	before := b.post(t, "post", "fan", "f000").Batches[0]
	b.clock.Set(start.Add(10*time.Minute - 5*time.Second))
	b.runJobs(t) // the wake
	after := b.post(t, "post", "fan", "f001").Batches[0]
	if !before.ClosesAt.Equal(start.Add(15*time.Minute)) || !after.ClosesAt.Equal(start.Add(20*time.Minute-5*time.Second)) {
		t.Fatalf("extended batches close at +%v and +%v", before.ClosesAt.Sub(start), after.ClosesAt.Sub(start))
	}
	b.clock.Set(start.Add(10 * time.Minute))
	b.runJobs(t)
	if n := b.count(t, `SELECT count(*) FROM batches WHERE state = 'sent'`); n != fanOutSize-2 {
		t.Fatalf("%d batches sent at the fan-out's close, want all but the two extended", n)
	}
	b.walkCloses(t)
	b.checkFlushedOnceOnTime(t)
	for _, br := range []batching.BatchRef{before, after} {
		if got := b.batch(t, br.ID); got.State != db.StateSent || got.ItemCount != 2 {
			t.Fatalf("extended batch %d: %s with %d items, want sent with 2", br.ID, got.State, got.ItemCount)
		}
	}
}

// TestFanOutBatchFullBeforeItsWakeFlushesEarly: a batch of a fan-out that
// reaches max_items is sent at once, long before the wake, and not again.
func TestFanOutBatchFullBeforeItsWakeFlushesEarly(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.saveType(t, db.Type{Key: "post", DefaultMode: "cooldown", WindowMS: 3_600_000, MaxItems: 3})
	start := b.clock.Now()
	b.post(t, "post", "star", b.audience(t, "f", fanOutSize, "UTC")...)
	b.clock.Set(start.Add(time.Minute))
	b.post(t, "post", "fan", "f000")
	full := b.post(t, "post", "fan", "f000").Batches[0]
	b.runJobs(t)
	if got := b.batch(t, full.ID); got.State != db.StateSent || !got.FlushingAt.Equal(start.Add(time.Minute)) {
		t.Fatalf("full batch is %s (flushed at %v), want sent at once", got.State, got.FlushingAt)
	}
	if n := len(b.outbox(t)); n != 1 {
		t.Fatalf("%d emails before the fan-out's close, want the full batch's", n)
	}
	b.walkCloses(t)
	b.checkFlushedOnceOnTime(t)
	if n := len(b.outbox(t)); n != fanOutSize {
		t.Fatalf("%d emails, want %d", n, fanOutSize)
	}
}

// TestRetractingAFanOutBeforeItsWake: the batches that held only the
// retracted event are canceled; those that hold another event's
// notification too are still sent, on time, though the wake's event is
// gone from them.
func TestRetractingAFanOutBeforeItsWake(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.saveType(t, db.Type{Key: "post", DefaultMode: "cooldown", WindowMS: 3_600_000})
	ids := b.audience(t, "f", fanOutSize, "UTC")
	start := b.clock.Now()
	fan := b.post(t, "post", "star", ids...)
	b.clock.Set(start.Add(time.Minute))
	b.post(t, "post", "fan", ids[:10]...)
	if _, err := b.engine.Retract(context.Background(), 1, batching.EventRef{ID: fan.ID}); err != nil {
		t.Fatal(err)
	}
	b.walkCloses(t)
	b.checkFlushedOnceOnTime(t)
	if n := b.count(t, `SELECT count(*) FROM batches WHERE state = 'sent' AND item_count = 1`); n != 10 {
		t.Fatalf("%d batches sent with the other event's item, want 10", n)
	}
	if n := b.count(t, `SELECT count(*) FROM batches WHERE state = 'canceled' AND reason = $1`, db.SkipRetracted); n != fanOutSize-10 {
		t.Fatalf("%d batches canceled by the retraction, want %d", n, fanOutSize-10)
	}
}

// TestWakeRacesJoiningEventsAndRetraction runs a fan-out's wake while
// other events join its batches (sliding their close) and the fan-out is
// retracted. Whatever the order, no batch may be left open without a job,
// and each batch holding a notification still wanted is sent once.
func TestWakeRacesJoiningEventsAndRetraction(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.saveType(t, db.Type{Key: "post", DefaultMode: "cooldown", WindowMS: 10 * 60_000})
	ids := b.audience(t, "f", 2*fanOutSize, "UTC")
	start := b.clock.Now()
	fan := b.post(t, "post", "star", ids...)
	b.clock.Set(start.Add(10*time.Minute - 5*time.Second))

	var wg sync.WaitGroup
	wg.Go(func() {
		if err := b.workDueJobs(context.Background()); err != nil {
			t.Error(err)
		}
	})
	wg.Go(func() {
		if _, err := b.engine.Retract(context.Background(), 1, batching.EventRef{ID: fan.ID}); err != nil {
			t.Error(err)
		}
	})
	for w := range 4 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 7))
			for range 10 {
				var to []string
				for range 1 + r.IntN(20) {
					to = append(to, ids[r.IntN(len(ids))])
				}
				ev := &batching.Event{Type: "post", Actor: batching.Actor{ID: "fan", Name: "Fan"}}
				for _, id := range to {
					ev.Recipients = append(ev.Recipients, batching.RecipientRef{ID: id})
				}
				if _, err := b.engine.Ingest(context.Background(), 1, ev); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	b.walkCloses(t)
	b.checkFlushedOnceOnTime(t)
	wanted := b.count(t, `SELECT count(DISTINCT batch_id) FROM notifications WHERE retracted_at IS NULL`)
	if sent := b.count(t, `SELECT count(*) FROM batches WHERE state = 'sent'`); sent != wanted || wanted == 0 {
		t.Fatalf("%d batches sent, %d hold a notification still wanted", sent, wanted)
	}
}

// TestFanOutWakeRunsInRiver: with River working the jobs on real time, as
// in production, a fan-out's wake and then its flushes run by themselves.
func TestFanOutWakeRunsInRiver(t *testing.T) {
	t.Parallel()
	srv := smtptest.Start(t)
	b := running(t, srv, time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go (&jobs.Promoter{DB: b.db, Logger: b.flush.Logger}).Run(ctx)
	b.saveType(t, db.Type{Key: "post", DefaultMode: "cooldown", WindowMS: 1000})
	b.post(t, "post", "star", b.audience(t, "f", fanOutSize, "UTC")...)
	srv.WaitFor(t, fanOutSize, 30*time.Second)
	if n := b.count(t, `SELECT count(*) FROM river_job WHERE kind = 'wake_flushes' AND state = 'completed'`); n != 1 {
		t.Fatalf("%d wakes completed, want 1", n)
	}
}

// TestWakeResumesWhereItStopped: a wake cut short (a crash, its timeout)
// runs again from the last page it finished, which it records with that
// page's jobs, so no batch gets a second job and none is missed.
func TestWakeResumesWhereItStopped(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.saveType(t, db.Type{Key: "post", DefaultMode: "cooldown", WindowMS: 3_600_000})
	res := b.post(t, "post", "star", b.audience(t, "f", fanOutSize, "UTC")...)
	var id int64
	var args jobs.WakeArgs
	var raw []byte
	if err := b.db.Pool.QueryRow(context.Background(), `SELECT id, args FROM river_job WHERE kind = 'wake_flushes'`).Scan(&id, &raw); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &args); err != nil {
		t.Fatal(err)
	}
	// A first attempt got through the batches up to the 60th.
	ids := make([]int64, len(res.Batches))
	for i, br := range res.Batches {
		ids[i] = br.ID
	}
	slices.Sort(ids)
	args.After = ids[59]
	wake := &jobs.WakeWorker{DB: b.db, Scheduler: &jobs.Scheduler{Client: b.client}, Page: 40}
	if err := wake.Work(context.Background(), &river.Job[jobs.WakeArgs]{JobRow: &rivertype.JobRow{ID: id}, Args: args}); err != nil {
		t.Fatal(err)
	}
	if n := b.count(t, `SELECT count(*) FROM river_job WHERE kind = 'flush_batch'`); n != fanOutSize-60 {
		t.Fatalf("%d flush jobs, want %d: one for each batch after the first 60", n, fanOutSize-60)
	}
	if n := b.count(t, `SELECT count(*) FROM river_job WHERE kind = 'flush_batch' AND (args->>'batch_id')::bigint <= $1`, ids[59]); n != 0 {
		t.Fatalf("%d flush jobs again for batches the first attempt had done", n)
	}
	if n := b.count(t, `SELECT count(*) FROM river_job WHERE id = $1 AND (args->>'after')::bigint = $2`, id, ids[len(ids)-1]); n != 1 {
		t.Fatalf("the wake did not record that it got through its last batch")
	}
}
