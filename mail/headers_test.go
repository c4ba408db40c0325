package mail_test

import (
	"bytes"
	"errors"
	"mime"
	netmail "net/mail"
	"strings"
	"testing"

	"github.com/lull-dev/lull/mail"
	"github.com/lull-dev/lull/mailtemplates"
)

// wire builds m and returns the bytes an SMTP server gets.
func wire(t *testing.T, subject string, change func(m *mailtemplates.Message)) string {
	t.Helper()
	m := message(subject)
	if change != nil {
		change(m)
	}
	msg, err := mail.Build(m)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := msg.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

// TestAutomaticHeaders: a notification says it is automatic (RFC 3834),
// so out-of-office replies stay away; carries its List-Id; and names its
// thread's root in References and In-Reply-To, so emails about one
// object thread together.
func TestAutomaticHeaders(t *testing.T) {
	t.Parallel()
	raw := wire(t, "x", func(m *mailtemplates.Message) {
		m.ThreadID = "thread-3f2a@example.com"
		m.ListID = `Comments "quoted" <comment-created.example.com>`
	})
	parsed, err := netmail.ReadMessage(strings.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"Auto-Submitted":           "auto-generated",
		"X-Auto-Response-Suppress": "OOF, AutoReply",
		"References":               "<thread-3f2a@example.com>",
		"In-Reply-To":              "<thread-3f2a@example.com>",
		"List-Id":                  `"Comments quoted" <comment-created.example.com>`,
	}
	for k, v := range want {
		if got := parsed.Header.Get(k); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	h := mail.Headers(message("x"))
	if h["Auto-Submitted"] != "auto-generated" || h["References"] != "" {
		t.Errorf("Headers = %v", h)
	}

	t.Run("NonASCIIListName", func(t *testing.T) {
		t.Parallel()
		raw := wire(t, "x", func(m *mailtemplates.Message) { m.ListID = "Коммента́рии <comments.example.com>" })
		parsed, _ := netmail.ReadMessage(strings.NewReader(raw))
		got, err := new(mime.WordDecoder).DecodeHeader(parsed.Header.Get("List-Id"))
		if err != nil || got != "Коммента́рии <comments.example.com>" {
			t.Errorf("List-Id = %q (%v)", got, err)
		}
	})

	t.Run("LongNonASCIIListNameFolds", func(t *testing.T) {
		t.Parallel()
		raw := wire(t, "x", func(m *mailtemplates.Message) { m.ListID = strings.Repeat("日本語", 50) + " <x.example.com>" })
		head, _, _ := strings.Cut(raw, "\r\n\r\n")
		for _, l := range strings.Split(head, "\r\n") {
			if len(l) > 78 && !strings.HasPrefix(l, "Content-Type") {
				t.Errorf("header line of %d characters: %q", len(l), l)
			}
		}
		parsed, _ := netmail.ReadMessage(strings.NewReader(raw))
		got, err := new(mime.WordDecoder).DecodeHeader(parsed.Header.Get("List-Id"))
		if err != nil || got != strings.Repeat("日本語", 13)+"日 <x.example.com>" {
			t.Errorf("List-Id = %q (%v)", got, err)
		}
	})

	t.Run("Refused", func(t *testing.T) {
		t.Parallel()
		for _, c := range []func(m *mailtemplates.Message){
			func(m *mailtemplates.Message) { m.ThreadID = "no-at" },
			func(m *mailtemplates.Message) { m.ThreadID = "a@b\r\nBcc: x@y" },
			func(m *mailtemplates.Message) { m.ListID = "Name <no dots>" },
			func(m *mailtemplates.Message) { m.ListID = "Name <a.b>\r\nBcc: x@y" },
			func(m *mailtemplates.Message) { m.ListID = "Name" },
		} {
			m := message("x")
			c(m)
			if _, err := mail.Build(m); !errors.Is(err, mail.ErrBadMessage) {
				t.Errorf("%+v: Build gave %v, want ErrBadMessage", m, err)
			}
		}
	})
}

// TestLongUnicodeSubjectStartsOnItsLine: go-mail wrote "Subject:" alone
// on its first line and the encoded words below it. Now the first encoded
// word is on the Subject line, every line fits RFC 2047's 76 characters,
// and the subject decodes to what was given.
func TestLongUnicodeSubjectStartsOnItsLine(t *testing.T) {
	t.Parallel()
	for _, subject := range []string{
		strings.Repeat("Fatima 🎉 shared «Q3 plan» ", 5),
		strings.Repeat("日本語の件名", 20),
		"é",
	} {
		subject = strings.TrimSpace(subject)
		raw := wire(t, subject, nil)
		head, _, _ := strings.Cut(raw, "\r\n\r\n")
		i := strings.Index(head, "\r\nSubject:")
		if i < 0 {
			t.Fatalf("no Subject in\n%s", head)
		}
		lines := strings.Split(head[i+2:], "\r\n")
		if strings.TrimSpace(strings.TrimPrefix(lines[0], "Subject:")) == "" {
			t.Errorf("Subject's first line is empty:\n%s", head[i+2:])
		}
		for _, l := range lines {
			if !strings.HasPrefix(l, "Subject:") && !strings.HasPrefix(l, " ") {
				break
			}
			if len(l) > 76 {
				t.Errorf("line of %d characters: %q", len(l), l)
			}
		}
		parsed, err := netmail.ReadMessage(strings.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		got, err := new(mime.WordDecoder).DecodeHeader(parsed.Header.Get("Subject"))
		if err != nil || got != subject {
			t.Errorf("Subject decodes to %q (%v), want %q", got, err, subject)
		}
	}
}

// TestLongASCIISubjectStartsOnItsLine: go-mail folds an ASCII subject
// with a word too long for the first line (a file name, a URL) by
// leaving "Subject:" alone on it, which some clients and filters read as
// an empty subject; a 998-character word made a line over the limit of
// 998. Now the first line holds the subject's start, words are folded
// at spaces, no line is over 998, and the subject reads back whole.
func TestLongASCIISubjectStartsOnItsLine(t *testing.T) {
	t.Parallel()
	for _, subject := range []string{
		strings.Repeat("x", 150),
		"Acme Docs: " + strings.Repeat("y", 120) + " commented on " + strings.Repeat("z", 40),
		strings.Repeat("x", 998),
		strings.Repeat("a few words ", 40) + "end",
	} {
		raw := wire(t, subject, nil)
		head, _, _ := strings.Cut(raw, "\r\n\r\n")
		i := strings.Index(head, "\r\nSubject:")
		lines := strings.Split(head[i+2:], "\r\n")
		if strings.TrimSpace(strings.TrimPrefix(lines[0], "Subject:")) == "" {
			t.Errorf("Subject's first line is empty:\n%.300s", head[i+2:])
		}
		for _, l := range lines {
			if len(l) > 998 {
				t.Errorf("line of %d characters", len(l))
			}
		}
		parsed, err := netmail.ReadMessage(strings.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		got, err := new(mime.WordDecoder).DecodeHeader(parsed.Header.Get("Subject"))
		if err != nil || got != subject {
			t.Errorf("Subject decodes to %q (%v), want %q", got, err, subject)
		}
	}
}
