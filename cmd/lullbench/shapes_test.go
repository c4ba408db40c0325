package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestAtBothSizesTakesTurns: the two sizes run in turn (1 ×, 5 ×, 1 ×,
// 5 × …, so both see tables of about the same size); each figure of a
// size is the middle of its three tries, taken figure by figure (a try
// slow in one figure need not be slow in the next: here the middle of the
// first figure is the third try, of the second the second; and no mean
// of a figure's tries is its middle, so a mean would fail); each try gets
// recipients of its own, no try's prefix beginning another's (the
// scenarios select a try's rows with LIKE prefix || '%'); and an error
// stops the scenario.
func TestAtBothSizesTakesTurns(t *testing.T) {
	figures := map[int][][]time.Duration{
		20000:  {{9, 10}, {1, 20}, {2, 90}},
		100000: {{90, 100}, {10, 300}, {20, 210}},
	}
	var prefixes []string
	var order []int
	got, err := (&bench{}).atBothSizes("in", [2]int{20000, 100000}, func(prefix string, i, n int) ([]time.Duration, error) {
		if want := [2]int{20000, 100000}[i]; n != want {
			t.Errorf("size %d given as %d", i, n)
		}
		prefixes = append(prefixes, prefix)
		order = append(order, n)
		try := figures[n][0]
		figures[n] = figures[n][1:]
		return try, nil
	})
	if err != nil || !slices.Equal(got[0], []time.Duration{2, 20}) || !slices.Equal(got[1], []time.Duration{20, 210}) {
		t.Errorf("atBothSizes: %v, %v; want [[2 20] [20 210]]", got, err)
	}
	if want := []int{20000, 100000, 20000, 100000, 20000, 100000}; !slices.Equal(order, want) {
		t.Errorf("sizes ran in the order %v, want %v", order, want)
	}
	for i, p := range prefixes {
		for j, q := range prefixes {
			if i != j && strings.HasPrefix(q, p) {
				t.Errorf("try %d's prefix %q begins try %d's %q", i, p, j, q)
			}
		}
		if !strings.HasPrefix(p, fmt.Sprintf("in%d-", order[i])) {
			t.Errorf("prefix %q is not the scenario's", p)
		}
	}
	failed := errors.New("event: 500")
	if _, err := (&bench{}).atBothSizes("x", [2]int{1, 5}, func(string, int, int) ([]time.Duration, error) { return nil, failed }); !errors.Is(err, failed) {
		t.Errorf("a failed try: %v, want %v", err, failed)
	}
	n := 0
	if _, err := (&bench{}).atBothSizes("x", [2]int{1, 5}, func(string, int, int) ([]time.Duration, error) {
		n++
		return make([]time.Duration, n), nil
	}); err == nil {
		t.Error("tries giving different numbers of figures: no error")
	}
}

// TestMedianWaveIsOneTry: a digest wave's rate and lateness are those of
// the try with the median span, together, not the last try's.
func TestMedianWaveIsOneTry(t *testing.T) {
	ws := []waveResult{{span: 2 * time.Second, p99: 1.9}, {span: 3 * time.Second, p99: 2.9}, {span: time.Second, p99: 0.9}}
	if got := medianWave(ws); got.span != 2*time.Second || got.p99 != 1.9 {
		t.Errorf("medianWave: %+v, want the 2 s try's", got)
	}
	if ws[0].span != 2*time.Second || ws[2].span != time.Second {
		t.Errorf("medianWave reordered its argument: %+v", ws)
	}
}
