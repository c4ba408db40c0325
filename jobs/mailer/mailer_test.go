package mailer_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"mime"
	"mime/multipart"
	"net"
	"net/mail"
	"strings"
	"testing"
	"time"

	"github.com/lull-dev/lull/jobs/mailer"
	"github.com/lull-dev/lull/jobs/mailer/smtptest"
	"github.com/lull-dev/lull/mailtemplates"
)

func message(subject string) *mailtemplates.Message {
	return &mailtemplates.Message{
		From: "lull@example.com", To: "bob@example.com", ToName: "Bob Stone", Subject: subject,
		MessageID: "batch-42@example.com", Date: time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC),
		Text: "3 new comments", HTML: "<p>3 new comments</p>", UnsubscribeURL: "https://lull.example/unsubscribe?token=abc",
	}
}

func newSMTP(t *testing.T, url string, concurrency int) *mailer.SMTP {
	t.Helper()
	s, err := mailer.NewSMTP(mailer.SMTPConfig{URL: url, Concurrency: concurrency}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func TestSendDeliversMultipartWithHeaders(t *testing.T) {
	t.Parallel()
	srv := smtptest.Start(t)
	s := newSMTP(t, srv.URL(), 1)
	subject := "Fatima 🎉 شارك التطبيق"
	if err := s.Send(context.Background(), message(subject)); err != nil {
		t.Fatal(err)
	}
	got := srv.WaitFor(t, 1, 5*time.Second)[0]
	h := got.Header
	var dec mime.WordDecoder
	if s, err := dec.DecodeHeader(h.Get("Subject")); err != nil || s != subject {
		t.Errorf("Subject decodes to %q (%v), want %q", s, err, subject)
	}
	if v := h["Message-Id"]; len(v) != 1 || v[0] != "<batch-42@example.com>" {
		t.Errorf("Message-ID = %v, want one <batch-42@example.com>", v)
	}
	if v := h.Get("List-Unsubscribe"); v != "<https://lull.example/unsubscribe?token=abc>" {
		t.Errorf("List-Unsubscribe = %q", v)
	}
	if v := h.Get("List-Unsubscribe-Post"); v != "List-Unsubscribe=One-Click" {
		t.Errorf("List-Unsubscribe-Post = %q", v)
	}
	if _, err := mail.ParseDate(h.Get("Date")); err != nil {
		t.Errorf("Date %q: %v", h.Get("Date"), err)
	}
	if from, _ := mail.ParseAddress(h.Get("From")); from == nil || from.Address != "lull@example.com" {
		t.Errorf("From = %q", h.Get("From"))
	}
	media, params, err := mime.ParseMediaType(h.Get("Content-Type"))
	if err != nil || media != "multipart/alternative" {
		t.Fatalf("Content-Type = %q, want multipart/alternative", h.Get("Content-Type"))
	}
	msg, _ := mail.ReadMessage(strings.NewReader(string(got.Data)))
	mr := multipart.NewReader(msg.Body, params["boundary"])
	var types []string
	for {
		p, err := mr.NextPart()
		if err != nil {
			break
		}
		mt, _, _ := mime.ParseMediaType(p.Header.Get("Content-Type"))
		types = append(types, mt)
	}
	if strings.Join(types, ",") != "text/plain,text/html" {
		t.Errorf("parts = %v, want text/plain then text/html", types)
	}
}

func TestSubjectCannotInjectHeaders(t *testing.T) {
	t.Parallel()
	srv := smtptest.Start(t)
	s := newSMTP(t, srv.URL(), 1)
	m := message("Hello\r\nBcc: victim@example.com")
	m.ToName = "Bob\r\nBcc: other@example.com"
	if err := s.Send(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	got := srv.WaitFor(t, 1, 5*time.Second)[0]
	if got.Header.Get("Bcc") != "" || len(got.To) != 1 {
		t.Fatalf("CRLF in subject or name reached the envelope or headers: Bcc=%q to=%v", got.Header.Get("Bcc"), got.To)
	}
}

func TestTemporaryAndPermanentFailures(t *testing.T) {
	t.Parallel()
	srv := smtptest.Start(t)
	s := newSMTP(t, srv.URL(), 1)
	ctx := context.Background()

	srv.FailNext(451, "try again later", 1)
	err := s.Send(ctx, message("one"))
	var se *mailer.SendError
	if !errors.As(err, &se) || !se.Temporary || se.Code != 451 {
		t.Fatalf("451 gave %#v, want a temporary SendError with code 451", err)
	}
	if err := s.Send(ctx, message("one")); err != nil {
		t.Fatalf("send after 451: %v", err)
	}

	srv.FailNext(550, "no such user", 1)
	err = s.Send(ctx, message("two"))
	if !errors.As(err, &se) || se.Temporary || se.Code != 550 || !strings.Contains(se.Answer, "no such user") {
		t.Fatalf("550 gave %#v, want a permanent SendError keeping the answer", err)
	}
}

func TestConnectionRefusedIsTemporary(t *testing.T) {
	t.Parallel()
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	s := newSMTP(t, "smtp://"+addr, 1)
	err := s.Send(context.Background(), message("x"))
	if err == nil || !mailer.IsTemporary(err) {
		t.Fatalf("refused connection gave %v, want a temporary error", err)
	}
}

func TestConnectionsAreReused(t *testing.T) {
	t.Parallel()
	srv := smtptest.Start(t)
	s := newSMTP(t, srv.URL(), 2)
	for range 20 {
		if err := s.Send(context.Background(), message("x")); err != nil {
			t.Fatal(err)
		}
	}
	srv.WaitFor(t, 20, 5*time.Second)
	if c := srv.Connections(); c > 2 {
		t.Fatalf("20 sends opened %d connections, want at most 2", c)
	}
}

func TestParseURL(t *testing.T) {
	t.Parallel()
	good := []string{"smtp://mail.example:25", "smtp://user:pass@mail.example", "smtps://mail.example", "smtp://mail.example?starttls=required"}
	for _, u := range good {
		if _, _, err := mailer.ParseURL(u); err != nil {
			t.Errorf("%s: %v", u, err)
		}
	}
	bad := []string{"", "mail.example:25", "http://mail.example", "smtp://mail.example:port", "smtp://"}
	for _, u := range bad {
		if _, _, err := mailer.ParseURL(u); err == nil || !strings.Contains(err.Error(), "LULL_SMTP_URL") {
			t.Errorf("%q: got %v, want an error naming LULL_SMTP_URL", u, err)
		}
	}
}

func TestAuthAndRequiredStartTLS(t *testing.T) {
	t.Parallel()
	srv := smtptest.Start(t)
	srv.RequireAuth("lull", "s3cret")
	ctx := context.Background()
	u := strings.Replace(srv.URL(), "smtp://", "smtp://lull:s3cret@", 1)
	if err := newSMTP(t, u, 1).Send(ctx, message("no TLS")); err == nil {
		t.Fatal("a password was sent without TLS and without insecure_auth")
	}
	if err := newSMTP(t, u+"?insecure_auth=true", 1).Send(ctx, message("with auth")); err != nil {
		t.Fatalf("send with the right password: %v", err)
	}
	if err := newSMTP(t, srv.URL(), 1).Send(ctx, message("no auth")); err == nil {
		t.Fatal("a server demanding AUTH accepted mail without it")
	}
	// The test server offers no STARTTLS, so requiring it must fail rather
	// than fall back to plain text.
	if err := newSMTP(t, u+"?starttls=required", 1).Send(ctx, message("tls")); err == nil {
		t.Fatal("starttls=required sent over plain text")
	}
	if got := len(srv.Messages()); got != 1 {
		t.Fatalf("%d messages accepted, want only the authenticated one", got)
	}
}
