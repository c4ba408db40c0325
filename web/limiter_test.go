package web

import (
	"fmt"
	"testing"
	"time"
)

// TestLimiterFloodCannotFreeAThrottledKey throttles one address, then
// sends more new addresses than the limiter remembers, all within the
// same instant: the throttled address stays throttled, the table stays
// bounded, and the address gets its allowance back only as time refills
// it.
func TestLimiterFloodCannotFreeAThrottledKey(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	l := newLimiter(10, 6*time.Second)
	for i := range 10 {
		if !l.allow("10.0.0.1", now) {
			t.Fatalf("attempt %d refused, want the first 10 allowed", i+1)
		}
	}
	if l.allow("10.0.0.1", now) {
		t.Fatal("11th attempt allowed")
	}
	for i := range 3 * limiterSize {
		l.allow(fmt.Sprintf("127.%d.%d.%d", i>>16, i>>8&255, i&255), now)
	}
	if l.allow("10.0.0.1", now) {
		t.Fatal("a flood of other addresses gave the throttled address a fresh attempt")
	}
	if n := len(l.seen); n > limiterSize {
		t.Errorf("limiter remembers %d keys, want at most %d", n, limiterSize)
	}
	if !l.allow("10.0.0.1", now.Add(6*time.Second)) {
		t.Error("one interval later the throttled address still gets nothing")
	}
}

// TestLimiterForgetsRefilledKeysFirst fills the table with keys that have
// used some of their allowance and with keys long idle: room is made from
// the idle ones, which lose nothing by being forgotten, and the rest keep
// what they used.
func TestLimiterForgetsRefilledKeysFirst(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	l := newLimiter(10, 6*time.Second)
	for i := range limiterSize / 2 {
		l.allow(fmt.Sprintf("idle-%d", i), start)
	}
	now := start.Add(time.Hour)
	for i := range limiterSize / 2 {
		for range 5 {
			l.allow(fmt.Sprintf("busy-%d", i), now)
		}
	}
	l.allow("newcomer", now)
	for i := range limiterSize / 2 {
		if b := l.seen[fmt.Sprintf("busy-%d", i)]; b == nil || b.tokens != 5 {
			t.Fatalf("busy-%d forgotten or changed: %+v", i, b)
		}
	}
	if _, ok := l.seen["idle-0"]; ok {
		t.Error("a refilled key was kept while used ones were at risk")
	}
}
