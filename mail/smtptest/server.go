// Package smtptest runs a real SMTP server on loopback for tests, built on
// go-smtp: it records what it receives and can be told to refuse the next
// messages with a given answer (451 to make a sender retry, 550 to fail
// it), to refuse one address for good, to hold a message until released,
// to answer slowly, or to go down (connections refused) and come back on
// the same port. Tests talk to it over TCP exactly as lull talks to a
// production relay, so what passes here passes through go-mail's real SMTP
// conversation, not a fake of it.
package smtptest

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"maps"
	"net"
	"net/mail"
	"slices"
	"strings"
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
	// TLS reports whether the message travelled over an encrypted
	// connection (STARTTLS or implicit TLS), so a test can prove that a
	// sender really upgraded instead of falling back to plain text.
	TLS bool
	// User is the name the client authenticated as, empty without AUTH.
	User string
}

// Option changes how the server listens.
type Option func(*options)

type options struct {
	startTLS      bool
	implicitTLS   bool
	keepAll       bool
	countCommands bool
}

// WithSTARTTLS makes the server offer STARTTLS with a self-signed
// certificate for 127.0.0.1, so a client needs insecure_skip_verify.
func WithSTARTTLS() Option { return func(o *options) { o.startTLS = true } }

// WithImplicitTLS makes the server speak TLS from the first byte, as on
// port 465 (smtps://), with a self-signed certificate for 127.0.0.1.
func WithImplicitTLS() Option { return func(o *options) { o.implicitTLS = true } }

// KeepAll makes the server keep every message it accepts instead of the
// last 1000, for tests that reconcile more messages than that (every
// batch delivered, none twice).
func KeepAll() Option { return func(o *options) { o.keepAll = true } }

// CountCommands makes the server count the commands clients send, by
// verb (Commands), for tests of how many round trips an email takes.
func CountCommands() Option { return func(o *options) { o.countCommands = true } }

// Server is a running test SMTP server. All its methods are safe to call
// from several goroutines.
type Server struct {
	srv    *smtp.Server
	addr   string
	scheme string
	tls    *tls.Config // for implicit TLS: wraps every listener
	keep   int         // messages kept; 0 keeps all

	mu          sync.Mutex
	msgs        []Received
	failCode    int
	failMsg     string
	failTimes   int
	rcptCode    int
	rcptMsg     string
	rcptTimes   int
	mailCode    int
	mailMsg     string
	mailTimes   int
	mailClose   bool // close the connection after refusing MAIL
	mails       int  // MAIL commands received
	dropTimes   int  // messages taken without an answer to their data
	connections int
	open        map[*countingConn]struct{}
	hold        chan struct{} // when set, DATA waits on it
	dropHeld    bool          // held messages are refused when released
	inFlight    int
	received    int
	user, pass  string // when set, MAIL needs AUTH PLAIN with these
	arrived     chan struct{}
	delay       time.Duration    // how long DATA waits before answering
	refused     map[string]error // RCPT TO answers for given addresses
	ln          net.Listener     // the current listener; nil while down
	commands    map[string]int   // with CountCommands: commands received, by verb
}

// Start listens on 127.0.0.1:0; the server stops when the test ends.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	s, err := Listen("127.0.0.1:0", opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// Listen starts a server on addr outside a test (the benchmark's sink).
// Only the last 1000 messages are kept, so a long run stays small.
func Listen(addr string, opts ...Option) (*Server, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	raw, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	s := &Server{addr: raw.Addr().String(), scheme: "smtp", arrived: make(chan struct{}, 1000), open: map[*countingConn]struct{}{},
		keep: 1000, refused: map[string]error{}}
	if o.keepAll {
		s.keep = 0
	}
	s.srv = smtp.NewServer(smtp.BackendFunc(func(c *smtp.Conn) (smtp.Session, error) {
		return &session{s: s, conn: c}, nil
	}))
	s.srv.Domain = "localhost"
	if o.countCommands {
		s.commands = map[string]int{}
		s.srv.Debug = &commandCounter{s: s}
	}
	s.srv.AllowInsecureAuth = true
	s.srv.ReadTimeout = 30 * time.Second
	s.srv.WriteTimeout = 30 * time.Second
	if o.startTLS || o.implicitTLS {
		cfg, err := selfSignedTLS()
		if err != nil {
			raw.Close()
			return nil, err
		}
		if o.implicitTLS {
			s.tls = cfg
			s.scheme = "smtps"
		} else {
			s.srv.TLSConfig = cfg
		}
	}
	s.serve(raw)
	return s, nil
}

// serve accepts connections on raw. Connections are counted where they
// are accepted and closed, not per session: go-smtp starts a new session
// at every EHLO, and a STARTTLS client says EHLO twice on one connection.
func (s *Server) serve(raw net.Listener) {
	var ln net.Listener = &countingListener{Listener: raw, s: s}
	if s.tls != nil {
		ln = tls.NewListener(ln, s.tls)
	}
	s.mu.Lock()
	s.ln = raw
	s.mu.Unlock()
	go s.srv.Serve(ln)
}

