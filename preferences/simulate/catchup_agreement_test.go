package simulate_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"
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
	rp := replayBoth(t, b, from, nil)
	engine := rp.engine
	compareBatches(t, engine, rp.sim)
	if !slices.ContainsFunc(engine, func(l string) bool { return strings.HasPrefix(l, "ana digest:weekly") }) {
		t.Fatalf("the engine slowed nothing for ana:\n%s", strings.Join(engine[:min(20, len(engine))], "\n"))
	}
}
