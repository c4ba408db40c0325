// Package web is lull's HTTP face: the JSON API, the recipient's settings
// pages and the operator console. Routes are all in routes.go; handlers
// live one per file, named after what they do.
package web

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/mailtemplates"
	"github.com/lull-dev/lull/preferences/batching"
)

// Server holds what the handlers need. It is built once in cmd/lull.
type Server struct {
	DB     *db.DB
	Logger *slog.Logger
	// BaseURL is the public URL that links in emails start with.
	BaseURL string
	Secret  []byte
	Engine  *batching.Engine
	Links   mailtemplates.Links
	// Now is the clock; tests replace it.
	Now func() time.Time
}

// HTTPServer wraps the handler with timeouts that keep slow or stalled
// clients from holding connections forever.
func (s *Server) HTTPServer(addr string) *http.Server {
	return &http.Server{
		Addr:              addr,
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
	}
}

func (s *Server) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}
