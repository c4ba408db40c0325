// Package mailer hands rendered emails to a mail server. SMTP goes through
// go-mail with a small pool of reused connections, a rate limit and a
// concurrency cap; the built-in outbox (package jobs) needs no server.
package mailer

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/wneessen/go-mail"

	"github.com/lull-dev/lull/mailtemplates"
)

// Sender sends one rendered email.
type Sender interface {
	Send(ctx context.Context, m *mailtemplates.Message) error
}

// SendError is a failed send, classified: Temporary failures (4xx answers,
// network trouble) are worth retrying; permanent ones (5xx) are not, and
// Answer keeps what the server said for operators to read.
type SendError struct {
	Temporary bool
	Code      int
	Answer    string
	Err       error
}

func (e *SendError) Error() string {
	if e.Answer != "" {
		return e.Answer
	}
	return e.Err.Error()
}

func (e *SendError) Unwrap() error { return e.Err }

// IsTemporary reports whether err is worth retrying. Errors that are not
// a SendError (a context deadline, say) count as temporary.
func IsTemporary(err error) bool {
	var se *SendError
	if errors.As(err, &se) {
		return se.Temporary
	}
	return err != nil
}

// classify turns a go-mail error into a SendError.
func classify(err error) *SendError {
	var me *mail.SendError
	if errors.As(err, &me) {
		code := me.ErrorCode()
		answer := strings.TrimSpace(me.Error())
		if code != 0 && !strings.HasPrefix(answer, strconv.Itoa(code)) {
			answer = strconv.Itoa(code) + " " + answer
		}
		temp := me.IsTemp() || (code >= 400 && code < 500) || code == 0
		if code >= 500 {
			temp = false
		}
		return &SendError{Temporary: temp, Code: code, Answer: answer, Err: err}
	}
	return &SendError{Temporary: true, Err: err, Answer: err.Error()}
}

// clean removes CR, LF and other control characters, so nothing taken
// from an event can start a header of its own.
func clean(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
}

// Build turns m into a go-mail message: multipart/alternative text and
// HTML, the batch's Message-ID, and RFC 8058 one-click unsubscribe headers.
func Build(m *mailtemplates.Message) (*mail.Msg, error) {
	msg := mail.NewMsg()
	if err := msg.From(clean(m.From)); err != nil {
		return nil, fmt.Errorf("from %q: %w", m.From, err)
	}
	if err := msg.AddToFormat(clean(m.ToName), clean(m.To)); err != nil {
		return nil, fmt.Errorf("to %q: %w", m.To, err)
	}
	msg.Subject(clean(m.Subject))
	msg.SetMessageIDWithValue(strings.Trim(clean(m.MessageID), "<>"))
	date := m.Date
	if date.IsZero() {
		date = time.Now()
	}
	msg.SetDateWithValue(date)
	if m.UnsubscribeURL != "" {
		if err := msg.SetListUnsubscribeOneClick(m.UnsubscribeURL); err != nil {
			// A plain-http base URL (a local demo) is not RFC 8058's https,
			// but the headers still help a mail client find the link.
			msg.SetListUnsubscribe(m.UnsubscribeURL)
			msg.SetListUnsubscribePost()
		}
	}
	msg.SetBodyString(mail.TypeTextPlain, m.Text)
	msg.AddAlternativeString(mail.TypeTextHTML, m.HTML)
	return msg, nil
}

// Headers are the main headers the email carries, as the outbox and the
// preview show them.
func Headers(m *mailtemplates.Message) map[string]string {
	h := map[string]string{
		"From":         clean(m.From),
		"To":           clean(m.To),
		"Subject":      clean(m.Subject),
		"Message-ID":   "<" + strings.Trim(clean(m.MessageID), "<>") + ">",
		"Date":         m.Date.Format(time.RFC1123Z),
		"MIME-Version": "1.0",
		"Content-Type": "multipart/alternative",
	}
	if m.ToName != "" {
		h["To"] = fmt.Sprintf("%q <%s>", clean(m.ToName), clean(m.To))
	}
	if m.UnsubscribeURL != "" {
		h["List-Unsubscribe"] = "<" + m.UnsubscribeURL + ">"
		h["List-Unsubscribe-Post"] = "List-Unsubscribe=One-Click"
	}
	return h
}

// SMTPConfig configures the SMTP sender.
type SMTPConfig struct {
	// URL is smtp://user:pass@host:port (STARTTLS when offered),
	// smtps://... (TLS from the start), with ?starttls=required to refuse
	// a server without STARTTLS and ?insecure_skip_verify=true for a
	// self-signed test server, and ?insecure_auth=true to send the
	// password to a relay that offers no TLS at all (a local relay only).
	URL string
	// Rate is messages per second at most; 0 means no limit.
	Rate float64
	// Concurrency is how many connections may be open at once (default 4).
	Concurrency int
}

// SMTP sends over a pool of reused connections.
type SMTP struct {
	opts   []mail.Option
	host   string
	logger *slog.Logger
	slots  chan struct{}
	idle   chan *conn
	rate   *limiter
}

