package mail_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"maps"
	"mime"
	"mime/multipart"
	"net"
	netmail "net/mail"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lull-dev/lull/mail"
	"github.com/lull-dev/lull/mail/smtptest"
	"github.com/lull-dev/lull/mailtemplates"
)

const wait = 5 * time.Second

func message(subject string) *mailtemplates.Message {
	return &mailtemplates.Message{
		From: "lull@example.com", To: "bob@example.com", ToName: "Bob Stone", Subject: subject,
		MessageID: "batch-42@example.com", Date: time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC),
		Text: "3 new comments\n\nAlice: Looks good", HTML: "<p>3 new comments</p>\n<p>Alice: Looks good</p>",
		UnsubscribeURL: "https://lull.example/unsubscribe?token=abc", BatchID: 42,
	}
}

func newSMTP(t *testing.T, cfg mail.SMTPConfig) *mail.SMTP {
	t.Helper()
	s, err := mail.NewSMTP(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// withUser puts user:pass into a smtptest URL.
func withUser(url, user, pass string) string {
	scheme, rest, _ := strings.Cut(url, "://")
	return scheme + "://" + user + ":" + pass + "@" + rest
}

// parts reads a multipart/alternative body into media type -> decoded
// content, in order.
func parts(t *testing.T, got smtptest.Received) (types []string, bodies map[string]string) {
	t.Helper()
	media, params, err := mime.ParseMediaType(got.Header.Get("Content-Type"))
	if err != nil || media != "multipart/alternative" {
		t.Fatalf("Content-Type = %q, want multipart/alternative", got.Header.Get("Content-Type"))
	}
	msg, err := netmail.ReadMessage(strings.NewReader(string(got.Data)))
	if err != nil {
		t.Fatal(err)
	}
	bodies = map[string]string{}
	mr := multipart.NewReader(msg.Body, params["boundary"])
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("multipart: %v", err)
		}
		mt, ps, _ := mime.ParseMediaType(p.Header.Get("Content-Type"))
		if !strings.EqualFold(ps["charset"], "utf-8") {
			t.Errorf("%s part has charset %q, want UTF-8", mt, ps["charset"])
		}
		b, err := io.ReadAll(p) // NextPart undoes quoted-printable
		if err != nil {
			t.Fatal(err)
		}
		types = append(types, mt)
		bodies[mt] = strings.ReplaceAll(string(b), "\r\n", "\n")
	}
	return types, bodies
}

