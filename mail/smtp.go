package mail

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	gomail "github.com/wneessen/go-mail"
	"github.com/wneessen/go-mail/smtp"

	"github.com/lull-dev/lull/mailtemplates"
)

// idleTimeout is how long an unused connection stays open. Servers drop
// idle clients after a minute or more (RFC 5321 suggests five), so 30 s
// keeps a burst of flushes on one connection without holding it open
// between bursts or finding it dead.
const idleTimeout = 30 * time.Second

// ErrClosed is returned by Send after Close.
var ErrClosed = errors.New("mailer: SMTP sender closed")

// SMTPConfig configures the SMTP sender.
type SMTPConfig struct {
	// URL is LULL_SMTP_URL: smtp://user:pass@host:port (port 587 unless
	// given; STARTTLS when the server offers it), smtps://... (TLS from
	// the start, port 465 unless given), with ?starttls=required to
	// refuse a server without STARTTLS, ?insecure_skip_verify=true for a
	// self-signed test server, and ?insecure_auth=true to send the
	// password to a relay that offers no TLS at all (a local relay only).
	// With a user, lull logs in with the strongest mechanism the server
	// offers (PLAIN or LOGIN only over TLS).
	URL string
	// Rate is messages per second at most, across all connections, for
	// providers that throttle; 0 means no limit.
	Rate float64
	// Concurrency is how many connections may be open at once, which is
	// also how many messages are in flight at once (default 4). Relays
	// limit connections per client, and a few reused connections go
	// faster than many new ones.
	Concurrency int
	// Envelope adds the return path, Feedback-ID and DKIM signature.
	Envelope Envelope
}

// SMTP sends over a pool of reused connections. A connection is dialled,
// greeted, upgraded with TLS and logged in once and then carries many
// messages, which saves several round trips and a TLS handshake per
// email. After any error its connection is dropped rather than trusted
// again. SMTP is safe for concurrent use.
type SMTP struct {
	endpoint    endpoint
	client      *gomail.Client // configuration only; connections are smtp.Clients
	logger      *slog.Logger
	limiter     *limiter      // nil when unlimited
	slots       chan struct{} // one per connection that may be open
	idleTimeout time.Duration
	envelope    Envelope

	mu     sync.Mutex
	idle   []*conn // most recently used last
	closed bool
}

// conn is one open connection.
type conn struct {
	c     *smtp.Client
	timer *time.Timer // closes c once it has been idle too long
}

