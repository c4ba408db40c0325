package bounce

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"regexp"
	"time"
)

// maxWebhookBytes bounds a webhook body. SNS messages are at most 256 KiB
// and the other services send a few kilobytes; SendGrid batches events,
// but not a megabyte of them.
const maxWebhookBytes = 1 << 20

// maxSkew is how far a signed timestamp may lie from now. It keeps a
// captured request from being replayed later; within it a replay changes
// nothing, because Sink.Record is idempotent.
const maxSkew = 5 * time.Minute

// errUnsigned is wrapped by every decoder's refusal of a request whose
// signature, credentials or timestamp do not hold. Field names where it
// was found.
type signatureError struct {
	Field, Message string
}

func (e *signatureError) Error() string { return e.Field + ": " + e.Message }

// payloadError is a signed request whose body lull cannot read.
type payloadError struct {
	Field, Message string
}

func (e *payloadError) Error() string { return e.Field + ": " + e.Message }

// decoder verifies one service's request and reads its reports.
type decoder interface {
	decode(ctx context.Context, r *http.Request, body []byte, now time.Time) ([]Report, error)
}

// WebhookConfig holds each service's verification secret; a service
// without one is not served (404).
type WebhookConfig struct {
	// SESTopics are the SNS topic ARNs allowed to post
	// (LULL_WEBHOOK_SES_TOPIC_ARN). Anyone can sign SNS messages from a
	// topic of their own, so the signature alone proves nothing.
	SESTopics []string
	// SESConfirm makes lull visit a subscription's SubscribeURL itself
	// (LULL_WEBHOOK_SES_CONFIRM); otherwise it is logged for the operator.
	SESConfirm bool
	// Certs fetches SNS signing certificates; nil uses the network, only
	// for https URLs on amazonaws.com hosts.
	Certs CertFetcher
	// PostmarkToken is the basic-auth password or X-Lull-Token header
	// Postmark must send (LULL_WEBHOOK_POSTMARK_TOKEN).
	PostmarkToken string
	// MailgunKey is the HTTP webhook signing key (LULL_WEBHOOK_MAILGUN_KEY).
	MailgunKey string
	// SendGridKey is the Event Webhook's verification public key, base64
	// as SendGrid shows it (LULL_WEBHOOK_SENDGRID_KEY).
	SendGridKey string
	// ResendSecret is the webhook signing secret, whsec_...
	// (LULL_WEBHOOK_RESEND_SECRET).
	ResendSecret string
}

// Webhooks serves POST /webhooks/{service} for the email services
// configured: it verifies each request as its service signs it, reads the
// bounces and complaints in it into Reports and records them. A refused
// request gets problem+json and a log line, and records nothing.
type Webhooks struct {
	services map[string]decoder
	sink     Sink
	logger   *slog.Logger
	now      func() time.Time
}

// NewWebhooks checks cfg's keys and builds the handler; v reads return
// paths out of services that report the envelope sender.
func NewWebhooks(cfg WebhookConfig, v VERP, sink Sink, logger *slog.Logger) (*Webhooks, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	w := &Webhooks{services: map[string]decoder{}, sink: sink, logger: logger, now: time.Now}
	if len(cfg.SESTopics) > 0 {
		certs := cfg.Certs
		if certs == nil {
			certs = newCertCache(fetchCert)
		}
		w.services["ses"] = &ses{topics: cfg.SESTopics, confirm: cfg.SESConfirm, certs: certs, verp: v, logger: logger}
	}
	if cfg.PostmarkToken != "" {
		w.services["postmark"] = postmark{token: cfg.PostmarkToken}
	}
	if cfg.MailgunKey != "" {
		w.services["mailgun"] = mailgun{key: []byte(cfg.MailgunKey), verp: v, tokens: &seenTokens{}}
	}
	if cfg.SendGridKey != "" {
		d, err := newSendGrid(cfg.SendGridKey)
		if err != nil {
			return nil, err
		}
		w.services["sendgrid"] = d
	}
	if cfg.ResendSecret != "" {
		d, err := newResend(cfg.ResendSecret)
		if err != nil {
			return nil, err
		}
		w.services["resend"] = d
	}
	return w, nil
}

// Services names the services served, for the startup log.
func (w *Webhooks) Services() []string {
	var names []string
	for _, n := range []string{"ses", "postmark", "mailgun", "sendgrid", "resend"} {
		if w.services[n] != nil {
			names = append(names, n)
		}
	}
	return names
}

