package bounce

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/emersion/go-smtp"
)

// Bounds on one SMTP conversation. A notification is a few kilobytes plus
// the returned message, which servers usually truncate; 1 MiB keeps room
// for a full one. A whole conversation gets five minutes however slowly
// it trickles in, and only so many run at once, so nobody can hold the
// receiver open.
const (
	maxMessageBytes = 1 << 20
	sessionLimit    = 5 * time.Minute
	ioTimeout       = time.Minute
	maxConnections  = 50
	// maxPerClient keeps one host from taking every connection: a mail
	// server sends a few bounces at a time, and a client holding more is
	// told 421 (try later) at once, which MTAs honour.
	maxPerClient = 10
	// maxRefused is how many recipients one conversation may name that
	// are no return path of ours. A mail server returning a bounce names
	// one; a client trying addresses by the thousand would fill the log
	// with refusals, so it is cut off.
	maxRefused = 5
)

// Receiver is lull's own SMTP server for bounce mail (LULL_BOUNCE_ADDR).
// It accepts mail only for return paths VERP made, reads each as a
// delivery status notification or feedback report (Parse), and records
// what it says with Sink. Mail it cannot read is refused with a 5xx and
// logged; a failing Sink gets a 4xx, so the sending server retries later.
//
// The return path proves which batch a notification is about, not which
// address: whoever received that batch's email knows its return path and
// could send a notification naming someone else. So a Sink acts on a
// report from here only for the batch's own recipient (Report.Address
// equal to it, or empty when a complaint's recipient was redacted).
type Receiver struct {
	srv    *smtp.Server
	verp   VERP
	sink   Sink
	logger *slog.Logger
	now    func() time.Time
}

// NewReceiver makes a receiver; Serve starts it.
func NewReceiver(v VERP, sink Sink, logger *slog.Logger) *Receiver {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	rc := &Receiver{verp: v, sink: sink, logger: logger, now: time.Now}
	rc.srv = smtp.NewServer(smtp.BackendFunc(func(c *smtp.Conn) (smtp.Session, error) {
		return &session{rc: rc, conn: c.Conn(), remote: c.Conn().RemoteAddr().String()}, nil
	}))
	rc.srv.Domain = v.Domain
	// One return path per message: a bounce is sent to the one envelope
	// sender of the email that bounced. A server that bundles several gets
	// 452 for the rest and sends them in a transaction of their own.
	rc.srv.MaxRecipients = 1
	rc.srv.MaxMessageBytes = maxMessageBytes
	rc.srv.ReadTimeout = ioTimeout
	rc.srv.WriteTimeout = ioTimeout
	return rc
}

// Serve accepts connections on ln until Close.
func (rc *Receiver) Serve(ln net.Listener) error {
	err := rc.srv.Serve(&boundedListener{Listener: ln, slots: make(chan struct{}, maxConnections)})
	if errors.Is(err, smtp.ErrServerClosed) {
		return nil
	}
	return err
}

// Close stops accepting and closes open conversations.
func (rc *Receiver) Close() error { return rc.srv.Close() }

type session struct {
	rc      *Receiver
	conn    net.Conn
	remote  string
	batch   int64
	refused int
}

func (s *session) Reset()        { s.batch = 0 }
func (s *session) Logout() error { return nil }

// Mail accepts any sender: bounces come from the null sender "<>".
func (s *session) Mail(string, *smtp.MailOptions) error { return nil }

// Rcpt accepts only a return path lull made.
func (s *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	id, ok := s.rc.verp.Batch(to)
	if !ok {
		if s.refused++; s.refused > maxRefused {
			// go-smtp has no way to end a conversation from here, so the
			// goodbye is written and the connection closed under it.
			s.rc.logger.Warn("bounce: closed a conversation naming too many unknown recipients", "remote", s.remote)
			io.WriteString(s.conn, "421 4.7.0 Too many unknown recipients, closing\r\n")
			s.conn.Close()
			return &smtp.SMTPError{Code: 421, EnhancedCode: smtp.EnhancedCode{4, 7, 0}, Message: "too many unknown recipients"}
		}
		s.rc.logger.Warn("bounce: refused a recipient that is no return path of ours", "remote", s.remote, "rcpt", clip(to))
		return &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "no such return path"}
	}
	s.batch = id
	return nil
}