// NewSMTP parses cfg.URL and prepares the pool; it makes no connection,
// so lull starts even while the mail server is down, and the first Send
// dials. A bad URL is reported here, naming LULL_SMTP_URL.
func NewSMTP(cfg SMTPConfig, logger *slog.Logger) (*SMTP, error) {
	e, err := parseURL(cfg.URL)
	if err != nil {
		return nil, err
	}
	client, err := gomail.NewClient(e.host, e.options()...)
	if err != nil {
		return nil, fmt.Errorf("LULL_SMTP_URL %s: %w", e, err)
	}
	n := cfg.Concurrency
	if n <= 0 {
		n = 4
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &SMTP{
		endpoint: e, client: client, logger: logger,
		slots: make(chan struct{}, n), idleTimeout: idleTimeout, envelope: cfg.Envelope,
	}
	if cfg.Rate > 0 {
		s.limiter = newLimiter(cfg.Rate)
	}
	return s, nil
}

// Send delivers m over a pooled connection, dialling one when none is
// idle. A failure comes back as a *SendError saying whether to retry.
//
// ctx bounds the wait for the rate limit, for a free connection and for
// dialling; once the SMTP conversation for m has begun it runs to its end
// or to the 30 s timeout, because cutting it off midway would leave the
// server's view of the message unknown.
func (s *SMTP) Send(ctx context.Context, m *mailtemplates.Message) error {
	msg, data, err := encode(m, s.envelope)
	if err != nil {
		return &SendError{Err: err}
	}
	from, err := msg.GetSender(false)
	if err != nil {
		return &SendError{Err: err}
	}
	rcpts, err := msg.GetRecipients()
	if err != nil {
		return &SendError{Err: err}
	}
	if s.limiter != nil {
		if err := s.limiter.wait(ctx); err != nil {
			return &SendError{Temporary: true, Err: err}
		}
	}
	select {
	case s.slots <- struct{}{}:
	case <-ctx.Done():
		return &SendError{Temporary: true, Err: ctx.Err()}
	}
	defer func() { <-s.slots }()

	c, reused, err := s.take(ctx)
	if err != nil {
		return err
	}
	err = transmit(c.c, from, rcpts, data)
	if err != nil && reused && errors.Is(err, errStale) {
		// The server closed the idle connection: MAIL, the first thing
		// said for this message, went unanswered. Nothing of the message
		// was sent, so a fresh connection is safe and spares the caller
		// a retry.
		s.logger.Debug("smtp: idle connection went stale, redialling", "server", s.endpoint.String(), "err", err)
		s.hangUp(c)
		if c, err = s.dial(ctx); err != nil {
			return err
		}
		err = transmit(c.c, from, rcpts, data)
	}
	if err != nil {
		s.hangUp(c)
		return err
	}
	s.park(c)
	return nil
}

// errStale is MAIL failing without an answer, or with 421 (the server
// is closing the connection): the connection is gone, and nothing of the
// message reached the server.
var errStale = errors.New("connection closed by the server")

// transmit is one message's conversation: MAIL, RCPT, DATA, with the
// message written already. It asks no NOOP before and no RSET after, as
// go-mail's SendWithSMTPClient does, since each is a round trip per
// message: a connection the server closed while it sat idle shows
// itself just as well at MAIL (errStale), and a transaction ends with
// the server's answer to the data (RFC 5321, 4.1.1.4), leaving the
// connection ready for the next MAIL. A refused MAIL or RCPT is
// followed by RSET, which ends the half-made transaction.
func transmit(c *smtp.Client, from string, rcpts []string, data []byte) error {
	if !c.HasConnection() {
		return &SendError{Temporary: true, Err: fmt.Errorf("%s: %w", gomail.ErrConnCheck, errStale)}
	}
	if err := c.UpdateDeadline(dialTimeout); err != nil {
		return &SendError{Temporary: true, Err: fmt.Errorf("%s: %w", gomail.ErrConnCheck, err)}
	}
	if err := c.Mail(from); err != nil {
		_ = c.Reset()
		se := stepError(gomail.ErrSMTPMailFrom, err)
		if se.Code == 0 || se.Code == 421 {
			// Still the server's code and answer, for the operator and
			// the metrics, should a new connection hear the same.
			se.Err = fmt.Errorf("%s: %w: %w", gomail.ErrSMTPMailFrom, errStale, err)
		}
		return se
	}
	for _, r := range rcpts {
		if err := c.Rcpt(r); err != nil {
			_ = c.Reset()
			return stepError(gomail.ErrSMTPRcptTo, err)
		}
	}
	w, err := c.Data()
	if err != nil {
		return stepError(gomail.ErrSMTPData, err)
	}
	if err := writeData(c.Text.W, w, data); err != nil {
		return stepError(gomail.ErrWriteContent, err)
	}
	if err := w.Close(); err != nil {
		se := stepError(gomail.ErrSMTPDataClose, err)
		se.Unanswered = se.Code == 0
		return se
	}
	return nil
}

// take returns the most recently used idle connection, or dials one.
// Taking the newest lets the older ones reach idleTimeout and close when
// traffic drops.
func (s *SMTP) take(ctx context.Context) (*conn, bool, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, false, &SendError{Temporary: true, Err: ErrClosed}
	}
	var c *conn
	if n := len(s.idle); n > 0 {
		c = s.idle[n-1]
		s.idle = s.idle[:n-1]
		// If the timer has fired already, expire is waiting for s.mu and
		// will find c gone from idle, leaving it to us.
		c.timer.Stop()
	}
	s.mu.Unlock()
	if c != nil {
		// The deadline set for the previous message may have passed
		// while the connection sat idle.
		if err := c.c.UpdateDeadline(dialTimeout); err == nil {
			return c, true, nil
		}
		s.hangUp(c)
	}
	c, err := s.dial(ctx)
	return c, false, err
}

// dial opens, greets, secures and logs in a new connection.
func (s *SMTP) dial(ctx context.Context) (*conn, error) {
	sc, err := s.client.DialToSMTPClientWithContext(ctx)
	if err != nil {
		return nil, classifyDial(fmt.Errorf("connect to %s: %w", s.endpoint, err))
	}
	s.logger.Debug("smtp: connected", "server", s.endpoint.String())
	return &conn{c: sc}, nil
}

// park returns a healthy connection to the idle pool and arms its idle
// timer. After Close it hangs up instead.
func (s *SMTP) park(c *conn) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.hangUp(c)
		return
	}
	c.timer = time.AfterFunc(s.idleTimeout, func() { s.expire(c) })
	s.idle = append(s.idle, c)
	s.mu.Unlock()
}

// expire closes c if it is still idle.
func (s *SMTP) expire(c *conn) {
	s.mu.Lock()
	i := slices.Index(s.idle, c)
	if i < 0 {
		s.mu.Unlock()
		return
	}
	s.idle = slices.Delete(s.idle, i, i+1)
	s.mu.Unlock()
	s.hangUp(c)
}

// hangUp says QUIT and closes the connection. go-mail's Quit leaves the
// socket open when QUIT itself fails (a dead or hung server), so the
// socket is closed explicitly then.
func (s *SMTP) hangUp(c *conn) {
	if err := c.c.Quit(); err != nil {
		_ = c.c.Close()
	}
}

// Close hangs up the idle connections and makes later Sends fail with
// ErrClosed. Sends in flight finish, and hang up their connections when
// they do.
func (s *SMTP) Close() {
	s.mu.Lock()
	idle := s.idle
	s.idle = nil
	s.closed = true
	s.mu.Unlock()
	for _, c := range idle {
		c.timer.Stop()
		s.hangUp(c)
	}
}
