package main

import (
	"math"
	"runtime/debug"
	"testing"
)

func TestSoftMemoryLimit(t *testing.T) {
	before := debug.SetMemoryLimit(math.MaxInt64)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })

	setMemoryLimit(func(string) string { return "" })
	if got := debug.SetMemoryLimit(-1); got != defaultMemoryLimit {
		t.Errorf("without GOMEMLIMIT the limit is %d, want %d", got, defaultMemoryLimit)
	}
	debug.SetMemoryLimit(math.MaxInt64)
	setMemoryLimit(func(k string) string {
		if k == "GOMEMLIMIT" {
			return "off"
		}
		return ""
	})
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Errorf("GOMEMLIMIT=off left a limit of %d, want none", got)
	}
}
