package db

import (
	"sync"
	"time"
)

// MemoTTL is how long a Memo remembers a value: how late a change made by
// another lull process (a revoked API key, an edited type) may be seen.
const MemoTTL = time.Second

// memoSweep is the size past which remembering a value first drops those
// expired, at most once per MemoTTL (a map of more live values would
// otherwise be walked at every miss), so values no longer asked for do
// not pile up.
const memoSweep = 1024

// Memo remembers, for MemoTTL, what a lookup made on every request
// returned: a live API key's id, an event's type. At a few thousand events
// a second those two lookups were two round trips to PostgreSQL per event,
// more than the event's share of its own writes, which are made in sets
// (ingest ÷ pgbench 0.71–0.80 with them, 0.95–1.07 without; see
// docs/performance.md). Requests that miss the same value at once each
// look it up: at most one round trip each, once a second. A value
// changed through this process is forgotten at once (Forget); one changed
// by another process is seen within MemoTTL.
// A failed lookup (an unknown key) is not remembered, so guesses cannot
// fill it.
//
// It is a map and a mutex: the expiring cache of hashicorp/golang-lru
// starts a goroutine per cache that never ends and wakes a hundred times
// per TTL, and the larger caches (ristretto, otter) bring admission
// policies a few dozen keys do not need.
type Memo[K comparable, V any] struct {
	mu sync.Mutex
	m  map[K]memoized[V]
	// gen counts Forget calls, so a lookup that began before one does not
	// remember what it read.
	gen uint64
	// swept is when expired values were last dropped.
	swept time.Time
	// clock is time.Now unless a test sets it.
	clock func() time.Time
}

type memoized[V any] struct {
	v     V
	until time.Time
}

// Get returns the value remembered for k, or else what load returns,
// remembering it unless load fails.
func (c *Memo[K, V]) Get(k K, load func() (V, error)) (V, error) {
	now := c.now()
	c.mu.Lock()
	e, ok := c.m[k]
	gen := c.gen
	c.mu.Unlock()
	if ok && now.Before(e.until) {
		return e.v, nil
	}
	v, err := load()
	if err != nil {
		return v, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen != gen {
		return v, nil
	}
	if c.m == nil {
		c.m = map[K]memoized[V]{}
	}
	if len(c.m) >= memoSweep && !now.Before(c.swept.Add(MemoTTL)) {
		c.swept = now
		for k, e := range c.m {
			if !now.Before(e.until) {
				delete(c.m, k)
			}
		}
	}
	c.m[k] = memoized[V]{v: v, until: now.Add(MemoTTL)}
	return v, nil
}

// Forget drops every value remembered, and what lookups under way read.
func (c *Memo[K, V]) Forget() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.m = nil
	c.gen++
}

func (c *Memo[K, V]) now() time.Time {
	if c.clock != nil {
		return c.clock()
	}
	return time.Now()
}