func (w *Webhooks) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	name := r.PathValue("service")
	d, ok := w.services[name]
	if !ok {
		writeProblem(rw, http.StatusNotFound, "not-found", "Not found", "No webhook is configured for this service.", "service", name)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(rw, r.Body, maxWebhookBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeProblem(rw, http.StatusRequestEntityTooLarge, "too-large", "Request body too large", fmt.Sprintf("Webhook bodies are limited to %d MiB.", maxWebhookBytes>>20), "body", "too large")
			return
		}
		writeProblem(rw, http.StatusBadRequest, "bad-request", "Unreadable body", "The request body could not be read.", "body", err.Error())
		return
	}
	reports, err := d.decode(r.Context(), r, body, w.now())
	var se *signatureError
	var pe *payloadError
	switch {
	case errors.As(err, &se):
		w.logger.Warn("webhook: refused an unverified request", "service", name, "remote", r.RemoteAddr, "err", err)
		writeProblem(rw, http.StatusUnauthorized, "unauthorized", "Unauthorized", "The request's signature does not hold.", se.Field, se.Message)
		return
	case errors.As(err, &pe):
		w.logger.Warn("webhook: refused an unreadable payload", "service", name, "remote", r.RemoteAddr, "err", err)
		writeProblem(rw, http.StatusBadRequest, "invalid-payload", "Invalid payload", "The payload is not one this service sends.", pe.Field, pe.Message)
		return
	case err != nil:
		w.logger.Error("webhook", "service", name, "err", err)
		writeProblem(rw, http.StatusServiceUnavailable, "unavailable", "Service unavailable", "Try again shortly.", "", "")
		return
	}
	for _, rep := range reports {
		rep.Source = name
		err := w.sink.Record(r.Context(), rep)
		if errors.Is(err, ErrRefused) {
			// A report that can never be recorded is not the service's
			// to send again.
			w.logger.Warn("webhook: report refused", "service", name, "kind", rep.Kind, "err", err)
			continue
		}
		if err != nil {
			// The service redelivers on a 5xx; Record is idempotent for
			// the reports already recorded.
			w.logger.Error("webhook: record report", "service", name, "err", err)
			writeProblem(rw, http.StatusServiceUnavailable, "unavailable", "Service unavailable", "Try again shortly.", "", "")
			return
		}
		w.logger.Info("webhook: report", "service", name, "kind", rep.Kind, "status", rep.Status, "address", rep.Address, "batch", rep.BatchID)
	}
	rw.WriteHeader(http.StatusNoContent)
}

// writeProblem answers with RFC 9457 problem+json in lull's API shape,
// naming the field (a header or a body field) that was refused.
func writeProblem(w http.ResponseWriter, status int, slug, title, detail, field, message string) {
	type fieldError struct {
		Field   string `json:"field"`
		Message string `json:"message"`
	}
	p := struct {
		Type   string       `json:"type"`
		Title  string       `json:"title"`
		Status int          `json:"status"`
		Detail string       `json:"detail,omitempty"`
		Errors []fieldError `json:"errors,omitempty"`
	}{Type: "https://lull.dev/problems/" + slug, Title: title, Status: status, Detail: detail}
	if field != "" {
		p.Errors = []fieldError{{Field: field, Message: clip(message)}}
	}
	w.Header().Set("Content-Type", "application/problem+json")
	if status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "5")
	}
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(p)
}

var enhancedCode = regexp.MustCompile(`\b[245]\.[0-9]{1,3}\.[0-9]{1,3}\b`)

// statusIn finds an enhanced status code in a diagnostic text, or "".
func statusIn(s string) string { return enhancedCode.FindString(s) }

// address checks an address a service reports; "" when it is none.
func address(s string) string { return recipientAddress(s) }

// eventTime is when the service says an event happened, or now when it
// says nothing readable. A report without a batch is known again by this
// time (db.RecordBounce), so it must come from the event, not from the
// request: a service redelivering a webhook after a 5xx, or a replay
// inside the signature's window, must not count a soft bounce twice.
func eventTime(rfc3339 string, unix float64, now time.Time) time.Time {
	if t, err := time.Parse(time.RFC3339Nano, rfc3339); err == nil {
		return t.UTC()
	}
	if unix > 0 && unix < 1e11 {
		// Microseconds, as PostgreSQL keeps them; a float's nanoseconds
		// are noise.
		return time.UnixMicro(int64(math.Round(unix * 1e6))).UTC()
	}
	return now
}

// withinSkew checks a signed Unix timestamp against now.
func withinSkew(field string, ts int64, now time.Time, skew time.Duration) error {
	t := time.Unix(ts, 0)
	if t.Before(now.Add(-skew)) || t.After(now.Add(skew)) {
		return &signatureError{field, "timestamp too far from now"}
	}
	return nil
}
