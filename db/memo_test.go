package db

import (
	"errors"
	"sync"
	"testing"
	"time"
)

// TestMemo: a value is looked up once per MemoTTL, looked up again once
// that has passed or once Forget is called, and a failed lookup is not
// remembered. A lookup that began before Forget does not remember the
// value it read, which may be the one Forget was called to drop.
func TestMemo(t *testing.T) {
	now := time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)
	var m Memo[string, int]
	m.clock = func() time.Time { return now }
	loads := 0
	get := func(v int, err error) (int, error) {
		return m.Get("k", func() (int, error) { loads++; return v, err })
	}
	if v, err := get(1, nil); v != 1 || err != nil || loads != 1 {
		t.Fatalf("first: %d, %v after %d loads", v, err, loads)
	}
	now = now.Add(MemoTTL - time.Nanosecond)
	if v, _ := get(2, nil); v != 1 || loads != 1 {
		t.Fatalf("within the TTL: %d after %d loads, want 1 after 1", v, loads)
	}
	now = now.Add(time.Nanosecond)
	if v, _ := get(2, nil); v != 2 || loads != 2 {
		t.Fatalf("at the TTL: %d after %d loads, want 2 after 2", v, loads)
	}
	m.Forget()
	if v, _ := get(3, nil); v != 3 || loads != 3 {
		t.Fatalf("after Forget: %d after %d loads, want 3 after 3", v, loads)
	}
	m.Forget()
	boom := errors.New("boom")
	if _, err := get(0, boom); !errors.Is(err, boom) {
		t.Fatalf("failed lookup: %v", err)
	}
	if v, _ := get(4, nil); v != 4 || loads != 5 {
		t.Fatalf("after a failed lookup: %d after %d loads, want 4 after 5", v, loads)
	}

	// A lookup under way while Forget is called.
	m.Forget()
	reading, forgotten := make(chan struct{}), make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		m.Get("k", func() (int, error) { close(reading); <-forgotten; return 5, nil })
	})
	<-reading
	m.Forget()
	close(forgotten)
	wg.Wait()
	if v, _ := get(6, nil); v != 6 {
		t.Fatalf("a lookup that began before Forget was remembered: got %d, want 6", v)
	}
}

// TestMemoDropsExpiredValues: past memoSweep values, remembering another
// drops those expired first, so keys asked for once do not pile up.
func TestMemoDropsExpiredValues(t *testing.T) {
	now := time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)
	var m Memo[int, int]
	m.clock = func() time.Time { return now }
	for i := range memoSweep {
		m.Get(i, func() (int, error) { return i, nil })
	}
	now = now.Add(MemoTTL)
	m.Get(-1, func() (int, error) { return -1, nil })
	if len(m.m) != 1 {
		t.Fatalf("%d values kept, want only the one just remembered", len(m.m))
	}
}

// TestMemoSweepsOncePerTTL: with more live values than memoSweep, a miss
// does not walk the map again until MemoTTL has passed since the last
// sweep.
func TestMemoSweepsOncePerTTL(t *testing.T) {
	now := time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)
	var m Memo[int, int]
	m.clock = func() time.Time { return now }
	for i := range memoSweep + 1 {
		m.Get(i, func() (int, error) { return i, nil })
	}
	swept := m.swept
	now = now.Add(time.Millisecond)
	m.Get(-1, func() (int, error) { return -1, nil })
	if m.swept != swept {
		t.Fatal("swept again within MemoTTL of the last sweep")
	}
	now = now.Add(MemoTTL)
	m.Get(-2, func() (int, error) { return -2, nil })
	if m.swept != now || len(m.m) != 1 {
		t.Fatalf("after MemoTTL: swept at %v, %d values kept; want a sweep now leaving 1", m.swept, len(m.m))
	}
}
