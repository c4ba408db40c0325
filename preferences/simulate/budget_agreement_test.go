package simulate_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/jobs"
	"github.com/lull-dev/lull/preferences/batching"
	"github.com/lull-dev/lull/preferences/simulate"
)

// TestSimulatorAgreesWithEngineOnBudgets: with daily email budgets (a
// recipient's own, a type's, the installation's), the simulator folds the
// same batches into the same held digests as the engine, sending the same
// emails. The engine flushes every batch at its close time, as the flush
// jobs do when they keep up, and as the simulator assumes.
func TestSimulatorAgreesWithEngineOnBudgets(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupEngine(t)
	b.world(t)
	b.flush.DailyBudget = 3
	for _, q := range []string{
		`UPDATE recipients SET daily_budget = 2 WHERE id IN ('ana', 'ben', 'hal')`,
		`UPDATE recipients SET daily_budget = 0 WHERE id = 'ivy'`, // no limit, whatever the defaults
		`UPDATE notification_types SET daily_budget = 1 WHERE key = 'comment'`,
	} {
		if _, err := b.db.Pool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	from := time.Date(2026, 10, 22, 0, 0, 0, 0, time.UTC)
	rp := replayBoth(t, b, from, func(s *simulate.Settings) { s.DefaultBudget = 3 })
	engine, settings, events := rp.engine, rp.settings, rp.events
	compareBatches(t, engine, rp.sim)
	held := slices.ContainsFunc(engine, func(l string) bool { return strings.Contains(l, " budget:held daily ") })
	folded := slices.ContainsFunc(engine, func(l string) bool { return strings.Contains(l, " items 0 sent false") })
	if !held || !folded {
		t.Fatalf("the stream never went over a budget (held digest %v, folded batch %v)", held, folded)
	}

	// The report counts what the budget held, and a proposal without
	// budgets holds nothing.
	none := 0
	r := simulate.New(settings, []simulate.Policy{simulate.Current(), {Name: "no budget", Budget: &none}})
	for _, ev := range events {
		if err := r.Add(ev); err != nil {
			t.Fatal(err)
		}
	}
	rep := r.Report()
	if cur, prop := rep.Results[0].Overall, rep.Results[1].Overall; cur.Held == 0 || cur.Emails >= prop.Emails || prop.Held == 0 && cur.Emails != countSent(engine) {
		t.Fatalf("current: %d emails, %d held (engine sent %d); with the installation's budget off: %d emails, %d held",
			cur.Emails, cur.Held, countSent(engine), prop.Emails, prop.Held)
	}
}

// replayBoth replays twelve days of a recorded stream from from, with two
// time-zone switches, through the engine (each batch flushed at its own
// close time) and through the simulator with the settings loaded from
// the same database, adjusted by tweak when it is not nil; it returns
// what each did, as budgetEngineBatches and simulated list it, with the
// settings and events it used.
func replayBoth(t *testing.T, b *engineBundle, from time.Time, tweak func(*simulate.Settings)) replayed {
	t.Helper()
	ctx := context.Background()
	switches := []time.Time{time.Date(2026, 10, 25, 1, 0, 0, 0, time.UTC), time.Date(2026, 11, 1, 6, 0, 0, 0, time.UTC)}
	events := recordedStream(99, from, 12, switches)
	for _, ev := range events {
		b.flushAtCloseTimes(t, ev.At)
		in := &batching.Event{Type: ev.Type, BatchKey: ev.BatchKey, OccurredAt: &ev.At}
		for _, r := range ev.Recipients {
			in.Recipients = append(in.Recipients, batching.RecipientRef{ID: r})
		}
		if _, err := b.engine.Ingest(ctx, 1, in); err != nil {
			t.Fatalf("ingest at %v: %v", ev.At, err)
		}
	}
	b.flushAtCloseTimes(t, events[len(events)-1].At.Add(40*24*time.Hour))
	engine := budgetEngineBatches(t, b.db)

	settings, err := batching.SimulationSettings(ctx, b.db, time.Time{}, time.Time{}, &simulate.Upload{Events: events})
	if err != nil {
		t.Fatal(err)
	}
	if tweak != nil {
		tweak(settings)
	}
	sim := simulated(t, settings, func(add func(simulate.Event) error) error {
		for _, ev := range events {
			if err := add(ev); err != nil {
				return err
			}
		}
		return nil
	})
	return replayed{engine: engine, sim: sim, settings: settings, events: events}
}

// replayed is what replayBoth returns.
type replayed struct {
	engine, sim []string
	settings    *simulate.Settings
	events      []simulate.Event
}

// flushAtCloseTimes flushes every batch due by until at its own close
// time, in order of close time and then id, as the flush jobs would.
func (b *engineBundle) flushAtCloseTimes(t *testing.T, until time.Time) {
	t.Helper()
	ctx := context.Background()
	for {
		var id int64
		var at time.Time
		err := b.db.Pool.QueryRow(ctx, `SELECT id, closes_at FROM batches WHERE state = 'open' AND closes_at <= $1
			ORDER BY closes_at, id LIMIT 1`, until).Scan(&id, &at)
		if err != nil {
			break // none left
		}
		b.clock.Set(at)
		b.jobID++
		job := &river.Job[jobs.FlushArgs]{JobRow: &rivertype.JobRow{ID: b.jobID, Attempt: 1, MaxAttempts: 8, Kind: "flush_batch"}, Args: jobs.FlushArgs{BatchID: id}}
		if err := b.flush.Work(ctx, job); err != nil {
			t.Fatalf("flush batch %d: %v", id, err)
		}
	}
	b.clock.Set(until)
}

// budgetEngineBatches lists what the engine did, as engineBatches does,
// where a batch folded into a held digest is one that was not sent.
func budgetEngineBatches(t *testing.T, d *db.DB) []string {
	t.Helper()
	rows, err := d.Pool.Query(context.Background(), `
		SELECT recipient_id, batch_key, mode, opened_at, closes_at, item_count, state, reason FROM batches`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var rid, key, mode, state, reason string
		var opened, closes time.Time
		var items int
		if err := rows.Scan(&rid, &key, &mode, &opened, &closes, &items, &state, &reason); err != nil {
			t.Fatal(err)
		}
		if state != db.StateSent && !(state == db.StateCanceled && (rid == "hal" || strings.HasPrefix(reason, db.SkipHeldByBudget))) {
			t.Fatalf("batch of %s under %s is %s (%s): the engine left something undone", rid, key, state, reason)
		}
		out = append(out, batchLine(rid, key, mode, opened, closes, items, state == db.StateSent))
	}
	slices.Sort(out)
	return out
}
