// Package metrics counts what lull does, for Prometheus: events and
// notifications taken in, batches opened, flushes and deliveries by
// outcome, how late emails leave, SMTP errors by class, HTTP requests by
// route and status, the job queue by state and the database connection
// pool. The batching engine, the flush worker and the HTTP server report
// to it; the queue and the pool are read when scraped. cmd/lull serves it
// on its own listen address (LULL_METRICS_ADDR), away from the public
// API, since the numbers describe the whole installation and need no
// login to scrape.
//
// Every method is safe on a nil *Metrics, so code that runs without
// metrics (tests, commands) need not care.
package metrics

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/lull-dev/lull/mail"
)

// Flush outcomes: how one run of a flush job ended.
const (
	FlushSent     = "sent"     // the email was handed over
	FlushCanceled = "canceled" // nothing left to send (muted, retracted, no address ...)
	FlushSnoozed  = "snoozed"  // not due yet: the window slid
	FlushSkipped  = "skipped"  // already flushed, or another job owns it
	FlushRetry    = "retry"    // a temporary send failure; River retries
	FlushFailed   = "failed"   // a permanent failure, or the last attempt
	FlushError    = "error"    // the job itself failed (database, rendering)
)

// Delivery outcomes: one attempt to hand an email over.
const (
	DeliverySent      = "sent"
	DeliveryTemporary = "temporary_failure"
	DeliveryPermanent = "permanent_failure"
)

// Metrics holds lull's collectors in a registry of its own (no global
// state), with Go runtime and process metrics beside them.
type Metrics struct {
	registry      *prometheus.Registry
	events        prometheus.Counter
	notifications *prometheus.CounterVec
	batchesOpened prometheus.Counter
	flushes       *prometheus.CounterVec
	deliveries    *prometheus.CounterVec
	lateness      prometheus.Histogram
	smtpErrors    *prometheus.CounterVec
	requests      *prometheus.CounterVec
	durations     *prometheus.HistogramVec
}

// New builds the collectors and registers them. version is lull's own
// (cmd/lull's versionString), for lull_build_info.
func New(version string) *Metrics {
	m := &Metrics{
		registry: prometheus.NewRegistry(),
		events: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lull_events_ingested_total",
			Help: "Events accepted and stored (replays of an idempotency key not counted).",
		}),
		notifications: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lull_notifications_ingested_total",
			Help: "Notifications from accepted events: batched, or suppressed by a preference or an inactive recipient.",
		}, []string{"outcome"}),
		batchesOpened: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "lull_batches_opened_total",
			Help: "Batches opened by ingested notifications.",
		}),
		flushes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lull_flushes_total",
			Help: "Flush job runs by outcome: sent, canceled, snoozed, skipped, retry, failed, error.",
		}, []string{"outcome"}),
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lull_deliveries_total",
			Help: "Attempts to hand an email to the mail server or outbox, by outcome.",
		}, []string{"outcome"}),
		lateness: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "lull_delivery_lateness_seconds",
			Help:    "How long after its batch closed an email was sent (sent_at - closes_at), retries included.",
			Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600},
		}),
		smtpErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lull_smtp_errors_total",
			Help: "Failed sends by class: 4xx and 5xx server answers, network (no answer), other.",
		}, []string{"class"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "lull_http_requests_total",
			Help: "HTTP requests by the route pattern that served them (\"unmatched\" when none did) and status code.",
		}, []string{"route", "code"}),
		durations: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "lull_http_request_duration_seconds",
			Help:    "How long HTTP requests took, by route pattern; a feed stream counts when it ends.",
			Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10},
		}, []string{"route"}),
	}
	buildInfo := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "lull_build_info",
		Help: "Always 1; its labels say which lull runs: the version, the Go release that built it and the VCS revision.",
	}, []string{"version", "goversion", "revision"})
	buildInfo.WithLabelValues(version, runtime.Version(), revision()).Set(1)
	m.registry.MustRegister(m.events, m.notifications, m.batchesOpened, m.flushes, m.deliveries, m.lateness, m.smtpErrors,
		m.requests, m.durations, buildInfo,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// Outcomes show as 0 from the start, so rates and alerts need not
	// wait for the first failure to exist.
	for _, o := range []string{"batched", "suppressed"} {
		m.notifications.WithLabelValues(o)
	}
	for _, o := range []string{FlushSent, FlushCanceled, FlushSnoozed, FlushSkipped, FlushRetry, FlushFailed, FlushError} {
		m.flushes.WithLabelValues(o)
	}
	for _, o := range []string{DeliverySent, DeliveryTemporary, DeliveryPermanent} {
		m.deliveries.WithLabelValues(o)
	}
	for _, c := range []string{"4xx", "5xx", "network", "other"} {
		m.smtpErrors.WithLabelValues(c)
	}
	return m
}

// revision is the VCS revision Go stamped into the binary, or "unknown".
func revision() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" {
				return s.Value
			}
		}
	}
	return "unknown"
}

// Handler serves the metrics in the Prometheus text format. A collector
// that fails (the database did not answer in time) leaves its series out
// rather than fail the whole scrape.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// WatchDatabase adds what is read from the database at each scrape: the
// connection pool's gauges, the job queue by state and kind, and the
// bounce and complaint rates (rates.go).
func (m *Metrics) WatchDatabase(pool *pgxpool.Pool) {
	m.registry.MustRegister(newPoolCollector(pool), newQueueCollector(pool), newRateCollector(pool))
}

