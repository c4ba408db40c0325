// Package smtptest runs a real SMTP server on loopback for tests, built on
// go-smtp: it records what it receives and can be told to refuse the next
// messages with a given answer (451 to make a sender retry, 550 to fail
// it), or to hold a message until released.
package smtptest

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/mail"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

// Received is one accepted message.
type Received struct {
	From   string
	To     []string
	Data   []byte
	Header mail.Header
}

// Server is a running test SMTP server.
type Server struct {
	srv  *smtp.Server
	addr string

	mu          sync.Mutex
	msgs        []Received
	failCode    int
	failMsg     string
	failTimes   int
	connections int
	hold        chan struct{} // when set, DATA waits on it
	dropHeld    bool          // held messages are refused when released
	inFlight    int
	user, pass  string // when set, MAIL needs AUTH PLAIN with these
	arrived     chan struct{}
}

// Start listens on 127.0.0.1:0; the server stops when the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{addr: ln.Addr().String(), arrived: make(chan struct{}, 1000)}
	s.srv = smtp.NewServer(smtp.BackendFunc(func(c *smtp.Conn) (smtp.Session, error) {
		s.mu.Lock()
		s.connections++
		s.mu.Unlock()
		return &session{s: s}, nil
	}))
	s.srv.Domain = "localhost"
	s.srv.AllowInsecureAuth = true
	s.srv.ReadTimeout = 30 * time.Second
	s.srv.WriteTimeout = 30 * time.Second
	go s.srv.Serve(ln)
	t.Cleanup(func() { s.srv.Close() })
	return s
}

// URL is the server's address as an LULL_SMTP_URL.
func (s *Server) URL() string { return "smtp://" + s.addr }

// Addr is host:port.
func (s *Server) Addr() string { return s.addr }

// FailNext makes the next times messages be refused at DATA with code and msg.
func (s *Server) FailNext(code int, msg string, times int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failCode, s.failMsg, s.failTimes = code, msg, times
}

// RequireAuth makes the server demand AUTH PLAIN with user and pass.
func (s *Server) RequireAuth(user, pass string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.user, s.pass = user, pass
}

// Hold makes DATA wait until Release is called, so a test can act while a
// send is in flight.
func (s *Server) Hold() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hold = make(chan struct{})
}

// Release lets held messages through; with accept false they are refused
// instead, as if the sender had died before the server took them.
func (s *Server) Release(accept bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropHeld = !accept
	if s.hold != nil {
		close(s.hold)
		s.hold = nil
	}
}

// Messages returns what the server accepted so far.
func (s *Server) Messages() []Received {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Received(nil), s.msgs...)
}

// InFlight counts messages held in DATA right now.
func (s *Server) InFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inFlight
}

// Connections counts the connections opened so far.
func (s *Server) Connections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.connections
}

// WaitFor waits until n messages arrived and returns them.
func (s *Server) WaitFor(t testing.TB, n int, timeout time.Duration) []Received {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if m := s.Messages(); len(m) >= n {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("smtptest: %d messages after %v, want %d", len(s.Messages()), timeout, n)
		}
		select {
		case <-s.arrived:
		case <-time.After(20 * time.Millisecond):
		}
	}
}

type session struct {
	s      *Server
	from   string
	to     []string
	authed bool
}

func (x *session) AuthMechanisms() []string { return []string{sasl.Plain} }

func (x *session) Auth(mech string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(_, user, pass string) error {
		x.s.mu.Lock()
		defer x.s.mu.Unlock()
		if user != x.s.user || pass != x.s.pass {
			return smtp.ErrAuthFailed
		}
		x.authed = true
		return nil
	}), nil
}

func (x *session) Reset()        { x.from, x.to = "", nil }
func (x *session) Logout() error { return nil }

func (x *session) Mail(from string, _ *smtp.MailOptions) error {
	x.s.mu.Lock()
	need := x.s.user != ""
	x.s.mu.Unlock()
	if need && !x.authed {
		return smtp.ErrAuthRequired
	}
	x.from = from
	return nil
}

func (x *session) Rcpt(to string, _ *smtp.RcptOptions) error { x.to = append(x.to, to); return nil }

func (x *session) Data(r io.Reader) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	s := x.s
	s.mu.Lock()
	hold := s.hold
	s.mu.Unlock()
	if hold != nil {
		s.mu.Lock()
		s.inFlight++
		s.mu.Unlock()
		<-hold
		s.mu.Lock()
		s.inFlight--
		drop := s.dropHeld
		s.mu.Unlock()
		if drop {
			return &smtp.SMTPError{Code: 421, EnhancedCode: smtp.NoEnhancedCode, Message: "connection lost"}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failTimes > 0 {
		s.failTimes--
		return &smtp.SMTPError{Code: s.failCode, EnhancedCode: smtp.NoEnhancedCode, Message: s.failMsg}
	}
	msg, err := mail.ReadMessage(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("smtptest: unparseable message: %w", err)
	}
	s.msgs = append(s.msgs, Received{From: x.from, To: x.to, Data: data, Header: msg.Header})
	select {
	case s.arrived <- struct{}{}:
	default:
	}
	return nil
}
