package coalesce

import (
	"context"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"
)

// Bursts of more than a full set, arriving with random gaps into sets
// that take random time and sometimes panic: every call is run in exactly
// one set and answered once, at most fullLeaders sets run at once, none
// holds more than groupSize, and the group ends empty.
func TestGroupStress(t *testing.T) {
	t.Parallel()
	var g Group[int, int]
	var mu sync.Mutex
	runs := map[int]int{}
	var running, most int
	run := func(_ context.Context, in []int) []int {
		mu.Lock()
		running++
		most = max(most, running)
		for _, v := range in {
			runs[v]++
		}
		mu.Unlock()
		defer func() { mu.Lock(); running--; mu.Unlock() }()
		if len(in) > groupSize {
			t.Errorf("set of %d", len(in))
		}
		switch rand.IntN(8) {
		case 0:
			runtime.Gosched()
		case 1:
			panic("set failed")
		default:
			time.Sleep(time.Duration(rand.IntN(500)) * time.Microsecond)
		}
		out := make([]int, len(in))
		for i, v := range in {
			out[i] = -v
		}
		return out
	}
	next := 0
	for range 6 {
		var wg sync.WaitGroup
		start := make(chan struct{})
		n := groupSize + rand.IntN(3*groupSize)
		for range n {
			v := next
			next++
			wg.Go(func() {
				<-start
				if rand.IntN(4) == 0 {
					time.Sleep(time.Duration(rand.IntN(300)) * time.Microsecond)
				}
				if got, ok := g.Do(context.Background(), v, run); ok && got != -v {
					t.Errorf("call %d got %d", v, got)
				}
			})
		}
		close(start)
		wg.Wait()
	}
	for v := range next {
		if runs[v] != 1 {
			t.Errorf("call %d ran in %d sets", v, runs[v])
		}
	}
	t.Logf("at most %d sets at once", most)
	if most > fullLeaders {
		t.Errorf("%d sets ran at once, want at most %d", most, fullLeaders)
	}
	if g.leaders != 0 || len(g.pending) != 0 {
		t.Fatalf("after the calls: %d leaders, %d pending", g.leaders, len(g.pending))
	}
}
