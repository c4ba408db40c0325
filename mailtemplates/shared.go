package mailtemplates

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	htmltemplate "html/template"
	"strings"
	"time"
)

// ContentKey names what an email says apart from whom it is for: two
// inputs with one key render the same email but for the recipient's
// address, their signed links and the headers derived from their batch
// (Message-ID, thread). It covers the items and their types' texts, the
// language, the time zone (times show in it), the brand, the sender, the
// date and, for a digest, when it opened ("since Monday"). An input whose
// Data cannot be encoded gets a key of its own.
func ContentKey(in Input) string {
	loc := "UTC"
	if in.Recipient.Location != nil {
		loc = in.Recipient.Location.String()
	}
	k := struct {
		Mode, Tag, Requested, Zone, From, ListID, Since string
		Date                                            time.Time
		Groups                                          []Group
		Brand                                           Brand
		Thread                                          bool
		// Which footer parts exist changes the layout.
		HasEmail, HasSettings, HasUnsubscribe bool
	}{
		Mode: in.Mode, Tag: in.Locale.Tag(), Requested: in.Locale.Requested(), Zone: loc, From: in.From, ListID: in.ListID,
		Date: in.Date, Groups: in.Groups, Brand: in.Brand, Thread: in.UnsubscribeThread,
		HasEmail: oneLine(in.Recipient.Email) != "", HasSettings: in.SettingsURL != "", HasUnsubscribe: in.UnsubscribeURL != "",
	}
	if isDigest(in.Mode) {
		// What the digest says of its start, not the instant: digests
		// opened minutes apart read alike.
		zone := in.Recipient.Location
		if zone == nil {
			zone = time.UTC
		}
		now := in.Date
		if now.IsZero() {
			now = time.Now()
		}
		k.Since = sinceLabel(in.Since, now, zone, in.Locale)
	}
	b, err := json.Marshal(k)
	if err != nil {
		return "unique:" + in.MessageID + ":" + in.Recipient.ID
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// RenderMany renders many inputs, each email once for all the inputs
// that share its ContentKey (see RenderAlike). out[i] and errs[i] are
// input i's email and error, as Render would return them.
func RenderMany(ins []Input) (out []*Message, errs []error) {
	out, errs = make([]*Message, len(ins)), make([]error, len(ins))
	byKey := map[string][]int{}
	var keys []string
	for i, in := range ins {
		k := ContentKey(in)
		if _, ok := byKey[k]; !ok {
			keys = append(keys, k)
		}
		byKey[k] = append(byKey[k], i)
	}
	for _, k := range keys {
		idx := byKey[k]
		alike := make([]Input, len(idx))
		for j, i := range idx {
			alike[j] = ins[i]
		}
		ms, es := RenderAlike(alike)
		for j, i := range idx {
			out[i], errs[i] = ms[j], es[j]
		}
	}
	return out, errs
}

// RenderAlike renders inputs that share one ContentKey (the caller
// groups them; RenderMany does it for you): the email once,
// with unique tokens standing for each recipient's address and links,
// then each recipient's copy by putting their values, escaped as the
// HTML part escapes them, where the tokens are. Every copy is byte for
// byte what Render makes of its input alone; a copy that cannot be
// (the shared render had to shrink to fit maxHTML, or a recipient's
// longer values would push theirs over it) is rendered alone. errs[i]
// is input i's error.
func RenderAlike(ins []Input) ([]*Message, []error) {
	out, errs := make([]*Message, len(ins)), make([]error, len(ins))
	alone := func(i int) { out[i], errs[i] = Render(ins[i]) }
	if len(ins) < 2 {
		for i := range ins {
			alone(i)
		}
		return out, errs
	}
	tok := newTokens()
	shared := ins[0]
	shared.Recipient.Email = tok.email(ins[0].Recipient.Email)
	shared.SettingsURL = tok.url(ins[0].SettingsURL, tok.settings)
	shared.UnsubscribeURL = tok.url(ins[0].UnsubscribeURL, tok.unsubscribe)
	m, shrunk, err := renderFit(shared)
	if err != nil || shrunk || tok.foundIn(shared) {
		for i := range ins {
			alone(i)
		}
		return out, errs
	}
	base := encodedSize([]byte(m.HTML))
	for i, in := range ins {
		c, ok := tok.fill(m, in, base)
		if !ok {
			alone(i)
			continue
		}
		out[i] = c
	}
	return out, errs
}

// tokens are the stand-ins of one shared render: random, so no event can
// carry one, and of letters and digits only, so every escaper leaves
// them as they are.
type tokens struct {
	address, settings, unsubscribe string
}

func newTokens() tokens {
	b := make([]byte, 12)
	rand.Read(b)
	n := hex.EncodeToString(b)
	return tokens{address: "lullrcpt" + n + "a", settings: "lullrcpt" + n + "s", unsubscribe: "lullrcpt" + n + "u"}
}

// email stands in for an address, keeping an empty one empty.
func (t tokens) email(v string) string {
	if oneLine(v) == "" {
		return ""
	}
	return t.address + "@x.invalid"
}

// url stands in for a link, keeping an empty one empty. The token is a
// host, which the HTML escaper's URL filter lets through unchanged.
func (t tokens) url(v, tok string) string {
	if v == "" {
		return ""
	}
	return "https://" + tok + ".invalid/"
}

// foundIn reports whether a token already occurs in in's content, which
// only a guessing adversary could arrange; the copies are then not safe
// to fill.
func (t tokens) foundIn(in Input) bool {
	b, _ := json.Marshal(in.Groups)
	return bytes.Contains(b, []byte(t.address[:len(t.address)-1]))
}

// fill makes in's copy of the shared message m. It reports false when
// the copy's HTML might exceed maxHTML, where Render would have shrunk it.
func (t tokens) fill(m *Message, in Input, base int) (*Message, bool) {
	email := oneLine(in.Recipient.Email)
	var htmlPairs, textPairs []string
	added := 0
	add := func(tok, raw, escaped string) {
		if tok == "" {
			return
		}
		htmlPairs = append(htmlPairs, tok, escaped)
		textPairs = append(textPairs, tok, raw)
		added += len(escaped)
	}
	if email != "" {
		add(t.address+"@x.invalid", email, escapeText(email))
	}
	if in.SettingsURL != "" {
		add("https://"+t.settings+".invalid/", in.SettingsURL, escapeHref(in.SettingsURL))
	}
	if in.UnsubscribeURL != "" {
		add("https://"+t.unsubscribe+".invalid/", in.UnsubscribeURL, escapeHref(in.UnsubscribeURL))
	}
	c := *m
	c.HTML = strings.NewReplacer(htmlPairs...).Replace(m.HTML)
	c.Text = strings.NewReplacer(textPairs...).Replace(m.Text)
	// Each value shows at most twice in the HTML part; quoted-printable
	// at most triples a byte and adds a soft break every 73. Under that
	// bound the copy fits without measuring it.
	if base+2*(4*added+12) > maxHTML && encodedSize([]byte(c.HTML)) > maxHTML {
		return nil, false
	}
	c.To, c.ToName = in.Recipient.Email, oneLine(in.Recipient.Name)
	c.MessageID, c.ThreadID, c.ListID = in.MessageID, in.ThreadID, in.ListID
	c.UnsubscribeURL, c.BatchID = in.UnsubscribeURL, in.BatchID
	return &c, true
}

// escapeText and escapeHref escape a value as the HTML layouts do where
// the address and the links appear: in text, and in a link's href.
var (
	textEscaper = htmltemplate.Must(htmltemplate.New("").Parse(`<p>{{.}}</p>`))
	hrefEscaper = htmltemplate.Must(htmltemplate.New("").Parse(`<a href="{{.}}">`))
)

func escapeText(s string) string {
	var b strings.Builder
	textEscaper.Execute(&b, s)
	return strings.TrimSuffix(strings.TrimPrefix(b.String(), "<p>"), "</p>")
}

func escapeHref(s string) string {
	var b strings.Builder
	hrefEscaper.Execute(&b, s)
	return strings.TrimSuffix(strings.TrimPrefix(b.String(), `<a href="`), `">`)
}

// PurposeSharedUnsubscribe signs the unsubscribe link of a shared email.
const PurposeSharedUnsubscribe = "shared-unsubscribe"

// SharedUnsubscribeURL is the footer and List-Unsubscribe link of a
// shared email, the same for every member: it names the type, never a
// recipient, so opening it unsubscribes nobody. Its page asks for an
// address and mails that address its own unsubscribe link, so only the
// owner of an address can stop its emails.
func (l Links) SharedUnsubscribeURL(typeKey string, now time.Time) string {
	exp := now.Add(orDefault(l.UnsubscribeTTL, 90*24*time.Hour)).Truncate(time.Second)
	return l.url("/unsubscribe/shared", l.SignedToken(PurposeSharedUnsubscribe, "", typeKey, exp))
}
