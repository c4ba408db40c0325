package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"regexp"
	"strings"

	"github.com/lull-dev/lull/bounce"
	"github.com/lull-dev/lull/mail"
)

// BounceConfig is what lull needs to hear bounces and complaints and to
// send mail receivers trust. Everything is optional; see
// docs/deliverability.md.
type BounceConfig struct {
	Domain       string // LULL_BOUNCE_DOMAIN: the VERP return path's domain
	Addr         string // LULL_BOUNCE_ADDR: where the bounce SMTP receiver listens
	DKIMKey      string
	DKIMSelector string
	DKIMDomain   string
	FeedbackID   string
	Webhooks     bounce.WebhookConfig
}

func (b *BounceConfig) vars() []configVar {
	str := func(p *string) func(string) error { return func(s string) error { *p = s; return nil } }
	return []configVar{
		{"LULL_BOUNCE_DOMAIN", "", "domain of each email's return path bounces+<token>@DOMAIN; its MX must reach LULL_BOUNCE_ADDR; empty: the From address", str(&b.Domain)},
		{"LULL_BOUNCE_ADDR", "", "listen address of the SMTP receiver for bounce mail, such as :25; empty: none", str(&b.Addr)},
		{"LULL_DKIM_KEY", "", "DKIM private key, PEM text or the path of a PEM file; empty: no signing", str(&b.DKIMKey)},
		{"LULL_DKIM_SELECTOR", "", "DKIM selector; the key is published at SELECTOR._domainkey.DOMAIN", str(&b.DKIMSelector)},
		{"LULL_DKIM_DOMAIN", "", "DKIM signing domain (d=), normally the From address's domain", str(&b.DKIMDomain)},
		{"LULL_FEEDBACK_ID", "", "sender ID in the Feedback-ID header (notifications:ID) for Gmail's feedback loop; empty: no header", str(&b.FeedbackID)},
		{"LULL_WEBHOOK_SES_TOPIC_ARN", "", "SNS topic ARNs (comma-separated) allowed to post SES notifications to /webhooks/ses", func(s string) error {
			b.Webhooks.SESTopics = nil
			for _, t := range strings.Split(s, ",") {
				if t = strings.TrimSpace(t); t != "" {
					b.Webhooks.SESTopics = append(b.Webhooks.SESTopics, t)
				}
			}
			return nil
		}},
		{"LULL_WEBHOOK_SES_CONFIRM", "false", "confirm SNS subscriptions by visiting their SubscribeURL; false: the URL is logged", func(s string) error {
			switch s {
			case "true", "false":
				b.Webhooks.SESConfirm = s == "true"
				return nil
			}
			return errors.New("must be true or false")
		}},
		{"LULL_WEBHOOK_POSTMARK_TOKEN", "", "secret Postmark sends as basic-auth password or X-Lull-Token header", str(&b.Webhooks.PostmarkToken)},
		{"LULL_WEBHOOK_MAILGUN_KEY", "", "Mailgun HTTP webhook signing key", str(&b.Webhooks.MailgunKey)},
		{"LULL_WEBHOOK_SENDGRID_KEY", "", "SendGrid signed Event Webhook verification key (base64 public key)", str(&b.Webhooks.SendGridKey)},
		{"LULL_WEBHOOK_RESEND_SECRET", "", "Resend webhook signing secret (whsec_...)", str(&b.Webhooks.ResendSecret)},
	}
}

// check refuses settings that cannot work together.
func (b *BounceConfig) check() error {
	if b.Addr != "" && b.Domain == "" {
		return errors.New("LULL_BOUNCE_ADDR needs LULL_BOUNCE_DOMAIN: the receiver accepts mail only for its return paths")
	}
	if b.DKIMKey == "" && (b.DKIMSelector != "" || b.DKIMDomain != "") {
		return errors.New("LULL_DKIM_SELECTOR and LULL_DKIM_DOMAIN need LULL_DKIM_KEY")
	}
	// A typo here would not fail until every email did: a return path
	// go-mail cannot write, or a DKIM tag list a stray ";" breaks so that
	// every signature fails.
	for _, v := range []struct{ name, value string }{
		{"LULL_BOUNCE_DOMAIN", b.Domain}, {"LULL_DKIM_DOMAIN", b.DKIMDomain}, {"LULL_DKIM_SELECTOR", b.DKIMSelector},
	} {
		if v.value != "" && (len(v.value) > 253 || !dnsName.MatchString(v.value)) {
			return fmt.Errorf("%s must be a domain name, such as bounces.example.com; got %q", v.name, v.value)
		}
	}
	// Google reads a SenderId of 5 to 15 characters, and a colon would
	// start another field.
	if b.FeedbackID != "" && !senderID.MatchString(b.FeedbackID) {
		return errors.New("LULL_FEEDBACK_ID must be 5 to 15 letters, digits, dots, dashes or underscores")
	}
	return nil
}

var senderID = regexp.MustCompile(`^[A-Za-z0-9._-]{5,15}$`)

// dnsName is a domain name of letters, digits and hyphens (IDNs in their
// xn-- form), as DNS and SMTP accept one.
var dnsName = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$`)

// envelope is what the SMTP sender adds to each email.
func (b *BounceConfig) envelope(secret []byte) (mail.Envelope, error) {
	e := mail.Envelope{FeedbackID: mail.FeedbackID(b.FeedbackID)}
	if b.Domain != "" {
		e.ReturnPath = bounce.VERP{Domain: b.Domain, Secret: secret}.Address
	}
	if b.DKIMKey != "" {
		d, err := mail.NewDKIM(b.DKIMKey, b.DKIMSelector, b.DKIMDomain)
		if err != nil {
			return mail.Envelope{}, err
		}
		e.DKIM = d
	}
	return e, nil
}

// startBounceReceiver listens on LULL_BOUNCE_ADDR and serves bounce mail
// into sink until ctx ends, returning the address it listens on; it does
// nothing when LULL_BOUNCE_ADDR is unset.
func startBounceReceiver(ctx context.Context, b *BounceConfig, secret []byte, sink bounce.Sink, logger *slog.Logger) (string, error) {
	if b.Addr == "" {
		return "", nil
	}
	ln, err := net.Listen("tcp", b.Addr)
	if err != nil {
		return "", fmt.Errorf("listen on LULL_BOUNCE_ADDR %s: %w", b.Addr, err)
	}
	rc := bounce.NewReceiver(bounce.VERP{Domain: b.Domain, Secret: secret}, sink, logger)
	go func() {
		if err := rc.Serve(ln); err != nil {
			logger.Error("bounce receiver stopped", "err", err)
		}
	}()
	go func() {
		<-ctx.Done()
		rc.Close()
	}()
	logger.Info("bounce receiver listening", "addr", ln.Addr().String(), "domain", b.Domain)
	return ln.Addr().String(), nil
}
