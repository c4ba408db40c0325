package web

import (
	"crypto/hmac"
	"crypto/sha256"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/sessions"
)

// Cookie names: recipients and operators have separate sessions, so a
// recipient's cookie can never open the operator console.
const (
	recipientSession = "lull_settings"
	operatorSession  = "lull_admin"
)

// newSessionStore derives the cookie keys from the server secret: one to
// sign, one to encrypt. Cookies are HttpOnly, SameSite=Lax, and Secure
// when lull is served over https.
func newSessionStore(secret []byte, baseURL string) *sessions.CookieStore {
	derive := func(label string) []byte {
		m := hmac.New(sha256.New, secret)
		m.Write([]byte(label))
		return m.Sum(nil)
	}
	store := sessions.NewCookieStore(derive("session-sign"), derive("session-encrypt"))
	store.Options = &sessions.Options{
		Path:     "/",
		MaxAge:   7 * 24 * 3600,
		HttpOnly: true,
		Secure:   strings.HasPrefix(baseURL, "https://"),
		SameSite: http.SameSiteLaxMode,
	}
	return store
}

// limiter allows each key (a client address) burst requests, refilled at
// one per interval. It guards the token and login endpoints against
// guessing.
type limiter struct {
	mu       sync.Mutex
	burst    int
	interval time.Duration
	seen     map[string]*bucket
}

type bucket struct {
	tokens float64
	last   time.Time
}

func newLimiter(burst int, interval time.Duration) *limiter {
	return &limiter{burst: burst, interval: interval, seen: map[string]*bucket{}}
}

func (l *limiter) allow(key string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.seen) > 10000 {
		// Forget everyone rather than grow without bound under a flood of
		// addresses; the limit is a brake, not an accounting system.
		l.seen = map[string]*bucket{}
	}
	b, ok := l.seen[key]
	if !ok {
		b = &bucket{tokens: float64(l.burst), last: now}
		l.seen[key] = b
	}
	b.tokens = min(float64(l.burst), b.tokens+now.Sub(b.last).Seconds()/l.interval.Seconds())
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// clientIP is the request's remote address without the port.
func clientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
