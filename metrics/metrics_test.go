package metrics

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/lull-dev/lull/db/dbtest"
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

	m := New("v1.2.3")
	m.Request("GET /api/v1/batches/{id}", 200, 30*time.Millisecond)
	m.Request("GET /api/v1/batches/{id}", 200, 2*time.Second)
	m.Request("", 404, time.Millisecond)
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
		`lull_build_info{goversion="` + runtime.Version() + `",revision="`,
		`",version="v1.2.3"} 1`,
		`lull_http_requests_total{code="200",route="GET /api/v1/batches/{id}"} 2`,
		`lull_http_requests_total{code="404",route="unmatched"} 1`,
		`lull_http_request_duration_seconds_bucket{route="GET /api/v1/batches/{id}",le="0.05"} 1`,
		`lull_http_request_duration_seconds_count{route="GET /api/v1/batches/{id}"} 2`,
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
	lint(t, m)
}

// lint runs the checks of promtool check metrics on what m serves.
func lint(t *testing.T, m *Metrics) {
	t.Helper()
	problems, err := testutil.GatherAndLint(m.registry)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
}

// TestMetricsReadTheDatabase: the job queue is counted by state and kind
// and the connection pool's figures are read, at each scrape.
func TestMetricsReadTheDatabase(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	for _, state := range []string{"scheduled", "scheduled", "retryable", "completed"} {
		if _, err := d.Pool.Exec(context.Background(), `INSERT INTO river_job (kind, args, state, max_attempts, scheduled_at, finalized_at)
			VALUES ('flush_batch', '{}', $1::river_job_state, 8, now() + interval '1 hour', CASE WHEN $1::text = 'completed' THEN now() END)`, state); err != nil {
			t.Fatal(err)
		}
	}
	m := New("dev")
	m.WatchDatabase(d.Pool)
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	text := rec.Body.String()
	for _, line := range []string{
		`lull_jobs{kind="flush_batch",state="scheduled"} 2`,
		`lull_jobs{kind="flush_batch",state="retryable"} 1`,
		"lull_db_pool_acquired_connections ",
		"lull_db_pool_idle_connections ",
		"lull_db_pool_total_connections ",
		fmt.Sprintf("lull_db_pool_max_connections %d", d.Pool.Config().MaxConns),
		"lull_db_pool_acquire_waits_total ",
	} {
		if !strings.Contains(text, line) {
			t.Errorf("scrape lacks %q", line)
		}
	}
	if strings.Contains(text, `state="completed"`) {
		t.Error("completed jobs are counted")
	}
	if t.Failed() {
		t.Log(text)
	}
	lint(t, m)
}