// Request records one HTTP request by the route pattern that served it,
// never its path, so that the series stay few whatever clients send.
func (m *Metrics) Request(pattern string, status int, took time.Duration) {
	if m == nil {
		return
	}
	if pattern == "" {
		pattern = "unmatched"
	}
	m.requests.WithLabelValues(pattern, strconv.Itoa(status)).Inc()
	m.durations.WithLabelValues(pattern).Observe(took.Seconds())
}

// poolCollector reads the connection pool's figures when scraped.
type poolCollector struct {
	pool                             *pgxpool.Pool
	acquired, idle, total, max, wait *prometheus.Desc
}

func newPoolCollector(pool *pgxpool.Pool) *poolCollector {
	desc := func(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, nil, nil) }
	return &poolCollector{pool: pool,
		acquired: desc("lull_db_pool_acquired_connections", "Database connections in use by this process."),
		idle:     desc("lull_db_pool_idle_connections", "Database connections open and idle."),
		total:    desc("lull_db_pool_total_connections", "Database connections open: in use, idle and being opened."),
		max:      desc("lull_db_pool_max_connections", "The most database connections this process opens."),
		wait:     desc("lull_db_pool_acquire_waits_total", "Times a request for a connection had to wait because none was idle."),
	}
}

func (c *poolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.acquired, c.idle, c.total, c.max, c.wait} {
		ch <- d
	}
}

func (c *poolCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.pool.Stat()
	ch <- prometheus.MustNewConstMetric(c.acquired, prometheus.GaugeValue, float64(st.AcquiredConns()))
	ch <- prometheus.MustNewConstMetric(c.idle, prometheus.GaugeValue, float64(st.IdleConns()))
	ch <- prometheus.MustNewConstMetric(c.total, prometheus.GaugeValue, float64(st.TotalConns()))
	ch <- prometheus.MustNewConstMetric(c.max, prometheus.GaugeValue, float64(st.MaxConns()))
	ch <- prometheus.MustNewConstMetric(c.wait, prometheus.CounterValue, float64(st.EmptyAcquireCount()))
}

// queueCollector counts River's jobs by state and kind when scraped.
// Completed jobs are left out: they are history River keeps for a day,
// not queue, and the bulk of the table.
type queueCollector struct {
	pool *pgxpool.Pool
	jobs *prometheus.Desc
}

func newQueueCollector(pool *pgxpool.Pool) *queueCollector {
	return &queueCollector{pool: pool, jobs: prometheus.NewDesc("lull_jobs",
		"River jobs not completed, by state (available, scheduled, running, retryable, pending, discarded, cancelled) and kind, counted at each scrape.",
		[]string{"state", "kind"}, nil)}
}

// queueTimeout bounds the count, so a struggling database makes a scrape
// lack the queue rather than hang.
const queueTimeout = 2 * time.Second

func (c *queueCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.jobs }

func (c *queueCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), queueTimeout)
	defer cancel()
	// The states are listed, not "<> 'completed'", so that the count can
	// use River's index on state instead of reading every completed job.
	rows, err := c.pool.Query(ctx, `
		SELECT state::text, kind, count(*) FROM river_job
		WHERE state IN ('available', 'scheduled', 'running', 'retryable', 'pending', 'discarded', 'cancelled')
		GROUP BY state, kind`)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.jobs, fmt.Errorf("count jobs: %w", err))
		return
	}
	defer rows.Close()
	for rows.Next() {
		var state, kind string
		var n int64
		if err := rows.Scan(&state, &kind, &n); err != nil {
			ch <- prometheus.NewInvalidMetric(c.jobs, fmt.Errorf("count jobs: %w", err))
			return
		}
		ch <- prometheus.MustNewConstMetric(c.jobs, prometheus.GaugeValue, float64(n), state, kind)
	}
	if err := rows.Err(); err != nil {
		ch <- prometheus.NewInvalidMetric(c.jobs, fmt.Errorf("count jobs: %w", err))
	}
}

// Ingested records one stored event: its batched and suppressed
// notifications and the batches it opened.
func (m *Metrics) Ingested(batched, suppressed, opened int) {
	if m == nil {
		return
	}
	m.events.Inc()
	m.notifications.WithLabelValues("batched").Add(float64(batched))
	m.notifications.WithLabelValues("suppressed").Add(float64(suppressed))
	m.batchesOpened.Add(float64(opened))
}

// Flushed records how one flush job run ended.
func (m *Metrics) Flushed(outcome string) {
	if m == nil {
		return
	}
	m.flushes.WithLabelValues(outcome).Inc()
}

// Delivered records one send attempt: err is the sender's answer (nil
// when sent), final whether a failure is given up on, and late how long
// after the batch closed a sent email left.
func (m *Metrics) Delivered(err error, final bool, late time.Duration) {
	if m == nil {
		return
	}
	switch {
	case err == nil:
		m.deliveries.WithLabelValues(DeliverySent).Inc()
		m.lateness.Observe(max(late, 0).Seconds())
		return
	case final:
		m.deliveries.WithLabelValues(DeliveryPermanent).Inc()
	default:
		m.deliveries.WithLabelValues(DeliveryTemporary).Inc()
	}
	m.smtpErrors.WithLabelValues(errorClass(err)).Inc()
}

// errorClass sorts a send error by the server's answer.
func errorClass(err error) string {
	var se *mail.SendError
	switch {
	case !errors.As(err, &se):
		return "other"
	case se.Code >= 500:
		return "5xx"
	case se.Code >= 400:
		return "4xx"
	case se.Code == 0:
		return "network"
	}
	return "other"
}
