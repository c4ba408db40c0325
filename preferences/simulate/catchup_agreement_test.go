package simulate_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lull-dev/lull/preferences/batching"
	"github.com/lull-dev/lull/preferences/simulate"
)

// TestSimulatorAgreesWithEngineOnCatchUp: with catch-up on types of every
// faster mode and recipients last seen before the stream, the simulator
// slows the same notifications to the weekly digest as the engine.
func TestSimulatorAgreesWithEngineOnCatchUp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupEngine(t)
	b.world(t)
	from := time.Date(2026, 10, 22, 0, 0, 0, 0, time.UTC)
	for _, q := range []string{
		`UPDATE notification_types SET catch_up_days = 7 WHERE key IN ('ping', 'comment', 'share', 'pulse', 'alert')`,
		`INSERT INTO recipient_seen SELECT id, $1::timestamptz - interval '30 days' FROM recipients WHERE id IN ('ana', 'ben', 'hal')`,
		`INSERT INTO recipient_seen SELECT id, $1::timestamptz + interval '90 days' FROM recipients WHERE id IN ('cyd')`,
	} {
		var err error
		if strings.Contains(q, "$1") {
			_, err = b.db.Pool.Exec(ctx, q, from)
		} else {
			_, err = b.db.Pool.Exec(ctx, q)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
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
	sim := simulated(t, settings, func(add func(simulate.Event) error) error {
		for _, ev := range events {
			if err := add(ev); err != nil {
				return err
			}
		}
		return nil
	})
	compareBatches(t, engine, sim)
	if !slices.ContainsFunc(engine, func(l string) bool { return strings.HasPrefix(l, "ana digest:weekly") }) {
		t.Fatalf("the engine slowed nothing for ana:\n%s", strings.Join(engine[:min(20, len(engine))], "\n"))
	}
}
