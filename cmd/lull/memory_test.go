package main

import (
	"math"
	"runtime/debug"
	"testing"
)

func TestSoftMemoryLimit(t *testing.T) {
	before := debug.SetMemoryLimit(math.MaxInt64)
	gcBefore := debug.SetGCPercent(100)
	t.Cleanup(func() {
		debug.SetMemoryLimit(before)
		debug.SetGCPercent(gcBefore)
	})
	env := func(vars map[string]string) func(string) string {
		return func(k string) string { return vars[k] }
	}

	setMemoryLimit(env(nil))
	if got := debug.SetMemoryLimit(-1); got != defaultMemoryLimit {
		t.Errorf("without GOMEMLIMIT the limit is %d, want %d", got, defaultMemoryLimit)
	}
	if got := debug.SetGCPercent(100); got != limitedGCPercent {
		t.Errorf("under the default limit GOGC is %d, want %d", got, limitedGCPercent)
	}

	debug.SetMemoryLimit(math.MaxInt64)
	setMemoryLimit(env(map[string]string{"GOMEMLIMIT": "off"}))
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Errorf("GOMEMLIMIT=off left a limit of %d, want none", got)
	}
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("with no memory limit GOGC is %d, want Go's 100", got)
	}

	setMemoryLimit(env(map[string]string{"GOGC": "150"}))
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("a GOGC of the operator's was replaced by %d", got)
	}
}
