package web

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestUnavailablePageNamesNoLull: a recipient who opens an unsubscribe or
// settings link while the database is down gets the error page; it said
// "lull cannot reach its database", naming lull to the host product's
// users.
func TestUnavailablePageNamesNoLull(t *testing.T) {
	t.Parallel()
	s := &Server{Logger: slog.New(slog.DiscardHandler)}
	s.init()
	w := httptest.NewRecorder()
	s.pageError(w, httptest.NewRequest("GET", "/unsubscribe?token=x", nil), context.DeadlineExceeded)
	if body := w.Body.String(); w.Code != 503 || strings.Contains(strings.ToLower(body), "lull") {
		t.Errorf("%d:\n%s", w.Code, body)
	}
}
