package coalesce

import (
	"context"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Calls made while sets are running wait and run together, each gets its
// own answer, and every call is answered however the calls interleave.
func TestGroupRunsWaitingCallsAsOneSet(t *testing.T) {
	t.Parallel()
	var g Group[int, int]
	release := make(chan struct{})
	var mu sync.Mutex
	var sets [][]int
	run := func(_ context.Context, in []int) []int {
		mu.Lock()
		first := len(sets) < groupLeaders
		sets = append(sets, append([]int(nil), in...))
		mu.Unlock()
		if first {
			<-release
		}
		out := make([]int, len(in))
		for i, v := range in {
			out[i] = v * 10
		}
		return out
	}
	// Fewer than a full set wait, so no second set starts (see
	// TestGroupRunsASecondSetWhileAFullSetWaits).
	const calls = groupLeaders + groupSize - 1
	var wg sync.WaitGroup
	var started atomic.Int32
	for i := range calls {
		wg.Go(func() {
			started.Add(1)
			if got, ok := g.Do(context.Background(), i, run); !ok || got != i*10 {
				t.Errorf("call %d got %d, want %d", i, got, i*10)
			}
		})
		if i == groupLeaders-1 {
			// Both leaders are inside run before the rest arrive.
			for {
				mu.Lock()
				n := len(sets)
				mu.Unlock()
				if n == groupLeaders {
					break
				}
				runtime.Gosched()
			}
		}
	}
	for started.Load() < calls {
		runtime.Gosched()
	}
	for {
		g.mu.Lock()
		n := len(g.pending)
		g.mu.Unlock()
		if n == calls-groupLeaders {
			break
		}
		runtime.Gosched()
	}
	close(release)
	wg.Wait()

	seen := map[int]bool{}
	for _, s := range sets {
		if len(s) > groupSize {
			t.Errorf("a set of %d, more than %d", len(s), groupSize)
		}
		for _, v := range s {
			if seen[v] {
				t.Errorf("call %d ran twice", v)
			}
			seen[v] = true
		}
	}
	if len(seen) != calls {
		t.Fatalf("%d calls ran, want %d", len(seen), calls)
	}
	// A set of one (the leader), then the 99 waiting calls in one set.
	if want := groupLeaders + 1; len(sets) != want {
		t.Fatalf("%d sets, want %d", len(sets), want)
	}
	if g.leaders != 0 || len(g.pending) != 0 {
		t.Fatalf("after the calls: %d leaders, %d pending", g.leaders, len(g.pending))
	}
}

// While a set runs, a full set's worth of waiting calls starts a second
// set at once, never a third, and sets never split a backlog smaller than
// a set: what waits when they end runs as one set.
func TestGroupRunsASecondSetWhileAFullSetWaits(t *testing.T) {
	t.Parallel()
	var g Group[int, int]
	release := make(chan struct{})
	var mu sync.Mutex
	var sets [][]int
	var running, most int
	run := func(_ context.Context, in []int) []int {
		mu.Lock()
		sets = append(sets, append([]int(nil), in...))
		running++
		most = max(most, running)
		mu.Unlock()
		<-release
		mu.Lock()
		running--
		mu.Unlock()
		return in
	}
	waitFor := func(what string, n int, count func() int) {
		for deadline := time.Now().Add(10 * time.Second); count() != n; runtime.Gosched() {
			if time.Now().After(deadline) {
				t.Fatalf("%d %s, want %d", count(), what, n)
			}
		}
	}
	setsRunning := func(n int) {
		waitFor("sets started", n, func() int { mu.Lock(); defer mu.Unlock(); return len(sets) })
	}
	pending := func(n int) {
		waitFor("calls waiting", n, func() int { g.mu.Lock(); defer g.mu.Unlock(); return len(g.pending) })
	}
	var wg sync.WaitGroup
	call := func(v int) {
		wg.Go(func() {
			if got, ok := g.Do(context.Background(), v, run); !ok || got != v {
				t.Errorf("call %d got %d, %v", v, got, ok)
			}
		})
	}
	call(0)
	setsRunning(1)
	for v := 1; v < groupSize; v++ {
		call(v)
	}
	pending(groupSize - 1)
	mu.Lock()
	if len(sets) != 1 {
		t.Fatalf("%d sets run while %d calls wait, want 1", len(sets), groupSize-1)
	}
	mu.Unlock()
	call(groupSize) // the hundredth waiting call: a full set
	setsRunning(2)
	for v := groupSize + 1; v <= 2*groupSize+5; v++ {
		call(v) // a full set again, and five more: still two sets
	}
	pending(groupSize + 5)
	close(release)
	wg.Wait()

	if most != fullLeaders {
		t.Errorf("%d sets ran at once, want %d", most, fullLeaders)
	}
	var sizes []int
	for _, s := range sets {
		sizes = append(sizes, len(s))
	}
	// The leader's set of one and the full set, then the backlog of 105
	// as a full set and a set of five, in either order: never split
	// further, however the two leads end.
	if len(sizes) == 4 {
		slices.Sort(sizes[2:])
	}
	if !slices.Equal(sizes, []int{1, groupSize, 5, groupSize}) {
		t.Errorf("set sizes %v, want 1, %d, then 5 and %d", sizes, groupSize, groupSize)
	}
	if g.leaders != 0 || len(g.pending) != 0 {
		t.Fatalf("after the calls: %d leaders, %d pending", g.leaders, len(g.pending))
	}
}

// Calls arriving at random while others run never hang and never lose an
// answer.
func TestGroupUnderChurn(t *testing.T) {
	t.Parallel()
	var g Group[int, int]
	run := func(_ context.Context, in []int) []int {
		out := make([]int, len(in))
		for i, v := range in {
			out[i] = -v
		}
		return out
	}
	var wg sync.WaitGroup
	for w := range 64 {
		wg.Go(func() {
			for i := range 200 {
				v := w*1000 + i
				if got, ok := g.Do(context.Background(), v, run); !ok || got != -v {
					t.Errorf("call %d got %d", v, got)
					return
				}
			}
		})
	}
	wg.Wait()
	if g.leaders != 0 || len(g.pending) != 0 {
		t.Fatalf("after the calls: %d leaders, %d pending", g.leaders, len(g.pending))
	}
}

// A set that panics answers each of its calls with ok false, so that each
// does its own work, and the group goes on running later calls.
func TestGroupSurvivesAPanickingSet(t *testing.T) {
	t.Parallel()
	var g Group[int, int]
	run := func(_ context.Context, in []int) []int {
		if slices.Contains(in, -1) {
			panic("bad input")
		}
		return in
	}
	var wg sync.WaitGroup
	for i := range 2 * groupLeaders {
		wg.Go(func() {
			if _, ok := g.Do(context.Background(), -1, run); ok {
				t.Errorf("call %d: a panicking set answered ok", i)
			}
		})
	}
	wg.Wait()
	if got, ok := g.Do(context.Background(), 7, run); !ok || got != 7 {
		t.Fatalf("after panics: got %d, %v", got, ok)
	}
	if g.leaders != 0 || len(g.pending) != 0 {
		t.Fatalf("after the calls: %d leaders, %d pending", g.leaders, len(g.pending))
	}
}
