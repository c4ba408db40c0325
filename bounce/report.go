// Package bounce hears what happens to an email after the SMTP server
// accepted it: delivery status notifications (RFC 3464), complaints from
// feedback loops (RFC 5965 ARF) and the same news from email services'
// webhooks. Every source turns what it hears into a Report and hands it to
// a Sink, which decides what the sender does about it (the suppression
// list in db).
package bounce

import (
	"context"
	"errors"
	"time"
)

// Kind is what a report says about an address.
type Kind string

const (
	// Hard is a permanent failure (a 5.x.x status): the address cannot
	// receive mail, so it is suppressed at once.
	Hard Kind = "hard"
	// Soft is a temporary failure (a 4.x.x status): it scores, and only
	// enough soft bounces close together suppress the address.
	Soft Kind = "soft"
	// Complaint is a recipient marking the email as spam.
	Complaint Kind = "complaint"
)

// Report is one bounce or complaint about one address.
type Report struct {
	Address string // the recipient address the report is about, as sent
	Kind    Kind
	// Status is the enhanced status code when known ("5.1.1"), or the
	// complaint's feedback type ("abuse").
	Status string
	// BatchID is the batch whose email bounced, read from the VERP return
	// path or the service's message reference; 0 when unknown.
	BatchID int64
	// Source names where the report came from: "smtp", "ses", "postmark",
	// "mailgun", "sendgrid", "resend" or "api".
	Source string
	// Detail is the human-readable diagnostic, clipped to a sane length.
	Detail string
	At     time.Time
}

// ErrRefused is wrapped by a Sink's error for a report that can never be
// recorded (an address the batch was not sent to, a malformed address):
// the receiver answers it with a permanent refusal and a webhook with
// success, so neither the mail server nor the service sends it again.
var ErrRefused = errors.New("report refused")

// Sink records reports. Record must be idempotent for a repeated report
// (services redeliver webhooks; mail servers resend notifications).
type Sink interface {
	Record(ctx context.Context, r Report) error
}
