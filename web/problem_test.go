package web_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
)

// A client that hangs up mid-request is not an internal error: lull must
// not log one (an operator would be paged for a client's timeout), and
// the status it records is 499, not 500.
func TestClientGoneIsNotAnInternalError(t *testing.T) {
	t.Parallel()
	a := setupAPI(t)
	var logs bytes.Buffer
	a.web.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	req := httptest.NewRequestWithContext(ctx, "POST", "/api/v1/events", strings.NewReader(`{"type":"comment","recipients":["bob"]}`))
	req.Header.Set("Authorization", "Bearer "+testKey)
	rec := httptest.NewRecorder()
	a.web.Handler().ServeHTTP(rec, req)
	if rec.Code != 499 {
		t.Errorf("a request whose client went away answered %d, want 499", rec.Code)
	}
	if strings.Contains(logs.String(), "level=ERROR") {
		t.Errorf("a client going away was logged as an error:\n%s", logs.String())
	}
}
