package mailtemplates

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"slices"
	"strconv"
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
		// Which footer parts exist changes the layout, and so do the
		// conversations that have a mute link.
		HasEmail, HasSettings, HasUnsubscribe, HasMute bool
		Muted                                          []string
	}{
		Mode: in.Mode, Tag: in.Locale.Tag(), Requested: in.Locale.Requested(), Zone: loc, From: in.From, ListID: in.ListID,
		Date: in.Date, Groups: in.Groups, Brand: in.Brand, Thread: in.UnsubscribeThread,
		HasEmail: oneLine(in.Recipient.Email) != "", HasSettings: in.SettingsURL != "", HasUnsubscribe: in.UnsubscribeURL != "",
		HasMute: in.MuteURL != "", Muted: mutedThreads(in),
	}
	if isDigest(in.Mode) || len(in.Groups) > 1 {
		// What the digest says of its start, not the instant: digests
		// opened minutes apart read alike. Several groups read as a
		// digest whatever the mode (view.compose).
		zone, now := in.zoneAndDate()
		k.Since = since("", in.Since, now, zone, in.Locale)
	}
	h := sha256.New()
	if err := json.NewEncoder(h).Encode(k); err != nil {
		return "unique:" + in.MessageID + ":" + in.Recipient.ID
	}
	return hex.EncodeToString(h.Sum(nil))
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
	out, errs, _ := renderAlike(ins)
	return out, errs
}

// renderAlike is RenderAlike, also counting the renders it made, which
// its test holds to one for recipients alike.
func renderAlike(ins []Input) (out []*Message, errs []error, renders int) {
	out, errs = make([]*Message, len(ins)), make([]error, len(ins))
	alone := func(i int) { out[i], errs[i] = Render(ins[i]); renders++ }
	if len(ins) < 2 {
		for i := range ins {
			alone(i)
		}
		return out, errs, renders
	}
	threads := mutedThreads(ins[0])
	tok := newTokens(len(threads))
	shared := ins[0]
	shared.Recipient.Email = tok.email(ins[0].Recipient.Email)
	shared.SettingsURL = tok.url(ins[0].SettingsURL, 1)
	shared.UnsubscribeURL = tok.url(ins[0].UnsubscribeURL, 2)
	shared.MuteURL = tok.url(ins[0].MuteURL, 3)
	if len(threads) > 0 {
		shared.ThreadMuteURLs = make(map[string]string, len(threads))
		for i, th := range threads {
			shared.ThreadMuteURLs[th] = tok.slot[firstThreadSlot+i]
		}
	}
	m, shrunk, err := renderFit(shared)
	renders++
	if err != nil || shrunk || tok.foundIn(shared) {
		for i := range ins {
			alone(i)
		}
		return out, errs, renders
	}
	html, text := tok.split(m.HTML), tok.split(m.Text)
	base := encodedSize([]byte(m.HTML))
	for i, in := range ins {
		c, ok := tok.fill(m, html, text, in, threads, base)
		if !ok {
			alone(i)
			continue
		}
		out[i] = c
	}
	return out, errs, renders
}

// mutedThreads are the conversations of in with a mute link, sorted: a
// shared render's token slots follow this order.
func mutedThreads(in Input) []string {
	var out []string
	for th, link := range in.ThreadMuteURLs {
		if link != "" {
			out = append(out, th)
		}
	}
	slices.Sort(out)
	return out
}

// tokens are the stand-ins of one shared render: random, so no event can
// carry one, and of letters and digits only (and, for the address, what
// an address needs), so every escaper leaves them as they are. The
// address, the settings, unsubscribe and mute links are slots 0 to 3;
// each conversation's mute link (mutedThreads) has one after them.
type tokens struct {
	prefix string
	slot   []string
}

// firstThreadSlot is the slot of the first conversation's mute link.
const firstThreadSlot = 4

func newTokens(threads int) tokens {
	b := make([]byte, 12)
	rand.Read(b)
	p := "lullrcpt" + hex.EncodeToString(b)
	slot := []string{p + "a@x.invalid", "https://" + p + "s.invalid/", "https://" + p + "u.invalid/", "https://" + p + "m.invalid/"}
	for i := range threads {
		// The dot after the number keeps "t1" from matching "t12".
		slot = append(slot, "https://"+p+"t"+strconv.Itoa(i)+".invalid/")
	}
	return tokens{prefix: p, slot: slot}
}

