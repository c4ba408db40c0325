package main

import (
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"

	"github.com/lull-dev/lull/db/dbtest"
)

// freeAddr returns a loopback address with a port free at the moment.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// TestMetricsAfterEventAndFlush boots lull with LULL_METRICS_ADDR, posts
// an event for an immediate type and scrapes /metrics until the flush has
// delivered it: the event, its notification, the batch it opened, the
// flush, the delivery and its lateness are all counted. So are the build,
// the API requests by route pattern and status, the flush job waiting
// for a cool-down batch, and the connection pool; the whole scrape passes
// promtool's checks. /metrics is not served on the public address.
func TestMetricsAfterEventAndFlush(t *testing.T) {
	t.Parallel()
	const key = "lull_metrics_test_key_0123456789"
	metricsAddr := freeAddr(t)
	base := boot(t, map[string]string{"DATABASE_URL": dbtest.NewURL(t), "LULL_ADDR": "127.0.0.1:0",
		"LULL_METRICS_ADDR": metricsAddr, "LULL_API_KEY": key})
	call := func(method, path, body string, want int) {
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("%s %s = %d: %s", method, path, resp.StatusCode, out)
		}
	}
	scrape := func() string {
		resp, err := http.Get("http://" + metricsAddr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	if !strings.Contains(scrape(), "lull_events_ingested_total 0") {
		t.Fatal("a fresh server does not report zero events")
	}
	call("PUT", "/api/v1/types/comment", `{"name":"Comments","default_mode":"immediate"}`, 200)
	call("POST", "/api/v1/events", `{"type":"comment","actor":{"id":"a","name":"Alice"},"object":{"title":"Q3 plan"},
		"recipients":[{"id":"u_bob","email":"bob@example.com"}]}`, 202)
	call("PUT", "/api/v1/types/later", `{"default_mode":"cooldown","window":"1h"}`, 200)
	call("POST", "/api/v1/events", `{"type":"later","recipients":["u_bob"]}`, 202)
	call("GET", "/api/v1/batches/nope", "", 404)

	deadline := time.Now().Add(30 * time.Second)
	text := scrape()
	// The flush is counted last, after the delivery is recorded.
	for !strings.Contains(text, `lull_flushes_total{outcome="sent"} 1`) {
		if time.Now().After(deadline) {
			t.Fatalf("no delivery counted within 30s:\n%s", text)
		}
		time.Sleep(100 * time.Millisecond)
		text = scrape()
	}
	for _, line := range []string{
		"lull_events_ingested_total 2",
		`lull_notifications_ingested_total{outcome="batched"} 2`,
		"lull_batches_opened_total 2",
		`lull_deliveries_total{outcome="sent"} 1`,
		"lull_delivery_lateness_seconds_count 1",
		`lull_smtp_errors_total{class="5xx"} 0`,
		`lull_build_info{goversion="` + runtime.Version() + `",`,
		`version="` + versionString() + `"} 1`,
		`lull_http_requests_total{code="200",route="PUT /api/v1/types/{key}"} 2`,
		`lull_http_requests_total{code="202",route="POST /api/v1/events"} 2`,
		`lull_http_requests_total{code="404",route="GET /api/v1/batches/{id}"} 1`,
		`lull_http_request_duration_seconds_count{route="POST /api/v1/events"} 2`,
		`lull_jobs{kind="flush_batch",state="scheduled"} 1`,
		"lull_db_pool_max_connections ",
		"lull_db_pool_acquired_connections ",
	} {
		if !strings.Contains(text, line) {
			t.Errorf("metrics lack %q", line)
		}
	}
	if strings.Contains(text, "/api/v1/batches/nope") {
		t.Error("a request is counted by its path, not its route pattern")
	}
	problems, err := promlint.New(strings.NewReader(text)).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promtool check metrics: %s: %s", p.Metric, p.Text)
	}
	if got := status(t, base+"/metrics"); got != http.StatusNotFound {
		t.Errorf("GET /metrics on the public address = %d, want 404", got)
	}
}
