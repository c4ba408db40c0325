package mail

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/mail"
	"net/url"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	gomail "github.com/wneessen/go-mail"

	"github.com/lull-dev/lull/internal/qp"
	"github.com/lull-dev/lull/mailtemplates"
)

// ErrBadMessage is wrapped by Build's errors: the message cannot become a
// valid email (an unparseable address, a malformed Message-ID), so no
// number of retries will send it.
var ErrBadMessage = errors.New("bad message")

// Build turns m into a go-mail message: From, To with the recipient's
// name, Subject (RFC 2047-encoded when not ASCII), Date, the batch's
// Message-ID, multipart/alternative with the text part first and the HTML
// part last (mail clients show the last part they understand), the
// RFC 8058 one-click unsubscribe headers, and the headers of an automatic
// email in a list and a thread (see setAutomatic).
//
// Subject and names come, in part, from events posted by the host app, so
// they pass through headerText before go-mail sees them: nothing taken
// from an event can start a header of its own ("\r\nBcc: ..."), reverse
// the text around it, or smuggle in an RFC 2047 encoded word that a mail
// client would decode into such characters. A From name is decoded by
// mail.ParseAddress first, so an encoded word in LULL_MAIL_FROM is
// checked as what it decodes to. The Message-ID is used exactly as
// given, wrapped in angle brackets once, because a retry must carry the
// same one; a Message-ID that would need changing is refused instead.
func Build(m *mailtemplates.Message) (*gomail.Msg, error) {
	msg, err := buildHeaders(m)
	if err != nil {
		return nil, err
	}
	msg.SetBodyString(gomail.TypeTextPlain, m.Text)
	msg.AddAlternativeString(gomail.TypeTextHTML, m.HTML)
	return msg, nil
}

// buildHeaders is Build without the two parts' text.
func buildHeaders(m *mailtemplates.Message) (*gomail.Msg, error) {
	// No User-Agent: go-mail would announce itself, and lull has no
	// name to give a recipient who reads the raw headers.
	msg := gomail.NewMsg(gomail.WithNoDefaultUserAgent())
	from, err := mail.ParseAddress(oneLine(m.From))
	if err != nil {
		return nil, fmt.Errorf("%w: From %q: %v", ErrBadMessage, m.From, err)
	}
	from.Name = headerText(from.Name)
	msg.SetAddrHeaderFromMailAddress(gomail.HeaderFrom, from)
	if err := setTo(msg, m); err != nil {
		return nil, err
	}
	setSubject(msg, headerText(m.Subject))
	id, err := messageID(m.MessageID)
	if err != nil {
		return nil, err
	}
	msg.SetMessageIDWithValue(id)
	if err := setAutomatic(msg, m); err != nil {
		return nil, err
	}
	date := m.Date
	if date.IsZero() {
		date = time.Now()
	}
	msg.SetDateWithValue(date)
	if m.UnsubscribeURL != "" {
		u, err := unsubscribeURL(m.UnsubscribeURL)
		if err != nil {
			return nil, err
		}
		// SetListUnsubscribeOneClick insists on https, as RFC 8058 does; a
		// local demo on http://localhost still gets the same two headers,
		// which mail clients use to offer the link.
		// A shared email's link opens a page that asks who is leaving:
		// it cannot unsubscribe anyone in one click.
		if len(m.Rcpts) > 0 {
			msg.SetListUnsubscribe(u)
		} else if err := msg.SetListUnsubscribeOneClick(u); err != nil {
			msg.SetListUnsubscribe(u)
			msg.SetListUnsubscribePost()
		}
	}
	return msg, nil
}

// setTo addresses the email: the recipient in To, or, for a shared
// email, every envelope recipient out of sight (as Bcc, which go-mail
// never writes) under an empty group in To.
func setTo(msg *gomail.Msg, m *mailtemplates.Message) error {
	if len(m.Rcpts) == 0 {
		to, err := mail.ParseAddress(oneLine(m.To))
		if err != nil {
			return fmt.Errorf("%w: To %q: %v", ErrBadMessage, m.To, err)
		}
		to.Name = headerText(cmp.Or(m.ToName, to.Name))
		msg.SetAddrHeaderFromMailAddress(gomail.HeaderTo, to)
		return nil
	}
	rcpts := make([]*mail.Address, len(m.Rcpts))
	for i, r := range m.Rcpts {
		a, err := mail.ParseAddress(oneLine(r))
		if err != nil {
			return fmt.Errorf("%w: recipient %q: %v", ErrBadMessage, r, err)
		}
		rcpts[i] = &mail.Address{Address: a.Address}
	}
	msg.SetAddrHeaderFromMailAddress(gomail.HeaderBcc, rcpts...)
	msg.SetGenHeaderPreformatted("To", "undisclosed-recipients:;")
	return nil
}

