// Package metrics counts what lull does, for Prometheus: events and
// notifications taken in, batches opened, flushes and deliveries by
// outcome, how late emails leave, and SMTP errors by class. The batching
// engine and the flush worker report to it; cmd/lull serves it on its own
// listen address (LULL_METRICS_ADDR), away from the public API, since the
// numbers describe the whole installation and need no login to scrape.
//
// Every method is safe on a nil *Metrics, so code that runs without
// metrics (tests, commands) need not care.
package metrics

import (
	"errors"
	"net/http"
	"time"

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
}

// New builds the collectors and registers them.
func New() *Metrics {
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
	}
	m.registry.MustRegister(m.events, m.notifications, m.batchesOpened, m.flushes, m.deliveries, m.lateness, m.smtpErrors,
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

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{})
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