func (s *session) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	reports, err := Parse(bytes.NewReader(b), s.rc.verp, s.rc.now())
	if err != nil {
		s.rc.logger.Warn("bounce: refused mail that is no report", "remote", s.remote, "batch", s.batch, "err", err)
		return &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 6, 0}, Message: "not a delivery status notification or feedback report"}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, rep := range reports {
		// The envelope's return path is signed and names the email that
		// bounced; it wins over whatever the returned copy claims.
		rep.BatchID = s.batch
		if err := s.rc.sink.Record(ctx, rep); errors.Is(err, ErrRefused) {
			s.rc.logger.Warn("bounce: report refused", "batch", s.batch, "kind", rep.Kind, "err", err)
			return &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 7, 1}, Message: "report refused"}
		} else if err != nil {
			s.rc.logger.Error("bounce: record report", "batch", s.batch, "kind", rep.Kind, "err", err)
			return &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "try again later"}
		}
		s.rc.logger.Info("bounce: report", "batch", s.batch, "kind", rep.Kind, "status", rep.Status, "address", rep.Address)
	}
	return nil
}

// boundedListener caps the connections open at once, in all and per
// client address, and the life of each.
type boundedListener struct {
	net.Listener
	slots chan struct{}

	mu    sync.Mutex
	perIP map[string]int
}

func (l *boundedListener) Accept() (net.Conn, error) {
	for {
		l.slots <- struct{}{}
		c, err := l.Listener.Accept()
		if err != nil {
			<-l.slots
			return nil, err
		}
		ip := c.RemoteAddr().String()
		if host, _, err := net.SplitHostPort(ip); err == nil {
			ip = host
		}
		if !l.take(ip) {
			// Written with a short deadline: a client that reads nothing
			// must not hold the accept loop.
			c.SetWriteDeadline(time.Now().Add(time.Second))
			io.WriteString(c, "421 4.7.0 Too many connections from your host, try again later\r\n")
			c.Close()
			<-l.slots
			continue
		}
		bc := &boundedConn{Conn: c, end: time.Now().Add(sessionLimit), release: func() { l.give(ip); <-l.slots }}
		bc.SetDeadline(time.Time{})
		return bc, nil
	}
}

// take counts a connection from ip, if ip has room for one more.
func (l *boundedListener) take(ip string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.perIP == nil {
		l.perIP = map[string]int{}
	}
	if l.perIP[ip] >= maxPerClient {
		return false
	}
	l.perIP[ip]++
	return true
}

func (l *boundedListener) give(ip string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.perIP[ip]--; l.perIP[ip] <= 0 {
		delete(l.perIP, ip)
	}
}

// boundedConn keeps every deadline go-smtp sets at or before end, so a
// client that sends a byte a minute still runs out of time.
type boundedConn struct {
	net.Conn
	end     time.Time
	release func()
	once    sync.Once
}

func (c *boundedConn) cap(t time.Time) time.Time {
	if t.IsZero() || t.After(c.end) {
		return c.end
	}
	return t
}

func (c *boundedConn) SetDeadline(t time.Time) error      { return c.Conn.SetDeadline(c.cap(t)) }
func (c *boundedConn) SetReadDeadline(t time.Time) error  { return c.Conn.SetReadDeadline(c.cap(t)) }
func (c *boundedConn) SetWriteDeadline(t time.Time) error { return c.Conn.SetWriteDeadline(c.cap(t)) }

func (c *boundedConn) Close() error {
	c.once.Do(c.release)
	return c.Conn.Close()
}