// setAutomatic writes the headers that say what kind of email this is:
// Auto-Submitted (RFC 3834) and Microsoft's X-Auto-Response-Suppress, so
// out-of-office replies do not come back to a notification; List-Id (RFC
// 2919) so a recipient can filter one type; and References and
// In-Reply-To naming the thread's root, so successive emails about one
// object thread together, as GitHub's and Linear's do. The root itself is
// never sent: mail clients thread on the reference alone.
func setAutomatic(msg *gomail.Msg, m *mailtemplates.Message) error {
	msg.SetGenHeaderPreformatted("Auto-Submitted", "auto-generated")
	// OOF and AutoReply only: suppressing all would also stop the
	// non-delivery reports bounce handling relies on.
	msg.SetGenHeaderPreformatted("X-Auto-Response-Suppress", "OOF, AutoReply")
	if m.ThreadID != "" {
		root, err := messageID(m.ThreadID)
		if err != nil {
			return fmt.Errorf("thread: %w", err)
		}
		msg.SetGenHeaderPreformatted("References", "<"+root+">")
		msg.SetGenHeaderPreformatted("In-Reply-To", "<"+root+">")
	}
	if m.ListID != "" {
		v, err := listID(m.ListID)
		if err != nil {
			return err
		}
		msg.SetGenHeaderPreformatted("List-Id", v)
	}
	return nil
}

