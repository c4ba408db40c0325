package web

import (
	"net/http"
	"time"
)

// RequestMetrics records each HTTP request: the route pattern that
// served it, its status and how long it took. cmd/lull wires in
// lull's Prometheus metrics.
type RequestMetrics interface {
	Request(pattern string, status int, took time.Duration)
}

// countRequests reports every request to s.Metrics by the mux pattern
// that matched it ("GET /api/v1/batches/{id}"), never by its path, so
// that the number of series stays bounded whatever paths clients send.
// The ServeMux sets r.Pattern on the request it is handed, which is this
// one: nothing between here and the mux makes a copy. A request no
// pattern matched is reported with an empty pattern.
func (s *Server) countRequests(next http.Handler) http.Handler {
	if s.Metrics == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(sw, r)
		s.Metrics.Request(r.Pattern, sw.status, time.Since(start))
	})
}

// statusWriter remembers the status a handler answered with. Unwrap
// lets http.ResponseController reach the connection beneath, which the
// feed stream needs to flush and to set its write deadlines.
type statusWriter struct {
	http.ResponseWriter
	status      int
	wroteHeader bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wroteHeader && code >= 200 {
		w.status, w.wroteHeader = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.wroteHeader = true
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
