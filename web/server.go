// Package web is lull's HTTP face: the JSON API, the recipient's settings
// pages and the operator console. Routes are all in routes.go; handlers
// live one per file, named after what they do.
package web

import (
	"crypto/sha256"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/gorilla/sessions"
	"github.com/jackc/pgx/v5"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/mailtemplates"
	"github.com/lull-dev/lull/preferences/batching"
	"github.com/lull-dev/lull/static"
)

// Server holds what the handlers need. It is built once in cmd/lull.
type Server struct {
	DB     *db.DB
	Logger *slog.Logger
	// BaseURL is the public URL that links in emails start with.
	BaseURL string
	Secret  []byte
	Engine  *batching.Engine
	Jobs    JobControl
	// Feed wakes feed streams; nil disables streaming.
	Feed *FeedHub
	// MailFrom is the From address, for previews.
	MailFrom string
	// DefaultLocale is the language of recipients without one of their own.
	DefaultLocale string
	Links         mailtemplates.Links
	// Brands is the host product's brand on emails and recipient pages.
	Brands *batching.Brands
	// Now is the clock; tests replace it.
	Now func() time.Time
	// Metrics counts requests; nil counts nothing.
	Metrics RequestMetrics
	// Webhooks serves POST /webhooks/{service} (bounce.Webhooks); nil
	// answers 404.
	Webhooks http.Handler
	// Mail sends the links the shared-unsubscribe page mails; nil sends
	// none.
	Mail Mailer

	// apiKeys remembers the ids of live API keys (see db.Memo).
	apiKeys db.Memo[[sha256.Size]byte, int64]

	initOnce     sync.Once
	sessions     *sessions.CookieStore
	assets       *static.Assets
	linkLimiter  *limiter
	loginLimiter *limiter
	// accountLimiter limits password attempts per operator account, from
	// whatever addresses they come.
	accountLimiter *limiter
	// addressLimiter limits the links mailed to one address.
	addressLimiter *limiter
	// draining is closed when the HTTP server shuts down, to end the
	// feed streams, which never finish by themselves.
	draining  chan struct{}
	drainOnce sync.Once
	// bigBodies bounds how many requests read a large body at once.
	bigBodies largeBodies

	// DailyBudget is the installation's daily email budget
	// (LULL_DAILY_EMAIL_BUDGET), shown on the settings page as the
	// default; 0 is no limit.
	DailyBudget int
}

// init builds what the handlers share; Handler calls it once.
func (s *Server) init() {
	s.initOnce.Do(func() {
		s.sessions = newSessionStore(s.Secret, s.BaseURL)
		s.assets = static.New()
		s.linkLimiter = newLimiter(20, 3*time.Second)
		s.addressLimiter = newLimiter(1, 10*time.Minute)
		s.loginLimiter = newLimiter(10, 6*time.Second)
		s.accountLimiter = newLimiter(10, 30*time.Second)
		s.draining = make(chan struct{})
		s.bigBodies = make(largeBodies, 2)
	})
}

func itoa(n int) string { return strconv.Itoa(n) }

type pgxTx = pgx.Tx

// HTTPServer wraps the handler with timeouts that keep slow or stalled
// clients from holding connections forever. Its Shutdown ends the feed
// streams, so that a graceful shutdown waits for the requests in
// progress, not for stream clients to leave (they reconnect to another
// process).
func (s *Server) HTTPServer(addr string) *http.Server {
	hs := &http.Server{
		Addr:              addr,
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
	}
	hs.RegisterOnShutdown(func() { s.drainOnce.Do(func() { close(s.draining) }) })
	return hs
}

func (s *Server) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}