// listID checks an RFC 2919 List-Id, `Name <label.domain>`, and writes
// its name, cut to 40 characters, as a phrase: quoted when ASCII, folded
// encoded words otherwise.
func listID(v string) (string, error) {
	name, id, ok := strings.Cut(v, "<")
	id, closed := strings.CutSuffix(strings.TrimSpace(id), ">")
	if !ok || !closed || id == "" || !strings.Contains(id, ".") {
		return "", fmt.Errorf("%w: List-Id %q is not Name <label.domain>", ErrBadMessage, v)
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune(".-_", r)) {
			return "", fmt.Errorf("%w: List-Id %q has a character not allowed there", ErrBadMessage, v)
		}
	}
	// Quotes and backslashes have no place in a list's name; without
	// them, quoting the phrase needs no escapes.
	name = headerText(strings.NewReplacer(`"`, "", `\`, "").Replace(name))
	if r := []rune(name); len(r) > 40 {
		name = strings.TrimSpace(string(r[:40]))
	}
	switch {
	case name == "":
		return "<" + id + ">", nil
	case isASCII(name):
		return `"` + name + `" <` + id + ">", nil
	}
	return encodeWords(name, 76-len("List-Id: "), 75) + "\r\n <" + id + ">", nil
}

// setSubject writes the Subject. go-mail encodes a non-ASCII subject as
// a run of encoded words that starts on a new line, leaving "Subject:"
// alone on the first, which some clients and filters read as an empty
// subject; here the first encoded word starts on the Subject line, and
// every line stays within RFC 2047's 76 characters.
func setSubject(msg *gomail.Msg, s string) {
	if s == "" {
		msg.Subject(s)
		return
	}
	if v, ok := foldASCII(s, len("Subject: ")); ok {
		msg.SetGenHeaderPreformatted(gomail.HeaderSubject, v)
		return
	}
	msg.SetGenHeaderPreformatted(gomail.HeaderSubject, encodeWords(s, 76-len("Subject: "), 76-1))
}

// foldASCII folds an ASCII header value at its spaces, before a word
// that would take its line past 78 characters, but never before the
// first word: go-mail does, and leaves the header's name alone on its
// line. It reports false for non-ASCII text, or a word too long for a
// mail line (998), which encoded words can split.
func foldASCII(s string, col int) (string, bool) {
	if !isASCII(s) {
		return "", false
	}
	var b strings.Builder
	for i, w := range strings.Fields(s) {
		switch {
		case i == 0:
		case col+1+len(w) > 78:
			b.WriteString("\r\n ")
			col = 0
		default:
			b.WriteByte(' ')
		}
		b.WriteString(w)
		if col += 1 + len(w); col > 998 {
			return "", false
		}
	}
	return b.String(), true
}

// encodeWords writes s as Q-encoded words of UTF-8, the first at most
// first characters long and the others at most rest, folded onto their
// own lines. A word never splits a character, as RFC 2047 requires.
func encodeWords(s string, first, rest int) string {
	const open, end = "=?UTF-8?q?", "?="
	var out, word strings.Builder
	limit := first
	flush := func() {
		out.WriteString(open + word.String() + end)
		word.Reset()
	}
	var buf [utf8.UTFMax]byte
	for _, r := range s {
		var enc strings.Builder
		for _, c := range buf[:utf8.EncodeRune(buf[:], r)] {
			switch {
			case c == ' ':
				enc.WriteByte('_')
			case c < 0x80 && (unicode.IsLetter(rune(c)) || unicode.IsDigit(rune(c)) || strings.IndexByte("!*+-/", c) >= 0):
				enc.WriteByte(c)
			default:
				fmt.Fprintf(&enc, "=%02X", c)
			}
		}
		if word.Len() > 0 && len(open)+word.Len()+enc.Len()+len(end) > limit {
			flush()
			out.WriteString("\r\n ")
			limit = rest
		}
		word.WriteString(enc.String())
	}
	flush()
	return out.String()
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// headerNames maps the names Headers reports to the names on the wire as
// net/textproto spells them.
var headerNames = map[string]string{
	"From":                  "From",
	"To":                    "To",
	"Subject":               "Subject",
	"Date":                  "Date",
	"Message-ID":            "Message-Id",
	"References":            "References",
	"In-Reply-To":           "In-Reply-To",
	"List-Id":               "List-Id",
	"Auto-Submitted":        "Auto-Submitted",
	"List-Unsubscribe":      "List-Unsubscribe",
	"List-Unsubscribe-Post": "List-Unsubscribe-Post",
	"MIME-Version":          "Mime-Version",
	"Content-Type":          "Content-Type",
}

// Headers returns the main headers the email carries, for the outbox and
// the preview to show what an SMTP server would get. They are read back
// from the message Build writes, so they cannot drift from what is sent;
// encoded words (a UTF-8 subject or name) are decoded for reading. When
// m cannot be built, Headers shows its fields as given, so a preview can
// still display a message that would be refused.
func Headers(m *mailtemplates.Message) map[string]string {
	msg, err := Build(m)
	if err != nil {
		return rawHeaders(m)
	}
	var buf bytes.Buffer
	if _, err := msg.WriteTo(&buf); err != nil {
		return rawHeaders(m)
	}
	parsed, err := mail.ReadMessage(&buf)
	if err != nil {
		return rawHeaders(m)
	}
	dec := mime.WordDecoder{}
	h := make(map[string]string, len(headerNames))
	for name, wire := range headerNames {
		v := parsed.Header.Get(wire)
		if v == "" {
			continue
		}
		if d, err := dec.DecodeHeader(v); err == nil {
			v = d
		}
		h[name] = v
	}
	return h
}

// rawHeaders is Headers for a message Build refuses.
func rawHeaders(m *mailtemplates.Message) map[string]string {
	h := map[string]string{
		"From":           oneLine(m.From),
		"To":             (&mail.Address{Name: oneLine(m.ToName), Address: oneLine(m.To)}).String(),
		"Subject":        oneLine(m.Subject),
		"Message-ID":     "<" + strings.TrimSuffix(strings.TrimPrefix(oneLine(m.MessageID), "<"), ">") + ">",
		"Date":           m.Date.Format(time.RFC1123Z),
		"MIME-Version":   "1.0",
		"Content-Type":   "multipart/alternative",
		"Auto-Submitted": "auto-generated",
	}
	if m.ThreadID != "" {
		h["References"] = "<" + oneLine(m.ThreadID) + ">"
		h["In-Reply-To"] = h["References"]
	}
	if m.ListID != "" {
		h["List-Id"] = oneLine(m.ListID)
	}
	if m.UnsubscribeURL != "" {
		h["List-Unsubscribe"] = "<" + oneLine(m.UnsubscribeURL) + ">"
		h["List-Unsubscribe-Post"] = "List-Unsubscribe=One-Click"
	}
	return h
}

// headerText is s as a Subject or display name may carry it: one line
// (see oneLine), without bidirectional controls, and with every "=?"
// written "= ?". go-mail sends ASCII text as it is, and mail clients
// decode an "=?charset?q?...?=" in it (even inside a quoted name, though
// RFC 2047 says not to) into whatever bytes it encodes: a right-to-left
// override, a control character. With the space it is no encoded word,
// and what the client shows is what lull meant.
func headerText(s string) string {
	return strings.ReplaceAll(oneLine(s), "=?", "= ?")
}

// oneLine replaces every run of line breaks and other control characters
// (including Unicode's line and paragraph separators, which some clients
// also break on) with one space, drops the bidirectional embedding,
// override and isolate controls, and trims the ends.
func oneLine(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	gap := false
	for _, r := range s {
		if mailtemplates.IsBidiControl(r) {
			continue
		}
		if unicode.IsControl(r) || r == '\u2028' || r == '\u2029' {
			gap = true
			continue
		}
		if gap {
			b.WriteByte(' ')
			gap = false
		}
		b.WriteRune(r)
	}
	return strings.TrimSpace(b.String())
}

// messageID checks id and returns it without angle brackets. It must look
// like RFC 5322's id-left "@" id-right in printable ASCII, because it is
// written as given and must survive unchanged for a retry to be
// recognisable as the same email.
func messageID(id string) (string, error) {
	bare := strings.TrimSuffix(strings.TrimPrefix(id, "<"), ">")
	left, right, ok := strings.Cut(bare, "@")
	if !ok || left == "" || right == "" || strings.Contains(right, "@") {
		return "", fmt.Errorf("%w: Message-ID %q is not local@domain", ErrBadMessage, id)
	}
	for _, r := range bare {
		if r <= ' ' || r > '~' || r == '<' || r == '>' {
			return "", fmt.Errorf("%w: Message-ID %q has a character not allowed there", ErrBadMessage, id)
		}
	}
	return bare, nil
}

// unsubscribeURL checks that u is an absolute http or https URL. go-mail
// writes the List-Unsubscribe header as given for a plain-http URL, so the
// URL must be re-encoded by net/url, which refuses control characters.
func unsubscribeURL(u string) (string, error) {
	parsed, err := url.Parse(u)
	if err != nil || (parsed.Scheme != "https" && parsed.Scheme != "http") || parsed.Host == "" {
		// The URL carries a signed token, so it stays out of the error.
		return "", fmt.Errorf("%w: the unsubscribe URL is not an absolute http(s) URL", ErrBadMessage)
	}
	return parsed.String(), nil
}

// WriteMessage writes m to w exactly as Send hands it to the SMTP server
// after DATA, with env's headers and signature: the email's bytes, for
// tests and benchmarks of the writing path.
func WriteMessage(w io.Writer, m *mailtemplates.Message, env Envelope) error {
	_, data, err := encode(m, env)
	if err != nil {
		return err
	}
	_, err = w.Write(data)
	return err
}

// encode writes m with env as the SMTP server receives it, and returns
// the message too, for its envelope addresses. go-mail writes the
// headers and the MIME frame of two empty parts; the parts' text goes
// into that frame in quoted-printable from internal/qp, the bytes
// go-mail's own encoder writes. Writing each part a byte at a time
// through go-mail, and again through DKIM's copy, was a third of the CPU
// an email cost. A frame not as expected (a go-mail that writes it some
// other way) is written by go-mail whole instead.
func encode(m *mailtemplates.Message, env Envelope) (*gomail.Msg, []byte, error) {
	msg, err := buildHeaders(m)
	if err != nil {
		return nil, nil, err
	}
	msg.SetBodyString(gomail.TypeTextPlain, "")
	msg.AddAlternativeString(gomail.TypeTextHTML, "")
	if err := env.stamp(msg, m); err != nil {
		return nil, nil, err
	}
	var frame bytes.Buffer
	if _, err := msg.WriteTo(&frame); err != nil {
		return nil, nil, err
	}
	data, ok := fill(frame.Bytes(), m.Text, m.HTML)
	if !ok {
		msg.SetBodyString(gomail.TypeTextPlain, m.Text)
		msg.AddAlternativeString(gomail.TypeTextHTML, m.HTML)
		frame.Reset()
		if _, err := msg.WriteTo(&frame); err != nil {
			return nil, nil, err
		}
		data = frame.Bytes()
	}
	if env.DKIM != nil {
		if data, err = env.DKIM.signed(data); err != nil {
			return nil, nil, err
		}
	}
	return msg, data, nil
}

// fill puts text and html, quoted-printable, into the frame go-mail
// wrote for two empty parts: each part's headers end in an empty line,
// which its text follows.
func fill(frame []byte, text, html string) ([]byte, bool) {
	const end = "\r\n\r\n"
	head := bytes.Index(frame, []byte(end))
	if head < 0 {
		return nil, false
	}
	head += len(end)
	first := bytes.Index(frame[head:], []byte(end))
	if first < 0 {
		return nil, false
	}
	first += head + len(end)
	second := bytes.Index(frame[first:], []byte(end))
	if second < 0 {
		return nil, false
	}
	second += first + len(end)
	if !bytes.Contains(frame[head:first], []byte("text/plain")) || !bytes.Contains(frame[first:second], []byte("text/html")) ||
		!bytes.Contains(frame[head:second], []byte("quoted-printable")) {
		return nil, false
	}
	out := make([]byte, 0, len(frame)+len(text)*11/10+len(html)*12/10+256)
	out = append(out, frame[:first]...)
	out = qp.Append(out, []byte(text))
	out = append(out, frame[first:second]...)
	out = qp.Append(out, []byte(html))
	return append(out, frame[second:]...), true
}