func TestSMTPSend(t *testing.T) {
	t.Parallel()

	t.Run("MultipartAlternativeWithHeaders", func(t *testing.T) {
		t.Parallel()
		srv := smtptest.Start(t)
		m := message("3 new comments on Q3 plan")
		if err := newSMTP(t, mail.SMTPConfig{URL: srv.URL()}).Send(context.Background(), m); err != nil {
			t.Fatal(err)
		}
		got := srv.WaitFor(t, 1, wait)[0]
		if got.From != "lull@example.com" || len(got.To) != 1 || got.To[0] != "bob@example.com" {
			t.Errorf("envelope from %q to %v, want lull@example.com to [bob@example.com]", got.From, got.To)
		}
		h := got.Header
		if v := h["Message-Id"]; len(v) != 1 || v[0] != "<batch-42@example.com>" {
			t.Errorf("Message-ID = %q, want exactly one <batch-42@example.com>", v)
		}
		if v := h["List-Unsubscribe"]; len(v) != 1 || v[0] != "<https://lull.example/unsubscribe?token=abc>" {
			t.Errorf("List-Unsubscribe = %q", v)
		}
		if v := h["List-Unsubscribe-Post"]; len(v) != 1 || v[0] != "List-Unsubscribe=One-Click" {
			t.Errorf("List-Unsubscribe-Post = %q", v)
		}
		if d, err := netmail.ParseDate(h.Get("Date")); err != nil || !d.Equal(m.Date) {
			t.Errorf("Date %q (%v), want %v", h.Get("Date"), err, m.Date)
		}
		if from, err := netmail.ParseAddress(h.Get("From")); err != nil || from.Address != "lull@example.com" {
			t.Errorf("From = %q (%v)", h.Get("From"), err)
		}
		if to, err := netmail.ParseAddress(h.Get("To")); err != nil || to.Address != "bob@example.com" || to.Name != "Bob Stone" {
			t.Errorf("To = %q (%v), want Bob Stone <bob@example.com>", h.Get("To"), err)
		}
		if h.Get("Mime-Version") != "1.0" {
			t.Errorf("MIME-Version = %q", h.Get("Mime-Version"))
		}
		types, bodies := parts(t, got)
		if strings.Join(types, ",") != "text/plain,text/html" {
			t.Fatalf("parts = %v, want text/plain then text/html", types)
		}
		if bodies["text/plain"] != m.Text || bodies["text/html"] != m.HTML {
			t.Errorf("bodies = %q, want %q and %q", bodies, m.Text, m.HTML)
		}
	})

	t.Run("UTF8SubjectsAndNamesDecode", func(t *testing.T) {
		t.Parallel()
		srv := smtptest.Start(t)
		s := newSMTP(t, mail.SMTPConfig{URL: srv.URL()})
		subjects := []string{
			"Fatima 🎉 shared the app with you",
			"شاركت فاطمة التطبيق معك",
			"Zoë, 山田 and 14 others commented on «Q3 plan» —" + strings.Repeat(" long", 20),
			"Plain ASCII stays plain",
		}
		for i, subject := range subjects {
			m := message(subject)
			m.ToName = "فاطمة Zoë"
			m.MessageID = "batch-" + string(rune('a'+i)) + "@example.com"
			if err := s.Send(context.Background(), m); err != nil {
				t.Fatal(err)
			}
		}
		var dec mime.WordDecoder
		for i, got := range srv.WaitFor(t, len(subjects), wait) {
			raw := got.Header.Get("Subject")
			if s, err := dec.DecodeHeader(raw); err != nil || s != subjects[i] {
				t.Errorf("Subject %q decodes to %q (%v), want %q", raw, s, err, subjects[i])
			}
			if to, err := netmail.ParseAddress(got.Header.Get("To")); err != nil || to.Name != "فاطمة Zoë" {
				t.Errorf("To %q parses to %v (%v)", got.Header.Get("To"), to, err)
			}
		}
	})

	t.Run("LineBreaksCannotAddHeaders", func(t *testing.T) {
		t.Parallel()
		srv := smtptest.Start(t)
		s := newSMTP(t, mail.SMTPConfig{URL: srv.URL()})
		for i, evil := range []string{"Hello\r\nBcc: x@y", "Hello\nBcc: x@y", "Hello\rBcc: x@y", "Hello\u2028Bcc: x@y"} {
			m := message(evil)
			m.ToName = "Bob\r\nBcc: other@example.com\r\n"
			m.MessageID = "batch-" + string(rune('a'+i)) + "@example.com"
			if err := s.Send(context.Background(), m); err != nil {
				t.Fatal(err)
			}
		}
		var dec mime.WordDecoder
		for _, got := range srv.WaitFor(t, 4, wait) {
			if v, ok := got.Header["Bcc"]; ok || len(got.To) != 1 {
				t.Fatalf("a line break in the subject or name reached the headers or envelope: Bcc=%q to=%v\n%s", v, got.To, got.Data)
			}
			if s, _ := dec.DecodeHeader(got.Header.Get("Subject")); s != "Hello Bcc: x@y" {
				t.Errorf("Subject = %q, want the text kept on one line", s)
			}
			if to, err := netmail.ParseAddress(got.Header.Get("To")); err != nil || to.Name != "Bob Bcc: other@example.com" || to.Address != "bob@example.com" {
				t.Errorf("To = %q (%v)", got.Header.Get("To"), err)
			}
		}
	})

	t.Run("BadMessageIsPermanent", func(t *testing.T) {
		t.Parallel()
		srv := smtptest.Start(t)
		m := message("x")
		m.To = "not an address"
		err := newSMTP(t, mail.SMTPConfig{URL: srv.URL()}).Send(context.Background(), m)
		if !errors.Is(err, mail.ErrBadMessage) || mail.IsTemporary(err) {
			t.Fatalf("bad To gave %v, want a permanent ErrBadMessage", err)
		}
		if srv.Connections() != 0 {
			t.Errorf("a message that cannot be built opened %d connections", srv.Connections())
		}
	})
}

