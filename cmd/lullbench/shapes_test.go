package main

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestMediansTakesEachFiguresMiddleTry: each figure is the middle of its
// three tries, taken figure by figure (a try slow in one figure need not
// be slow in the next: here the middle of the first figure is the third
// try, of the second the second), each try gets recipients of its own,
// no try's prefix beginning another's (the scenarios select a try's rows
// with LIKE prefix || '%'), and an error stops the scenario.
func TestMediansTakesEachFiguresMiddleTry(t *testing.T) {
	tries := [][]time.Duration{{3, 10}, {1, 20}, {2, 30}}
	var prefixes []string
	got, err := (&bench{}).medians("in20000-", func(prefix string) ([]time.Duration, error) {
		prefixes = append(prefixes, prefix)
		return tries[len(prefixes)-1], nil
	})
	if err != nil || !slices.Equal(got, []time.Duration{2, 20}) {
		t.Errorf("medians: %v, %v; want [2 20]", got, err)
	}
	if len(prefixes) != 3 {
		t.Fatalf("prefixes %q, want three", prefixes)
	}
	for i, p := range prefixes {
		for j, q := range prefixes {
			if i != j && strings.HasPrefix(q, p) {
				t.Errorf("try %d's prefix %q begins try %d's %q", i, p, j, q)
			}
		}
		if !strings.HasPrefix(p, "in20000-") {
			t.Errorf("prefix %q is not the scenario's", p)
		}
	}
	failed := errors.New("event: 500")
	if _, err := (&bench{}).medians("x-", func(string) ([]time.Duration, error) { return nil, failed }); !errors.Is(err, failed) {
		t.Errorf("a failed try: %v, want %v", err, failed)
	}
	n := 0
	if _, err := (&bench{}).medians("x-", func(string) ([]time.Duration, error) {
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
