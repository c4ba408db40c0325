package main

import (
	"errors"
	"slices"
	"testing"
	"time"
)

// TestMediansTakesEachFiguresMiddleTry: each figure is the middle of its
// three tries, taken figure by figure (a try slow in one figure need not
// be slow in the next), each try gets recipients of its own, and an error
// stops the scenario.
func TestMediansTakesEachFiguresMiddleTry(t *testing.T) {
	tries := [][]time.Duration{{3, 10}, {1, 30}, {2, 20}}
	var prefixes []string
	got, err := (&bench{}).medians("in20000-", func(prefix string) ([]time.Duration, error) {
		prefixes = append(prefixes, prefix)
		return tries[len(prefixes)-1], nil
	})
	if err != nil || !slices.Equal(got, []time.Duration{2, 20}) {
		t.Errorf("medians: %v, %v; want [2 20]", got, err)
	}
	if want := []string{"in20000-", "in20000-r1-", "in20000-r2-"}; !slices.Equal(prefixes, want) {
		t.Errorf("prefixes %q, want %q", prefixes, want)
	}
	failed := errors.New("event: 500")
	if _, err := (&bench{}).medians("x-", func(string) ([]time.Duration, error) { return nil, failed }); !errors.Is(err, failed) {
		t.Errorf("a failed try: %v, want %v", err, failed)
	}
}