// Close stops the server.
func (s *Server) Close() error { return s.srv.Close() }

// Down takes the server off the network as a relay that crashed or is
// being restarted: the port stops listening, so new connections are
// refused, and open ones are dropped without a word. Up brings it back.
func (s *Server) Down() {
	s.mu.Lock()
	ln := s.ln
	s.ln = nil
	s.mu.Unlock()
	if ln != nil {
		ln.Close()
	}
	s.DropConnections()
}

// Up listens again on the address the server had, after Down. Everything
// else (messages received, failures planned) is kept.
func (s *Server) Up() error {
	s.mu.Lock()
	up := s.ln != nil
	s.mu.Unlock()
	if up {
		return nil
	}
	raw, err := net.Listen("tcp", s.addr)
	if err != nil {
		return fmt.Errorf("smtptest: listen again on %s: %w", s.addr, err)
	}
	s.serve(raw)
	return nil
}

// SetDelay makes every message wait d after its data arrived before the
// server answers, as a slow relay does, so that a test can catch sends in
// flight: a sender killed during the wait never learns that its message
// was accepted.
func (s *Server) SetDelay(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.delay = d
}

// RefuseRcpt makes the server refuse RCPT TO addr with code and msg every
// time, as for a mailbox that does not exist (550) or is over quota (452).
func (s *Server) RefuseRcpt(addr string, code int, msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refused[strings.ToLower(addr)] = &smtp.SMTPError{Code: code, EnhancedCode: smtp.NoEnhancedCode, Message: msg}
}

// MessageIDCounts counts the kept messages by Message-ID header, so a
// test can see that every email arrived and none twice. Use KeepAll when
// more than 1000 messages are expected.
func (s *Server) MessageIDCounts() map[string]int {
	counts := map[string]int{}
	for _, m := range s.Messages() {
		counts[m.Header.Get("Message-Id")]++
	}
	return counts
}

// BatchCounts counts the kept messages by the batch their Message-ID
// names ("<batch-42.<installation>@domain>"), so a test need not know the
// installation's part.
func (s *Server) BatchCounts() map[int64]int {
	counts := map[int64]int{}
	for id, n := range s.MessageIDCounts() {
		var batch int64
		if _, err := fmt.Sscanf(id, "<batch-%d.", &batch); err == nil {
			counts[batch] += n
		}
	}
	return counts
}

// Received counts every message accepted since the start.
func (s *Server) Received() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.received
}

// URL is the server's address as an LULL_SMTP_URL: smtp://127.0.0.1:PORT,
// or smtps://... for a server started WithImplicitTLS.
func (s *Server) URL() string { return s.scheme + "://" + s.addr }

// Addr is host:port.
func (s *Server) Addr() string { return s.addr }

// FailNext makes the next times messages be refused at the end of DATA
// with code and msg, where a real server refuses content or a full
// mailbox. msg may start with an enhanced code ("5.1.1 no such user").
func (s *Server) FailNext(code int, msg string, times int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failCode, s.failMsg, s.failTimes = code, msg, times
}

// FailNextRcpt makes the next times RCPT TO commands be refused with code
// and msg, where a real server refuses an unknown recipient.
func (s *Server) FailNextRcpt(code int, msg string, times int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rcptCode, s.rcptMsg, s.rcptTimes = code, msg, times
}

// FailNextMail makes the next times MAIL FROM commands be refused with
// code and msg; with hangUp the server then closes the connection, as a
// relay does with "421 too many messages on this connection".
func (s *Server) FailNextMail(code int, msg string, times int, hangUp bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mailCode, s.mailMsg, s.mailTimes, s.mailClose = code, msg, times, hangUp
}

// Mails counts the MAIL FROM commands received, refused ones included, so
// a test can see that a message was not offered twice.
func (s *Server) Mails() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mails
}

// DropAfterData makes the next times messages be taken in full and kept,
// and their connection closed before the server answers the final dot,
// as a relay that crashed after queueing: the sender cannot know that
// the message arrived.
func (s *Server) DropAfterData(times int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropTimes = times
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

// Commands returns how many of each command clients sent (with
// CountCommands), by verb: "MAIL", "NOOP", "RSET"…
func (s *Server) Commands() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.commands)
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

// Connections counts the connections accepted so far, open or closed.
func (s *Server) Connections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.connections
}

// OpenConnections counts the connections open right now, so a test can
// see that a client hung up (an idle pool emptied, a failed connection
// dropped).
func (s *Server) OpenConnections() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.open)
}