func TestSMTPFailures(t *testing.T) {
	t.Parallel()

	t.Run("TemporaryAnswerThenSuccess", func(t *testing.T) {
		t.Parallel()
		srv := smtptest.Start(t)
		s := newSMTP(t, mail.SMTPConfig{URL: srv.URL()})
		srv.FailNext(451, "4.3.0 try again later", 1)
		err := s.Send(context.Background(), message("x"))
		var se *mail.SendError
		if !errors.As(err, &se) || !se.Temporary || se.Code != 451 || se.Answer != "451 4.3.0 try again later" {
			t.Fatalf("451 gave %#v, want a temporary SendError with code and answer", err)
		}
		if !mail.IsTemporary(err) || err.Error() != "451 4.3.0 try again later" {
			t.Errorf("IsTemporary = %v, Error() = %q", mail.IsTemporary(err), err)
		}
		if err := s.Send(context.Background(), message("x")); err != nil {
			t.Fatalf("send after 451: %v", err)
		}
		if n := len(srv.WaitFor(t, 1, wait)); n != 1 {
			t.Fatalf("%d messages, want 1", n)
		}
		// The connection that failed was dropped, not trusted again.
		if c := srv.Connections(); c != 2 {
			t.Errorf("%d connections, want 2: the failed one dropped and a new one", c)
		}
	})

	t.Run("PermanentAnswerKeepsText", func(t *testing.T) {
		t.Parallel()
		srv := smtptest.Start(t)
		s := newSMTP(t, mail.SMTPConfig{URL: srv.URL()})
		srv.FailNext(550, "5.1.1 no such user", 1)
		err := s.Send(context.Background(), message("x"))
		var se *mail.SendError
		if !errors.As(err, &se) || se.Temporary || se.Code != 550 || se.Answer != "550 5.1.1 no such user" {
			t.Fatalf("550 gave %#v, want a permanent SendError with answer %q", err, "550 5.1.1 no such user")
		}
		if mail.IsTemporary(err) {
			t.Error("IsTemporary(550) = true")
		}
	})

	t.Run("RecipientRefused", func(t *testing.T) {
		t.Parallel()
		srv := smtptest.Start(t)
		s := newSMTP(t, mail.SMTPConfig{URL: srv.URL()})
		srv.FailNextRcpt(550, "5.1.1 <bob@example.com>: Recipient address rejected", 1)
		err := s.Send(context.Background(), message("x"))
		var se *mail.SendError
		if !errors.As(err, &se) || se.Temporary || se.Code != 550 || se.Answer != "550 5.1.1 <bob@example.com>: Recipient address rejected" {
			t.Fatalf("RCPT 550 gave %#v", err)
		}
		srv.FailNextRcpt(452, "4.2.2 mailbox full", 1)
		err = s.Send(context.Background(), message("x"))
		if !errors.As(err, &se) || !se.Temporary || se.Code != 452 || se.Answer != "452 4.2.2 mailbox full" {
			t.Fatalf("RCPT 452 gave %#v", err)
		}
	})

	t.Run("ConnectionRefusedIsTemporary", func(t *testing.T) {
		t.Parallel()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close()
		err = newSMTP(t, mail.SMTPConfig{URL: "smtp://" + addr}).Send(context.Background(), message("x"))
		var se *mail.SendError
		if !errors.As(err, &se) || !se.Temporary || se.Code != 0 {
			t.Fatalf("refused connection gave %#v, want a temporary SendError", err)
		}
		var opErr *net.OpError
		if !errors.As(err, &opErr) {
			t.Errorf("%v does not unwrap to the *net.OpError", err)
		}
	})

	t.Run("CanceledContextIsTemporary", func(t *testing.T) {
		t.Parallel()
		srv := smtptest.Start(t)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		err := newSMTP(t, mail.SMTPConfig{URL: srv.URL(), Rate: 0.001}).Send(ctx, message("x"))
		if !errors.Is(err, context.Canceled) || !mail.IsTemporary(err) {
			t.Fatalf("canceled context gave %v", err)
		}
	})
}