// email stands in for an address, keeping an empty one empty.
func (t tokens) email(v string) string {
	if oneLine(v) == "" {
		return ""
	}
	return t.slot[0]
}

// url stands in for a link, keeping an empty one empty. The token is a
// host, which the HTML escaper's URL filter lets through unchanged.
func (t tokens) url(v string, slot int) string {
	if v == "" {
		return ""
	}
	return t.slot[slot]
}

// foundIn reports whether a token already occurs in in's content, which
// only a guessing adversary could arrange; the copies are then not safe
// to fill.
func (t tokens) foundIn(in Input) bool {
	b, _ := json.Marshal(in.Groups)
	return bytes.Contains(b, []byte(t.prefix))
}

// piece is a run of a shared render: literal text, then the slot whose
// value follows it (-1: none).
type piece struct {
	lit  string
	slot int
}

// split cuts a shared render at its tokens, once, so each copy is a
// single pass of copying.
func (t tokens) split(s string) []piece {
	var out []piece
	for {
		i := strings.Index(s, t.prefix)
		if i < 0 {
			return append(out, piece{s, -1})
		}
		slot := -1
		for k, tok := range t.slot {
			// A URL token starts before the prefix, with its scheme.
			start := i - strings.Index(tok, t.prefix)
			if start >= 0 && strings.HasPrefix(s[start:], tok) {
				out = append(out, piece{s[:start], k})
				s, slot = s[start+len(tok):], k
				break
			}
		}
		if slot < 0 { // cannot happen: only the tokens carry the prefix
			out = append(out, piece{s[:i+len(t.prefix)], -1})
			s = s[i+len(t.prefix):]
		}
	}
}

// join fills pieces with values.
func join(ps []piece, vals []string) (string, int) {
	n, added := 0, 0
	for _, p := range ps {
		n += len(p.lit)
		if p.slot >= 0 {
			n += len(vals[p.slot])
			added += len(vals[p.slot])
		}
	}
	var b strings.Builder
	b.Grow(n)
	for _, p := range ps {
		b.WriteString(p.lit)
		if p.slot >= 0 {
			b.WriteString(vals[p.slot])
		}
	}
	return b.String(), added
}

// fill makes in's copy of the shared message m from its pieces. It
// reports false when the copy's HTML might exceed maxHTML, where Render
// would have shrunk it.
func (t tokens) fill(m *Message, html, text []piece, in Input, threads []string, base int) (*Message, bool) {
	email := oneLine(in.Recipient.Email)
	if email != "" && isolated(in, email) != isolated(in, t.slot[0]) {
		// The footer isolates an address written in the other direction
		// than the email's language, and the token's Latin letters are
		// not that address's: it is rendered alone.
		return nil, false
	}
	raw := []string{email, in.SettingsURL, in.UnsubscribeURL, in.MuteURL}
	for _, th := range threads {
		raw = append(raw, in.ThreadMuteURLs[th])
	}
	escaped := make([]string, len(raw))
	escaped[0] = escapeText(email)
	for i, v := range raw[1:] {
		escaped[i+1] = escapeHref(v)
	}
	c := *m
	var added int
	c.HTML, added = join(html, escaped)
	c.Text, _ = join(text, raw)
	// Quoted-printable at most triples a byte and adds a three-byte soft
	// break every 73; under that bound the copy fits without measuring.
	if base+4*added+12*len(html) > maxHTML && encodedSize([]byte(c.HTML)) > maxHTML {
		return nil, false
	}
	c.To, c.ToName = in.Recipient.Email, oneLine(in.Recipient.Name)
	c.MessageID, c.ThreadID, c.ListID = in.MessageID, in.ThreadID, in.ListID
	c.UnsubscribeURL, c.BatchID = in.UnsubscribeURL, in.BatchID
	return &c, true
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

// isolated reports whether in's footer isolates address.
func isolated(in Input, address string) bool { return in.Locale.Isolate(address) != address }
