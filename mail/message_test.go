package mail_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"mime"
	netmail "net/mail"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/lull-dev/lull/mail"
	"github.com/lull-dev/lull/mailtemplates"
)

func TestHeaders(t *testing.T) {
	t.Parallel()

	t.Run("WhatSMTPGets", func(t *testing.T) {
		t.Parallel()
		m := message("Fatima 🎉 shared «Q3 plan»")
		m.ToName = "Zoë Stone"
		h := mail.Headers(m)
		want := map[string]string{
			"Subject":               "Fatima 🎉 shared «Q3 plan»",
			"Message-ID":            "<batch-42@example.com>",
			"List-Unsubscribe":      "<https://lull.example/unsubscribe?token=abc>",
			"List-Unsubscribe-Post": "List-Unsubscribe=One-Click",
			"MIME-Version":          "1.0",
			"Date":                  "Sun, 22 Nov 2026 10:00:00 +0000",
			"Auto-Submitted":        "auto-generated",
		}
		for k, v := range want {
			if h[k] != v {
				t.Errorf("%s = %q, want %q", k, h[k], v)
			}
		}
		if from, err := netmail.ParseAddress(h["From"]); err != nil || from.Address != "lull@example.com" {
			t.Errorf("From = %q (%v)", h["From"], err)
		}
		if to, err := netmail.ParseAddress(h["To"]); err != nil || to.Name != "Zoë Stone" || to.Address != "bob@example.com" {
			t.Errorf("To = %q (%v)", h["To"], err)
		}
		if !strings.HasPrefix(h["Content-Type"], "multipart/alternative;") || !strings.Contains(h["Content-Type"], "boundary=") {
			t.Errorf("Content-Type = %q", h["Content-Type"])
		}
		if len(h) != 10 {
			t.Errorf("%d headers, want 10: %v", len(h), h)
		}
	})

	t.Run("PlainHTTPUnsubscribe", func(t *testing.T) {
		t.Parallel()
		// A local demo runs on http://localhost; RFC 8058 wants https, but
		// the headers still help a mail client find the link.
		m := message("x")
		m.UnsubscribeURL = "http://localhost:8080/unsubscribe?token=abc"
		h := mail.Headers(m)
		if h["List-Unsubscribe"] != "<http://localhost:8080/unsubscribe?token=abc>" || h["List-Unsubscribe-Post"] != "List-Unsubscribe=One-Click" {
			t.Fatalf("List-Unsubscribe = %q, List-Unsubscribe-Post = %q", h["List-Unsubscribe"], h["List-Unsubscribe-Post"])
		}
	})

	t.Run("NoUnsubscribeURL", func(t *testing.T) {
		t.Parallel()
		m := message("x")
		m.UnsubscribeURL = ""
		h := mail.Headers(m)
		if _, ok := h["List-Unsubscribe"]; ok {
			t.Fatalf("List-Unsubscribe = %q without a URL", h["List-Unsubscribe"])
		}
	})

	t.Run("UnbuildableMessageStillShows", func(t *testing.T) {
		t.Parallel()
		m := message("Hello\r\nBcc: x@y")
		m.From = "not an address"
		h := mail.Headers(m)
		if h["From"] != "not an address" || h["Subject"] != "Hello Bcc: x@y" || h["Message-ID"] != "<batch-42@example.com>" {
			t.Fatalf("headers = %v", h)
		}
	})
}

func TestBuild(t *testing.T) {
	t.Parallel()

	t.Run("MessageIDWrappedOnce", func(t *testing.T) {
		t.Parallel()
		for _, id := range []string{"batch-42@example.com", "<batch-42@example.com>"} {
			m := message("x")
			m.MessageID = id
			msg, err := mail.Build(m)
			if err != nil {
				t.Fatal(err)
			}
			if got := msg.GetMessageID(); got != "<batch-42@example.com>" {
				t.Errorf("Message-ID from %q = %q, want <batch-42@example.com>", id, got)
			}
		}
	})

	t.Run("RefusesWhatItCannotSendFaithfully", func(t *testing.T) {
		t.Parallel()
		for name, change := range map[string]func(m *mailtemplates.Message){
			"EmptyMessageID":      func(m *mailtemplates.Message) { m.MessageID = "" },
			"MessageIDWithoutAt":  func(m *mailtemplates.Message) { m.MessageID = "batch-42" },
			"MessageIDWithSpace":  func(m *mailtemplates.Message) { m.MessageID = "batch 42@example.com" },
			"MessageIDWithCRLF":   func(m *mailtemplates.Message) { m.MessageID = "batch-42@example.com\r\nBcc: x@y" },
			"MessageIDNotASCII":   func(m *mailtemplates.Message) { m.MessageID = "batch-42@exämple.com" },
			"BadFrom":             func(m *mailtemplates.Message) { m.From = "lull at example" },
			"BadTo":               func(m *mailtemplates.Message) { m.To = "" },
			"RelativeUnsubscribe": func(m *mailtemplates.Message) { m.UnsubscribeURL = "/unsubscribe?token=abc" },
			"MailtoUnsubscribe":   func(m *mailtemplates.Message) { m.UnsubscribeURL = "mailto:unsubscribe@example.com" },
			"UnsubscribeWithCRLF": func(m *mailtemplates.Message) { m.UnsubscribeURL = "http://x.example/u\r\nBcc: x@y" },
		} {
			m := message("x")
			change(m)
			if _, err := mail.Build(m); !errors.Is(err, mail.ErrBadMessage) {
				t.Errorf("%s: Build gave %v, want ErrBadMessage", name, err)
			}
		}
	})

	t.Run("FromWithDisplayName", func(t *testing.T) {
		t.Parallel()
		m := message("x")
		m.From = "Acme Notifications <notify@acme.example>"
		msg, err := mail.Build(m)
		if err != nil {
			t.Fatal(err)
		}
		from := msg.GetFrom()
		if len(from) != 1 || from[0].Name != "Acme Notifications" || from[0].Address != "notify@acme.example" {
			t.Fatalf("From = %v", from)
		}
	})

	t.Run("ZeroDateGetsNow", func(t *testing.T) {
		t.Parallel()
		m := message("x")
		m.Date = time.Time{}
		h := mail.Headers(m)
		d, err := netmail.ParseDate(h["Date"])
		if err != nil || time.Since(d) > time.Minute {
			t.Fatalf("Date = %q (%v), want about now", h["Date"], err)
		}
	})
}