func TestSMTPConnections(t *testing.T) {
	t.Parallel()

	t.Run("SequentialSendsShareOneConnection", func(t *testing.T) {
		t.Parallel()
		srv := smtptest.Start(t)
		s := newSMTP(t, mail.SMTPConfig{URL: srv.URL()})
		for range 20 {
			if err := s.Send(context.Background(), message("x")); err != nil {
				t.Fatal(err)
			}
		}
		srv.WaitFor(t, 20, wait)
		if c := srv.Connections(); c != 1 {
			t.Fatalf("20 sends in a row opened %d connections, want 1", c)
		}
	})

	t.Run("AnEmailIsMailRcptDataOnly", func(t *testing.T) {
		// Four round trips per email on a reused connection (MAIL, RCPT,
		// DATA, the data): a NOOP to probe the connection or an RSET after
		// each email would cost a flush wave two more.
		t.Parallel()
		srv := smtptest.Start(t, smtptest.CountCommands())
		s := newSMTP(t, mail.SMTPConfig{URL: srv.URL()})
		for range 5 {
			if err := s.Send(context.Background(), message("x")); err != nil {
				t.Fatal(err)
			}
		}
		srv.WaitFor(t, 5, wait)
		got := srv.Commands()
		want := map[string]int{"EHLO": 1, "MAIL": 5, "RCPT": 5, "DATA": 5}
		if !maps.Equal(got, want) {
			t.Fatalf("commands %v, want %v", got, want)
		}
	})

	t.Run("ConcurrentSendsStayWithinConcurrency", func(t *testing.T) {
		t.Parallel()
		srv := smtptest.Start(t)
		s := newSMTP(t, mail.SMTPConfig{URL: srv.URL(), Concurrency: 3})
		var wg sync.WaitGroup
		errs := make(chan error, 20)
		for range 20 {
			wg.Go(func() { errs <- s.Send(context.Background(), message("x")) })
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		srv.WaitFor(t, 20, wait)
		if c := srv.Connections(); c > 3 {
			t.Fatalf("20 concurrent sends opened %d connections, want at most 3", c)
		}
	})

	t.Run("ConcurrencyCapsMessagesInFlight", func(t *testing.T) {
		t.Parallel()
		srv := smtptest.Start(t)
		s := newSMTP(t, mail.SMTPConfig{URL: srv.URL(), Concurrency: 3})
		srv.Hold()
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				if err := s.Send(context.Background(), message("x")); err != nil {
					t.Error(err)
				}
			})
		}
		deadline := time.Now().Add(wait)
		for srv.InFlight() < 3 && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		// Give a fourth connection every chance to appear.
		time.Sleep(100 * time.Millisecond)
		inFlight, open := srv.InFlight(), srv.OpenConnections()
		srv.Release(true)
		wg.Wait()
		if inFlight != 3 || open != 3 {
			t.Fatalf("with Concurrency 3: %d messages in flight on %d connections, want 3 on 3", inFlight, open)
		}
		if n := len(srv.WaitFor(t, 8, wait)); n != 8 {
			t.Fatalf("%d messages, want 8", n)
		}
	})

	t.Run("ServerDroppedIdleConnection", func(t *testing.T) {
		t.Parallel()
		srv := smtptest.Start(t)
		s := newSMTP(t, mail.SMTPConfig{URL: srv.URL()})
		if err := s.Send(context.Background(), message("x")); err != nil {
			t.Fatal(err)
		}
		srv.DropConnections()
		// The pooled connection is dead; Send notices before sending
		// anything and redials instead of failing.
		if err := s.Send(context.Background(), message("x")); err != nil {
			t.Fatalf("send after the server dropped the idle connection: %v", err)
		}
		srv.WaitFor(t, 2, wait)
		if c := srv.Connections(); c != 2 {
			t.Errorf("%d connections, want 2", c)
		}
	})

	t.Run("CloseHangsUp", func(t *testing.T) {
		t.Parallel()
		srv := smtptest.Start(t)
		s, err := mail.NewSMTP(mail.SMTPConfig{URL: srv.URL()}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Send(context.Background(), message("x")); err != nil {
			t.Fatal(err)
		}
		if n := srv.OpenConnections(); n != 1 {
			t.Fatalf("%d open connections after a send, want the pooled 1", n)
		}
		s.Close()
		waitOpen(t, srv, 0)
		if err := s.Send(context.Background(), message("x")); !errors.Is(err, mail.ErrClosed) {
			t.Fatalf("send after Close: %v, want ErrClosed", err)
		}
	})

	t.Run("RateLimits", func(t *testing.T) {
		t.Parallel()
		srv := smtptest.Start(t)
		// A burst of 50 goes at once, the next 10 at 50 a second: at
		// least 200 ms in all.
		s := newSMTP(t, mail.SMTPConfig{URL: srv.URL(), Rate: 50})
		start := time.Now()
		for range 60 {
			if err := s.Send(context.Background(), message("x")); err != nil {
				t.Fatal(err)
			}
		}
		if took := time.Since(start); took < 180*time.Millisecond {
			t.Fatalf("60 sends at 50/s took %v, want at least 200ms", took)
		}
	})
}

