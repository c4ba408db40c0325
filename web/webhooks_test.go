package web_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lull-dev/lull/bounce"
	"github.com/lull-dev/lull/web"
)

type recordingSink struct {
	mu      sync.Mutex
	reports []bounce.Report
}

func (s *recordingSink) Record(_ context.Context, r bounce.Report) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reports = append(s.reports, r)
	return nil
}

// TestWebhooksRoute: POST /webhooks/{service} reaches the bounce webhooks
// without an API key, as services post from their own servers (without
// the Origin or Fetch metadata headers the cross-site check refuses), and
// answers problem+json when none are configured.
func TestWebhooksRoute(t *testing.T) {
	t.Parallel()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	post := func(s *web.Server, body string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/webhooks/mailgun", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, req)
		return rec
	}

	bare := &web.Server{Logger: logger, BaseURL: "http://lull.test"}
	if rec := post(bare, "{}"); rec.Code != http.StatusNotFound || rec.Header().Get("Content-Type") != "application/problem+json" {
		t.Fatalf("without webhooks: %d %s", rec.Code, rec.Header().Get("Content-Type"))
	}

	sink := &recordingSink{}
	wh, err := bounce.NewWebhooks(bounce.WebhookConfig{MailgunKey: "key"}, bounce.VERP{}, sink, logger)
	if err != nil {
		t.Fatal(err)
	}
	s := &web.Server{Logger: logger, BaseURL: "http://lull.test", Webhooks: wh}
	ts, token := strconv.FormatInt(time.Now().Unix(), 10), "0123456789abcdef0123456789abcdef0123456789abcdef01"
	mac := hmac.New(sha256.New, []byte("key"))
	mac.Write([]byte(ts + token))
	body := `{"signature":{"timestamp":"` + ts + `","token":"` + token + `","signature":"` + hex.EncodeToString(mac.Sum(nil)) +
		`"},"event-data":{"event":"complained","recipient":"alice@example.com"}}`
	if rec := post(s, body); rec.Code != http.StatusNoContent {
		t.Fatalf("signed webhook: %d %s", rec.Code, rec.Body)
	}
	if len(sink.reports) != 1 || sink.reports[0].Kind != bounce.Complaint {
		t.Fatalf("reports %+v", sink.reports)
	}
}