// TestEncodedWordsStayLiteral renders and builds real emails whose actor,
// object, recipient and sender names hold RFC 2047 encoded words of
// bidirectional controls and control characters, then reads the bytes
// back as a mail client would: neither the decoded Subject nor a decoded
// display name may hold such a character. The raw To and From are also
// decoded word by word, as lenient clients do even inside quotes.
func TestEncodedWordsStayLiteral(t *testing.T) {
	t.Parallel()
	hostile := []string{
		"=?utf-8?q?=E2=80=AE?=",
		"=?UTF-8?Q?=E2=81=A6evil=E2=81=A9?=",
		"=?utf-8?b?4oCu?=",
		"=?utf-8?q?=07=1B=0D=0ABcc=3A_x=40y?=",
		"Zoë =?utf-8?q?=E2=80=AB?= =?iso-8859-1?q?=85?=",
	}
	for _, word := range hostile {
		in := mailtemplates.Input{
			BatchID: 42, Mode: "immediate",
			Recipient: mailtemplates.Recipient{ID: "u_bob", Name: "Bob " + word, Email: "bob@example.com"},
			Groups: []mailtemplates.Group{{
				Type:  mailtemplates.Type{Key: "app.shared", Name: "Shares", ItemText: "{{actor.name}} shared {{object.title}}", DisplayLimit: 10},
				Total: 1, ActorCount: 1, ActorNames: []string{"Alice " + word},
				Items: []mailtemplates.Item{{Actor: mailtemplates.Actor{ID: "u_alice", Name: "Alice " + word},
					Object: mailtemplates.Object{Title: "Plan " + word}}},
			}},
			From: word + " <lull@example.com>", MessageID: "batch-42@example.com", Date: time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC),
			SettingsURL: "https://lull.example/settings", UnsubscribeURL: "https://lull.example/unsubscribe?token=u",
		}
		m, err := mailtemplates.Render(in)
		if err != nil {
			t.Fatal(err)
		}
		msg, err := mail.Build(m)
		if err != nil {
			t.Fatalf("%q: %v", word, err)
		}
		var buf bytes.Buffer
		if _, err := msg.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		parsed, err := netmail.ReadMessage(&buf)
		if err != nil {
			t.Fatal(err)
		}
		dec := mime.WordDecoder{CharsetReader: latin1Reader}
		subject, err := dec.DecodeHeader(parsed.Header.Get("Subject"))
		if err != nil {
			t.Fatalf("%q: Subject %q: %v", word, parsed.Header.Get("Subject"), err)
		}
		if !strings.Contains(subject, "Alice") {
			t.Errorf("%q: Subject %q lost the actor", word, subject)
		}
		decoded := map[string]string{"Subject": subject}
		for _, h := range []string{"From", "To"} {
			addrs, err := parsed.Header.AddressList(h)
			if err != nil || len(addrs) != 1 {
				t.Fatalf("%q: %s %q: %v", word, h, parsed.Header.Get(h), err)
			}
			decoded[h+" name"] = addrs[0].Name
			decoded[h+" leniently"], _ = dec.DecodeHeader(parsed.Header.Get(h))
		}
		for what, v := range decoded {
			if i := strings.IndexFunc(v, reordersOrControls); i >= 0 {
				t.Errorf("%q: decoded %s %q holds %U", word, what, v, []rune(v[i:])[0])
			}
		}
	}
}

// reordersOrControls reports a character no header may decode to: a
// bidirectional embedding, override or isolate, or a control character.
func reordersOrControls(r rune) bool {
	return (r >= 0x202A && r <= 0x202E) || (r >= 0x2066 && r <= 0x2069) || unicode.IsControl(r)
}

// latin1Reader lets the decoder read ISO-8859-1 words, whose byte 0x85 is
// the control character NEL.
func latin1Reader(charset string, in io.Reader) (io.Reader, error) {
	if !strings.EqualFold(charset, "iso-8859-1") {
		return nil, fmt.Errorf("charset %s", charset)
	}
	b, err := io.ReadAll(in)
	var s strings.Builder
	for _, c := range b {
		s.WriteRune(rune(c))
	}
	return strings.NewReader(s.String()), err
}