// waitOpen waits until the server has n open connections.
func waitOpen(t *testing.T, srv *smtptest.Server, n int) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for srv.OpenConnections() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d open connections, want %d", srv.OpenConnections(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestSMTPSecurity(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("AuthOverSTARTTLS", func(t *testing.T) {
		t.Parallel()
		srv := smtptest.Start(t, smtptest.WithSTARTTLS())
		srv.RequireAuth("lull", "s3cret")
		u := withUser(srv.URL(), "lull", "s3cret") + "?insecure_skip_verify=true"
		if err := newSMTP(t, mail.SMTPConfig{URL: u}).Send(ctx, message("x")); err != nil {
			t.Fatalf("send with the right password: %v", err)
		}
		got := srv.WaitFor(t, 1, wait)[0]
		if !got.TLS || got.User != "lull" {
			t.Fatalf("message arrived with TLS=%v as %q, want over TLS as lull", got.TLS, got.User)
		}
		wrong := withUser(srv.URL(), "lull", "wrong") + "?insecure_skip_verify=true"
		err := newSMTP(t, mail.SMTPConfig{URL: wrong}).Send(ctx, message("x"))
		var se *mail.SendError
		if !errors.As(err, &se) || se.Code != 535 || !se.Temporary {
			t.Fatalf("wrong password gave %#v, want a temporary SendError with code 535", err)
		}
		if strings.Contains(err.Error(), "wrong") {
			t.Errorf("error %q repeats the password", err)
		}
		if err := newSMTP(t, mail.SMTPConfig{URL: srv.URL() + "?insecure_skip_verify=true"}).Send(ctx, message("x")); err == nil {
			t.Fatal("a server demanding AUTH accepted mail without it")
		}
		if n := len(srv.Messages()); n != 1 {
			t.Fatalf("%d messages accepted, want only the authenticated one", n)
		}
	})

	t.Run("NoPasswordInPlainText", func(t *testing.T) {
		t.Parallel()
		srv := smtptest.Start(t)
		srv.RequireAuth("lull", "s3cret")
		u := withUser(srv.URL(), "lull", "s3cret")
		if err := newSMTP(t, mail.SMTPConfig{URL: u}).Send(ctx, message("x")); err == nil {
			t.Fatal("a password went out without TLS and without insecure_auth")
		}
		if err := newSMTP(t, mail.SMTPConfig{URL: u + "?insecure_auth=true"}).Send(ctx, message("x")); err != nil {
			t.Fatalf("insecure_auth=true: %v", err)
		}
		if got := srv.WaitFor(t, 1, wait)[0]; got.TLS || got.User != "lull" {
			t.Fatalf("TLS=%v user=%q", got.TLS, got.User)
		}
	})

	t.Run("RequiredSTARTTLS", func(t *testing.T) {
		t.Parallel()
		plain := smtptest.Start(t)
		if err := newSMTP(t, mail.SMTPConfig{URL: plain.URL() + "?starttls=required"}).Send(ctx, message("x")); err == nil || !mail.IsTemporary(err) {
			t.Fatalf("starttls=required against a server without STARTTLS gave %v, want a temporary error", err)
		}
		if n := len(plain.Messages()); n != 0 {
			t.Fatalf("starttls=required sent %d messages in plain text", n)
		}
		tlsSrv := smtptest.Start(t, smtptest.WithSTARTTLS())
		if err := newSMTP(t, mail.SMTPConfig{URL: tlsSrv.URL() + "?starttls=required&insecure_skip_verify=true"}).Send(ctx, message("x")); err != nil {
			t.Fatal(err)
		}
		if got := tlsSrv.WaitFor(t, 1, wait)[0]; !got.TLS {
			t.Fatal("starttls=required delivered without TLS")
		}
	})

	t.Run("OpportunisticSTARTTLSVerifiesCertificates", func(t *testing.T) {
		t.Parallel()
		srv := smtptest.Start(t, smtptest.WithSTARTTLS())
		// The certificate is self-signed: without insecure_skip_verify the
		// upgrade fails, and the message must not go out in plain text.
		if err := newSMTP(t, mail.SMTPConfig{URL: srv.URL()}).Send(ctx, message("x")); err == nil {
			t.Fatal("an unverifiable certificate was accepted")
		}
		if n := len(srv.Messages()); n != 0 {
			t.Fatalf("%d messages went out after a failed TLS upgrade", n)
		}
		if err := newSMTP(t, mail.SMTPConfig{URL: srv.URL() + "?insecure_skip_verify=true"}).Send(ctx, message("x")); err != nil {
			t.Fatal(err)
		}
		if got := srv.WaitFor(t, 1, wait)[0]; !got.TLS {
			t.Fatal("STARTTLS was offered but not used")
		}
	})

	t.Run("ImplicitTLS", func(t *testing.T) {
		t.Parallel()
		srv := smtptest.Start(t, smtptest.WithImplicitTLS())
		srv.RequireAuth("lull", "s3cret")
		if !strings.HasPrefix(srv.URL(), "smtps://") {
			t.Fatalf("URL = %q", srv.URL())
		}
		u := withUser(srv.URL(), "lull", "s3cret") + "?insecure_skip_verify=true"
		if err := newSMTP(t, mail.SMTPConfig{URL: u}).Send(ctx, message("x")); err != nil {
			t.Fatal(err)
		}
		if got := srv.WaitFor(t, 1, wait)[0]; !got.TLS || got.User != "lull" {
			t.Fatalf("TLS=%v user=%q", got.TLS, got.User)
		}
	})
}