// DropConnections closes every open connection from the server's side
// without a word, as a relay does when it restarts or times a client out,
// so a test can check that a sender notices and reconnects.
func (s *Server) DropConnections() {
	s.mu.Lock()
	conns := make([]*countingConn, 0, len(s.open))
	for c := range s.open {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
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

// countingListener counts accepted and closed connections.
type countingListener struct {
	net.Listener
	s *Server
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	cc := &countingConn{Conn: c, s: l.s}
	l.s.mu.Lock()
	l.s.connections++
	l.s.open[cc] = struct{}{}
	l.s.mu.Unlock()
	return cc, nil
}

type countingConn struct {
	net.Conn
	s    *Server
	once sync.Once
}

func (c *countingConn) Close() error {
	c.once.Do(func() {
		c.s.mu.Lock()
		delete(c.s.open, c)
		c.s.mu.Unlock()
	})
	return c.Conn.Close()
}

type session struct {
	s      *Server
	conn   *smtp.Conn
	from   string
	to     []string
	authed string
}

func (x *session) AuthMechanisms() []string { return []string{sasl.Plain} }

func (x *session) Auth(mech string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(_, user, pass string) error {
		x.s.mu.Lock()
		defer x.s.mu.Unlock()
		if user != x.s.user || pass != x.s.pass {
			return smtp.ErrAuthFailed
		}
		x.authed = user
		return nil
	}), nil
}

func (x *session) Reset()        { x.from, x.to = "", nil }
func (x *session) Logout() error { return nil }

func (x *session) Mail(from string, _ *smtp.MailOptions) error {
	x.s.mu.Lock()
	need := x.s.user != ""
	x.s.mu.Unlock()
	if need && x.authed == "" {
		return smtp.ErrAuthRequired
	}
	s := x.s
	s.mu.Lock()
	s.mails++
	refuse, code, msg, hangUp := s.mailTimes > 0, s.mailCode, s.mailMsg, s.mailClose
	if refuse {
		s.mailTimes--
	}
	s.mu.Unlock()
	if !refuse {
		x.from = from
		return nil
	}
	if hangUp {
		// The answer goes straight to the socket, which then closes,
		// so nothing follows it.
		fmt.Fprintf(x.conn.Conn(), "%d %s\r\n", code, msg)
		x.conn.Conn().Close()
	}
	return &smtp.SMTPError{Code: code, EnhancedCode: smtp.NoEnhancedCode, Message: msg}
}

func (x *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	s := x.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if err, ok := s.refused[strings.ToLower(to)]; ok {
		return err
	}
	if s.rcptTimes > 0 {
		s.rcptTimes--
		return &smtp.SMTPError{Code: s.rcptCode, EnhancedCode: smtp.NoEnhancedCode, Message: s.rcptMsg}
	}
	x.to = append(x.to, to)
	return nil
}

func (x *session) Data(r io.Reader) error {
	drop, err := x.take(r)
	if drop {
		// Closed once s.mu is released (Close counts under it), before
		// go-smtp writes the answer.
		x.conn.Conn().Close()
	}
	return err
}

// take reads and keeps a message, or refuses it; drop says to close the
// connection without answering.
func (x *session) take(r io.Reader) (drop bool, err error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return false, err
	}
	s := x.s
	s.mu.Lock()
	hold, delay := s.hold, s.delay
	s.mu.Unlock()
	if delay > 0 {
		time.Sleep(delay)
	}
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
			return false, &smtp.SMTPError{Code: 421, EnhancedCode: smtp.NoEnhancedCode, Message: "connection lost"}
		}
	}
	_, isTLS := x.conn.TLSConnectionState()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failTimes > 0 {
		s.failTimes--
		return false, &smtp.SMTPError{Code: s.failCode, EnhancedCode: smtp.NoEnhancedCode, Message: s.failMsg}
	}
	msg, err := mail.ReadMessage(bytes.NewReader(data))
	if err != nil {
		return false, fmt.Errorf("smtptest: unparseable message: %w", err)
	}
	s.received++
	if s.keep > 0 && len(s.msgs) >= s.keep {
		s.msgs = s.msgs[1:]
	}
	s.msgs = append(s.msgs, Received{From: x.from, To: x.to, Data: data, Header: msg.Header, TLS: isTLS, User: x.authed})
	select {
	case s.arrived <- struct{}{}:
	default:
	}
	if s.dropTimes > 0 {
		s.dropTimes--
		return true, nil
	}
	return false, nil
}

// commandCounter reads the conversation go-smtp copies to its Debug
// writer (what the client sent and what the server answered, in the order
// they happened) and counts the lines that start with a command verb.
// Answers start with digits; a message's own lines could start with a
// verb, which tests avoid. Lines of several connections at once may mix,
// so count over one connection at a time.
type commandCounter struct {
	s    *Server
	mu   sync.Mutex
	line []byte // the start of a line whose end has not come yet
}

var verbs = []string{"EHLO", "HELO", "MAIL", "RCPT", "DATA", "RSET", "NOOP", "QUIT", "AUTH", "STARTTLS"}

func (c *commandCounter) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	rest := p
	for {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			c.line = append(c.line, rest...)
			return len(p), nil
		}
		c.count(append(c.line, rest[:i]...))
		c.line, rest = c.line[:0], rest[i+1:]
	}
}

func (c *commandCounter) count(line []byte) {
	f := bytes.Fields(line)
	if len(f) == 0 {
		return
	}
	verb := strings.ToUpper(string(f[0]))
	if !slices.Contains(verbs, verb) {
		return
	}
	c.s.mu.Lock()
	c.s.commands[verb]++
	c.s.mu.Unlock()
}
