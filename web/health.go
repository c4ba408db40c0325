package web

import (
	"context"
	"net/http"
	"time"
)

// healthz answers while the process runs, whatever the database does, so
// an orchestrator restarts lull only when lull itself is stuck.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Write([]byte("ok\n"))
}

// readyz answers 200 only while the database answers, so a load balancer
// stops sending traffic during an outage and resumes by itself after it.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	if err := s.DB.Ping(ctx); err != nil {
		s.Logger.Warn("not ready", "err", err)
		s.problem(w, r, errUnavailable)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Write([]byte("ready\n"))
}