type conn struct {
	c    *mail.Client
	used time.Time
}

// NewSMTP parses cfg.URL and prepares the pool; no connection is made
// until the first Send.
func NewSMTP(cfg SMTPConfig, logger *slog.Logger) (*SMTP, error) {
	host, opts, err := ParseURL(cfg.URL)
	if err != nil {
		return nil, err
	}
	n := cfg.Concurrency
	if n <= 0 {
		n = 4
	}
	s := &SMTP{opts: opts, host: host, logger: logger, slots: make(chan struct{}, n), idle: make(chan *conn, n)}
	if cfg.Rate > 0 {
		s.rate = newLimiter(cfg.Rate)
	}
	return s, nil
}

// ParseURL reads an LULL_SMTP_URL into a host and go-mail options.
func ParseURL(raw string) (string, []mail.Option, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || (u.Scheme != "smtp" && u.Scheme != "smtps") {
		return "", nil, fmt.Errorf("LULL_SMTP_URL %q: want smtp://user:pass@host:port or smtps://...", raw)
	}
	host := u.Hostname()
	port := 587
	if u.Scheme == "smtps" {
		port = 465
	}
	if p := u.Port(); p != "" {
		if port, err = strconv.Atoi(p); err != nil {
			return "", nil, fmt.Errorf("LULL_SMTP_URL: bad port %q", p)
		}
	}
	q := u.Query()
	tlsConf := &tls.Config{ServerName: host, InsecureSkipVerify: q.Get("insecure_skip_verify") == "true"}
	opts := []mail.Option{mail.WithPort(port), mail.WithTimeout(30 * time.Second), mail.WithTLSConfig(tlsConf)}
	switch {
	case u.Scheme == "smtps":
		opts = append(opts, mail.WithSSL())
	case q.Get("starttls") == "required":
		opts = append(opts, mail.WithTLSPolicy(mail.TLSMandatory))
	default:
		opts = append(opts, mail.WithTLSPolicy(mail.TLSOpportunistic))
	}
	if u.User != nil && u.User.Username() != "" {
		pass, _ := u.User.Password()
		// Auto-discovery picks the strongest mechanism the server offers
		// and never sends a password in the clear; insecure_auth allows
		// PLAIN without TLS for a relay on a trusted network.
		auth := mail.SMTPAuthAutoDiscover
		if q.Get("insecure_auth") == "true" {
			auth = mail.SMTPAuthPlainNoEnc
		}
		opts = append(opts, mail.WithSMTPAuth(auth), mail.WithUsername(u.User.Username()), mail.WithPassword(pass))
	}
	return host, opts, nil
}

// Send delivers m over a pooled connection, dialling one when none is idle
// and dropping it after any error.
func (s *SMTP) Send(ctx context.Context, m *mailtemplates.Message) error {
	msg, err := Build(m)
	if err != nil {
		return &SendError{Err: err, Answer: err.Error()}
	}
	if s.rate != nil {
		if err := s.rate.wait(ctx); err != nil {
			return &SendError{Temporary: true, Err: err}
		}
	}
	select {
	case s.slots <- struct{}{}:
	case <-ctx.Done():
		return &SendError{Temporary: true, Err: ctx.Err()}
	}
	defer func() { <-s.slots }()
	c, err := s.get(ctx)
	if err != nil {
		return classify(err)
	}
	if err := c.c.Send(msg); err != nil {
		c.c.Close()
		return classify(err)
	}
	c.used = time.Now()
	select {
	case s.idle <- c:
	default:
		c.c.Close()
	}
	return nil
}

// get returns an idle connection still fresh enough to trust, or dials.
func (s *SMTP) get(ctx context.Context) (*conn, error) {
	for {
		select {
		case c := <-s.idle:
			if time.Since(c.used) < 30*time.Second {
				return c, nil
			}
			c.c.Close()
			continue
		default:
		}
		break
	}
	client, err := mail.NewClient(s.host, s.opts...)
	if err != nil {
		return nil, err
	}
	if err := client.DialWithContext(ctx); err != nil {
		return nil, err
	}
	return &conn{c: client, used: time.Now()}, nil
}

// Close closes idle connections.
func (s *SMTP) Close() {
	for {
		select {
		case c := <-s.idle:
			c.c.Close()
		default:
			return
		}
	}
}

// limiter is a token bucket allowing rate sends per second with a burst of
// one second's worth.
type limiter struct {
	mu     sync.Mutex
	rate   float64
	tokens float64
	last   time.Time
}

func newLimiter(rate float64) *limiter {
	return &limiter{rate: rate, tokens: max(rate, 1), last: time.Now()}
}

func (l *limiter) wait(ctx context.Context) error {
	for {
		l.mu.Lock()
		now := time.Now()
		l.tokens = min(max(l.rate, 1), l.tokens+now.Sub(l.last).Seconds()*l.rate)
		l.last = now
		if l.tokens >= 1 {
			l.tokens--
			l.mu.Unlock()
			return nil
		}
		wait := time.Duration((1 - l.tokens) / l.rate * float64(time.Second))
		l.mu.Unlock()
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
