package simulate

import (
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/lull-dev/lull/preferences"
)

// TestSweepChangesNothing replays a busy stream twice, once sweeping after
// every new slot, and requires the same batches: forgetting idle keys must
// not change a burst guard, a leading item or a join.
func TestSweepChangesNothing(t *testing.T) {
	t.Parallel()
	s := &Settings{Types: map[string]Type{
		"imm":  {Key: "imm", BurstLimit: 2, Defaults: preferences.TypeDefaults{Mode: preferences.Immediate}},
		"lead": {Key: "lead", Defaults: preferences.TypeDefaults{Mode: preferences.Cooldown, Window: 3 * time.Minute, MaxWait: 10 * time.Minute, Lead: true}},
		"cool": {Key: "cool", MaxItems: 4, Defaults: preferences.TypeDefaults{Mode: preferences.Cooldown, Window: 2 * time.Minute}},
		"day":  {Key: "day", Defaults: preferences.TypeDefaults{Mode: preferences.Daily}},
	}}
	lead := true
	wide := 20 * time.Minute
	policies := []Policy{{}, {Types: map[string]TypeChange{"cool": {Window: &wide, Lead: &lead}}}}
	batches := func(sweepAfter int) [][]Batch {
		r := New(s, policies)
		for _, rn := range r.runs {
			rn.sweepAfter = sweepAfter
		}
		out := make([][]Batch, len(policies))
		r.OnBatch(func(p int, b Batch) { out[p] = append(out[p], b) })
		rng := rand.New(rand.NewPCG(7, 8))
		at := time.Date(2026, 3, 28, 0, 0, 0, 0, time.UTC)
		types := []string{"imm", "lead", "cool", "day"}
		for range 20000 {
			at = at.Add(time.Duration(rng.ExpFloat64() * float64(20*time.Second)))
			ev := Event{At: at, Type: types[rng.IntN(len(types))], BatchKey: []string{"", "a", "b"}[rng.IntN(3)]}
			for range 1 + rng.IntN(3) {
				ev.Recipients = append(ev.Recipients, []string{"r1", "r2", "r3", "r4", "r5"}[rng.IntN(5)])
			}
			if err := r.Add(ev); err != nil {
				t.Fatal(err)
			}
		}
		r.Report()
		return out
	}
	always, normal := batches(1), batches(minSweep)
	if len(normal[0]) < 1000 || len(normal[1]) < 1000 {
		t.Fatalf("too few batches to mean anything: %d, %d", len(normal[0]), len(normal[1]))
	}
	if !reflect.DeepEqual(always, normal) {
		t.Fatal("sweeping changed the batches")
	}
}
