package web

import (
	"slices"
	"sync"
	"time"
)

// limiterSize is about how many keys a limiter remembers. Past it, keys
// that may safely be forgotten are (see evict); throttled ones never are.
const limiterSize = 10_000

// limiter allows each key (a client address, an account) burst requests,
// refilled at one per interval. It guards the token and login endpoints
// against guessing.
type limiter struct {
	mu       sync.Mutex
	burst    int
	interval time.Duration
	size     int
	seen     map[string]*bucket
}

type bucket struct {
	tokens float64
	last   time.Time
}

func newLimiter(burst int, interval time.Duration) *limiter {
	return &limiter{burst: burst, interval: interval, size: limiterSize, seen: map[string]*bucket{}}
}

// allow takes one request from key's allowance at now, and reports
// whether there was one.
func (l *limiter) allow(key string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.seen[key]
	if !ok {
		if len(l.seen) >= l.size {
			l.evict(now)
		}
		b = &bucket{tokens: float64(l.burst), last: now}
		l.seen[key] = b
	}
	b.tokens = l.tokens(b, now)
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// tokens is b's allowance at now.
func (l *limiter) tokens(b *bucket, now time.Time) float64 {
	refill := max(now.Sub(b.last), 0).Seconds() / l.interval.Seconds()
	return min(float64(l.burst), b.tokens+refill)
}

// evict makes room for a tenth of the size at once, so that it runs
// rarely under a flood of new keys. It forgets keys whose allowance has
// refilled, which changes nothing, then the longest idle of the rest, but
// never a key out of allowance: a flood of other addresses must not hand
// a throttled one fresh attempts. When every key is throttled the table
// grows; each throttled key cost burst real attempts to get there and
// refills within an interval.
func (l *limiter) evict(now time.Time) {
	var idle []string
	for k, b := range l.seen {
		switch t := l.tokens(b, now); {
		case t >= float64(l.burst):
			delete(l.seen, k)
		case t >= 1:
			idle = append(idle, k)
		}
	}
	keep := l.size - l.size/10
	if len(l.seen) <= keep {
		return
	}
	slices.SortFunc(idle, func(a, b string) int { return l.seen[a].last.Compare(l.seen[b].last) })
	for _, k := range idle[:min(len(idle), len(l.seen)-keep)] {
		delete(l.seen, k)
	}
}
