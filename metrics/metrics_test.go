package metrics

import (
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/lull-dev/lull/mail"
)

// TestMetricsCountAndScrape reports one of everything and scrapes the
// handler: the answer is the Prometheus text format with each count, the
// outcomes not seen yet show as 0, SMTP errors are classed by the
// server's answer, and a nil *Metrics counts nothing without failing.
func TestMetricsCountAndScrape(t *testing.T) {
	t.Parallel()
	var none *Metrics
	none.Ingested(1, 1, 1)
	none.Flushed(FlushSent)
	none.Delivered(nil, true, time.Second)

	m := New()
	m.Ingested(3, 1, 2)
	m.Ingested(1, 0, 0)
	m.Flushed(FlushSent)
	m.Flushed(FlushSnoozed)
	m.Delivered(nil, true, 1500*time.Millisecond)
	m.Delivered(&mail.SendError{Temporary: true, Code: 451}, false, 0)
	m.Delivered(&mail.SendError{Code: 550}, true, 0)
	m.Delivered(&mail.SendError{Temporary: true, Err: errors.New("connection refused")}, false, 0)
	m.Delivered(errors.New("outbox full"), false, 0)

	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	text := string(body)
	if ct := rec.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Fatalf("content type %q, want the text format", ct)
	}
	for _, line := range []string{
		"lull_events_ingested_total 2",
		`lull_notifications_ingested_total{outcome="batched"} 4`,
		`lull_notifications_ingested_total{outcome="suppressed"} 1`,
		"lull_batches_opened_total 2",
		`lull_flushes_total{outcome="sent"} 1`,
		`lull_flushes_total{outcome="snoozed"} 1`,
		`lull_flushes_total{outcome="failed"} 0`,
		`lull_deliveries_total{outcome="sent"} 1`,
		`lull_deliveries_total{outcome="temporary_failure"} 3`,
		`lull_deliveries_total{outcome="permanent_failure"} 1`,
		`lull_delivery_lateness_seconds_bucket{le="1"} 0`,
		`lull_delivery_lateness_seconds_bucket{le="2.5"} 1`,
		"lull_delivery_lateness_seconds_sum 1.5",
		`lull_smtp_errors_total{class="4xx"} 1`,
		`lull_smtp_errors_total{class="5xx"} 1`,
		`lull_smtp_errors_total{class="network"} 1`,
		`lull_smtp_errors_total{class="other"} 1`,
		"# TYPE lull_delivery_lateness_seconds histogram",
		"go_goroutines ",
		"process_resident_memory_bytes ",
	} {
		if !strings.Contains(text, line) {
			t.Errorf("scrape lacks %q", line)
		}
	}
	if t.Failed() {
		t.Log(text)
	}
}
