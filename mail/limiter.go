package mail

import (
	"context"
	"sync"
	"time"
)

// limiter is a token bucket: it lets rate sends per second through on
// average, with a burst of one second's worth (at least one), so a
// provider's "N messages per second" is kept without making the first
// messages of a quiet period wait.
type limiter struct {
	mu     sync.Mutex
	rate   float64
	burst  float64
	tokens float64
	last   time.Time
}

func newLimiter(rate float64) *limiter {
	burst := max(rate, 1)
	return &limiter{rate: rate, burst: burst, tokens: burst, last: time.Now()}
}

// wait takes a token, sleeping until one is due or ctx ends.
func (l *limiter) wait(ctx context.Context) error {
	for {
		l.mu.Lock()
		now := time.Now()
		l.tokens = min(l.burst, l.tokens+now.Sub(l.last).Seconds()*l.rate)
		l.last = now
		if l.tokens >= 1 {
			l.tokens--
			l.mu.Unlock()
			return nil
		}
		wait := time.Duration((1 - l.tokens) / l.rate * float64(time.Second))
		l.mu.Unlock()
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
}