func TestNewSMTPRejectsBadURLs(t *testing.T) {
	t.Parallel()
	for _, u := range []string{
		"", "netmail.example:25", "http://netmail.example", "smtp://", "smtp://user:hunter2@netmail.example:port",
		"smtp://netmail.example?starttls=maybe", "smtps://netmail.example?starttls=required", "smtp://netmail.example?tls=on",
	} {
		_, err := mail.NewSMTP(mail.SMTPConfig{URL: u}, nil)
		if err == nil || !strings.Contains(err.Error(), "LULL_SMTP_URL") {
			t.Errorf("%q: got %v, want an error naming LULL_SMTP_URL", u, err)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%q: error %q repeats the password", u, err)
		}
	}
}

// What a relay may answer to a message on a connection that carried one
// already, now that nothing checks the connection before MAIL.
func TestSMTPAnswersOnAReusedConnection(t *testing.T) {
	t.Parallel()
	// sentOne is a sender whose pooled connection carried one message.
	sentOne := func(t *testing.T) (*smtptest.Server, *mail.SMTP) {
		srv := smtptest.Start(t)
		s := newSMTP(t, mail.SMTPConfig{URL: srv.URL()})
		if err := s.Send(context.Background(), message("first")); err != nil {
			t.Fatal(err)
		}
		srv.WaitFor(t, 1, wait)
		return srv, s
	}

	t.Run("ClosingAtMailSendsOnANewConnection", func(t *testing.T) {
		t.Parallel()
		srv, s := sentOne(t)
		srv.FailNextMail(421, "4.7.0 too many messages on this connection", 1, true)
		if err := s.Send(context.Background(), message("second")); err != nil {
			t.Fatalf("send after 421 to MAIL on a reused connection: %v", err)
		}
		if n, c := len(srv.WaitFor(t, 2, wait)), srv.Connections(); n != 2 || c != 2 {
			t.Errorf("%d messages on %d connections, want 2 on 2", n, c)
		}
	})

	t.Run("ClosingAtMailOnANewConnectionKeepsTheAnswer", func(t *testing.T) {
		t.Parallel()
		srv, s := sentOne(t)
		// The reused connection and the new one both hear 421.
		srv.FailNextMail(421, "4.7.0 too busy", 2, true)
		err := s.Send(context.Background(), message("second"))
		var se *mail.SendError
		if !errors.As(err, &se) || !se.Temporary || se.Code != 421 || se.Answer != "421 4.7.0 too busy" {
			t.Fatalf("421 to MAIL twice gave %#v, want a temporary SendError with the server's code and answer", err)
		}
		if m := srv.Mails(); m != 3 {
			t.Errorf("%d MAIL commands, want 3 (first message, reused, redialled)", m)
		}
	})

	t.Run("RefusedAtMailIsNotOfferedAgain", func(t *testing.T) {
		t.Parallel()
		srv, s := sentOne(t)
		srv.FailNextMail(550, "5.7.1 sender refused", 1, false)
		err := s.Send(context.Background(), message("second"))
		var se *mail.SendError
		if !errors.As(err, &se) || se.Temporary || se.Code != 550 || se.Answer != "550 5.7.1 sender refused" {
			t.Fatalf("550 to MAIL gave %#v, want a permanent SendError with the answer", err)
		}
		if m, c := srv.Mails(), srv.Connections(); m != 2 || c != 1 {
			t.Errorf("%d MAIL commands on %d connections, want 2 on 1: a refusal is not sent again", m, c)
		}
	})

	t.Run("NoAnswerToTheDataIsTemporary", func(t *testing.T) {
		t.Parallel()
		srv, s := sentOne(t)
		srv.DropAfterData(1)
		err := s.Send(context.Background(), message("second"))
		var se *mail.SendError
		if !errors.As(err, &se) || !se.Temporary || se.Code != 0 {
			t.Fatalf("a connection closed before the answer to the data gave %#v, want a temporary SendError", err)
		}
		if m := srv.Mails(); m != 2 {
			t.Errorf("%d MAIL commands, want 2: a message that may have arrived is not resent by the sender", m)
		}
		// The connection is not trusted again; the next message goes.
		if err := s.Send(context.Background(), message("third")); err != nil {
			t.Fatal(err)
		}
		if c := srv.Connections(); c != 2 {
			t.Errorf("%d connections, want 2", c)
		}
	})
}
