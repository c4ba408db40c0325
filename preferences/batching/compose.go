package batching

import (
	"cmp"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"maps"
	"net/mail"
	"slices"
	"strings"
	"time"

	"golang.org/x/net/idna"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/i18n"
	"github.com/lull-dev/lull/mailtemplates"
	"github.com/lull-dev/lull/preferences"
)

// Envelope is what every email carries besides its content: the sender's
// address and the signed links of its footer. The flush and the console's
// previews address emails through it, so a preview shows the headers a
// recipient gets.
type Envelope struct {
	From  string
	Links mailtemplates.Links
	// Brand is the host product the email speaks for.
	Brand mailtemplates.Brand
	// DefaultLocale is the language of a recipient without a locale of
	// their own (LULL_DEFAULT_LOCALE); empty is English.
	DefaultLocale string
	// Locale, when set, stands in for the recipient's own, so the
	// console can preview a batch in any language; the flush leaves it
	// empty.
	Locale string
}

// Address fills in's sender, Message-ID, thread and list, date and
// footer links for an email sent at now.
func (e Envelope) Address(in *mailtemplates.Input, now time.Time) {
	in.From, in.Date, in.Brand = e.From, now, e.Brand
	domain := mailDomain(e.From)
	in.MessageID = e.MessageID(in.BatchID)
	in.ThreadID = ""
	if in.ThreadKey != "" {
		in.ThreadID = "thread." + e.tag("thread", in.Recipient.ID, in.ThreadKey) + "@" + domain
	}
	in.ListID = listID(in, domain)
	in.SettingsURL, _ = e.Links.SettingsURL(in.Recipient.ID, now)
	in.UnsubscribeURL = e.Links.UnsubscribeURL(in.Recipient.ID, typeKeys(in.Groups), now)
}

// typeKeys are the types an email shows: what its unsubscribe link stops.
func typeKeys(groups []mailtemplates.Group) []string {
	keys := make([]string, 0, len(groups))
	for _, g := range groups {
		if g.Type.Key != "" && !slices.Contains(keys, g.Type.Key) {
			keys = append(keys, g.Type.Key)
		}
	}
	return keys
}

// required reports whether the batch's type ignores unsubscribing.
func required(fc *db.FlushContent) bool {
	if fc.Batch.TypeKey == nil {
		return false
	}
	t := fc.Types[*fc.Batch.TypeKey]
	return t != nil && t.Required
}

// unsubscribeThread is the batch key an email's unsubscribe link stops
// instead of its type: set when the batch holds one type that
// unsubscribes by thread, and the events named a thread (a batch_key of
// their own).
func unsubscribeThread(fc *db.FlushContent) string {
	b := fc.Batch
	if b.TypeKey == nil {
		return ""
	}
	t := fc.Types[*b.TypeKey]
	if t == nil || t.Required || t.Unsubscribe != "thread" || !strings.HasPrefix(b.BatchKey, *b.TypeKey+"+") {
		return ""
	}
	return b.BatchKey
}

// conversation is the batch key an email's mute link mutes: set when
// the batch holds one type that is not required and its events named a
// thread (a batch_key of their own). A digest mixes conversations, and
// a batch without a thread key is the whole type: unsubscribing is the
// way to stop those.
func conversation(fc *db.FlushContent) string {
	b := fc.Batch
	if b.TypeKey == nil || required(fc) || !strings.HasPrefix(b.BatchKey, *b.TypeKey+"+") {
		return ""
	}
	return b.BatchKey
}

// MessageID is the batch's Message-ID, "batch-42.<installation>@domain".
// It is derived from the batch, so a resend after a crash carries the
// same one and mail systems can tell it is one email; and from the
// installation's secret (LULL_SECRET, or the secret generated once and
// stored in the database) through an HMAC, so two installations sending
// from one domain never reuse each other's batch-1, and the ID reveals
// nothing of the secret. Rotating the secret changes the Message-IDs of
// batches sent after it, which only matters for a retry in flight.
func (e Envelope) MessageID(batchID int64) string {
	return fmt.Sprintf("batch-%d.%s@%s", batchID, e.tag("installation"), mailDomain(e.From))
}

// tag is a short, stable HMAC of parts under the installation's secret,
// in lower-case base32 so it fits a Message-ID's left side.
func (e Envelope) tag(parts ...string) string {
	h := hmac.New(sha256.New, e.Links.Secret)
	h.Write([]byte("lull message-id"))
	for _, p := range parts {
		h.Write([]byte{0})
		h.Write([]byte(p))
	}
	return strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(h.Sum(nil)[:10]))
}

// mailDomain is the domain of the From address, for the right side of
// Message-IDs and List-Id: parsed as an address, so "@" in a display
// name is not taken for it, and in its ASCII (punycode) form, which is
// all those headers may hold. Without a usable domain it is "localhost".
func mailDomain(from string) string {
	a, err := mail.ParseAddress(from)
	if err != nil {
		return "localhost"
	}
	d := a.Address[strings.LastIndex(a.Address, "@")+1:]
	if !isASCII(d) {
		// Only then: a plain domain keeps its case, and so the
		// Message-IDs of batches already sent keep theirs.
		d, err = idna.Lookup.ToASCII(d)
	}
	if err != nil || d == "" {
		return "localhost"
	}
	return d
}

func isASCII(s string) bool {
	for i := range len(s) {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// listID names the list an email belongs to (RFC 2919), so a recipient can
// filter one type: `"Comments" <comment-created.example.com>`; a digest of
// several types is its own list.
func listID(in *mailtemplates.Input, domain string) string {
	label, name := "updates", "Updates"
	switch {
	case preferences.Mode(in.Mode).Digest():
		label, name = in.Mode+"-digest", strings.ToUpper(in.Mode[:1])+in.Mode[1:]+" digest"
	case len(in.Groups) == 1:
		label, name = in.Groups[0].Type.Key, in.Groups[0].Type.Name
	}
	label = strings.Trim(strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-':
			return r
		case r >= 'A' && r <= 'Z':
			return r + ('a' - 'A')
		}
		return '-'
	}, label), "-")
	if len(label) > 60 {
		label = strings.Trim(label[:60], "-")
	}
	if label == "" {
		label = "updates"
	}
	return mailtemplates.Subject(name) + " <" + label + "." + strings.ToLower(domain) + ">"
}

// threadKey is what the batch's emails thread on: the event's batch key
// ("comment.created+document:7"), or, without one, the one object every
// item is about. A digest, or a batch about many objects, starts no
// thread: successive ones are not about one thing.
func threadKey(b *db.Batch, in *mailtemplates.Input) string {
	if preferences.Mode(b.Mode).Digest() || len(in.Groups) != 1 {
		return ""
	}
	if strings.Contains(b.BatchKey, "+") {
		return b.BatchKey
	}
	g := in.Groups[0]
	obj := ""
	for i, it := range g.Items {
		o := it.Object.Type + ":" + it.Object.ID
		if it.Object.ID == "" || (i > 0 && o != obj) {
			return ""
		}
		obj = o
	}
	if obj == "" || g.Total != len(g.Items) {
		return ""
	}
	return g.Type.Key + "+object:" + obj
}

// Composed is a batch's email, or the reason it sends none.
type Composed struct {
	Message *mailtemplates.Message
	// Skip is why no email goes out, one of db's Skip reasons; it is
	// empty when Message is set.
	Skip string
	// Dropped is the skip log of what the recipient no longer wants,
	// left out of an email that still goes out.
	Dropped []db.Skip
	// Read is what the email leaves out as read in the app. It was logged
	// when it was read if its batch was still open and its type left read
	// notifications out then; the flush logs the rest (read since a first
	// attempt, or before the type's skip_read was set).
	Read []db.Skip
}

// Compose turns a batch, as read for its flush, into the email it sends
// at now or the reason it sends none. It looks at the recipient's
// preferences again: anything muted or unsubscribed since the batch
// opened is left out, and a batch left with nothing to send, or whose
// recipient is inactive or has no address, is skipped. It reads and
// writes nothing, so the flush and the console's preview call it alike
// and cannot disagree about what a batch sends.
func (e Envelope) Compose(fc *db.FlushContent, now time.Time) (Composed, error) {
	c, in, err := e.Prepare(fc, now)
	if err != nil || in == nil {
		return c, err
	}
	if c.Message, err = mailtemplates.Render(*in); err != nil {
		return Composed{}, err
	}
	return c, nil
}

// Prepare is Compose up to rendering: the email's input, or (nil input)
// the reason it sends none. The flush renders many batches' inputs
// together (mailtemplates.RenderMany), each email once.
func (e Envelope) Prepare(fc *db.FlushContent, now time.Time) (Composed, *mailtemplates.Input, error) {
	if fc.ThreadMuted && !required(fc) {
		return Composed{Skip: db.SkipMutedThread}, nil, nil
	}
	items, rec, c, err := wanted(fc)
	if err != nil || c.Skip != "" {
		return c, nil, err
	}
	in := input(fc.Batch, rec, items, fc.Types, i18n.Resolve(cmp.Or(e.Locale, rec.Locale), "", e.DefaultLocale))
	in.ThreadKey = threadKey(fc.Batch, &in)
	e.Address(&in, now)
	if key := conversation(fc); key != "" {
		in.MuteURL = e.Links.MuteURL(rec.ID, key, now)
	} else {
		in.ThreadMuteURLs = e.threadMuteURLs(fc, &in, rec.ID, now)
	}
	if key := unsubscribeThread(fc); key != "" {
		in.UnsubscribeURL, in.UnsubscribeThread = e.Links.UnsubscribeThreadURL(rec.ID, key, now)
	}
	return c, &in, nil
}

// threadMuteURLs are the mute links of the conversations an email about
// many shows, one per conversation of a type that is not required: a
// digest has no one conversation for its footer to mute.
func (e Envelope) threadMuteURLs(fc *db.FlushContent, in *mailtemplates.Input, recipientID string, now time.Time) map[string]string {
	var out map[string]string
	for _, g := range in.Groups {
		if t := fc.Types[g.Type.Key]; t == nil || t.Required {
			continue
		}
		for _, it := range g.Items {
			if it.Thread == "" || out[it.Thread] != "" {
				continue
			}
			if out == nil {
				out = map[string]string{}
			}
			out[it.Thread] = e.Links.MuteURL(recipientID, it.Thread, now)
		}
	}
	return out
}

// wanted sorts a batch's items into those still to send and those the
// recipient no longer wants or the suppression list stops (Dropped), or
// read in the app (Read: those left an open batch, and were logged, when
// they were read).
func wanted(fc *db.FlushContent) ([]db.Item, *db.Recipient, Composed, error) {
	var rec *db.Recipient
	policies := make(map[string]preferences.Policy, len(fc.Types))
	for key, typ := range fc.Types {
		rs, ok := fc.Settings[key]
		if !ok {
			return nil, nil, Composed{Skip: db.SkipInactive}, nil
		}
		rec = &rs.Recipient
		policies[key] = preferences.Effective(TypeDefaults(typ), Override(rs.Pref), rs.Unsubscribed)
	}
	// A batch left with nothing to send is skipped for what its item
	// count still holds: items muted since it opened, or else items read
	// in the app (which left the count, and were logged, when read), or
	// else nothing (all were retracted).
	reason := db.SkipRetracted
	var items []db.Item
	muted := map[string]int{}   // type -> items dropped
	stopped := map[string]int{} // type -> items the suppression list stops
	read := map[string]int{}    // type -> items read in the app
	for _, it := range fc.Items {
		typ, ok := fc.Types[it.TypeKey]
		switch {
		case !ok:
			return nil, nil, Composed{}, fmt.Errorf("type %s: %w", it.TypeKey, db.ErrNotFound)
		case it.ReadAt != nil && typ.SkipRead:
			reason = db.SkipRead
			read[it.TypeKey]++
		case fc.Suppression.Stops(typ.Required):
			stopped[it.TypeKey]++
		case policies[it.TypeKey].Mode == preferences.Never:
			muted[it.TypeKey]++
		default:
			items = append(items, it)
		}
	}
	var logged []db.Skip
	items, logged = leftOutBefore(fc, items, func(key string) int {
		return muted[key] + stopped[key] + read[key] + fc.ThreadMutedItems[key]
	})
	if len(logged) > 0 {
		reason = logged[0].Reason
	}
	mutedWhy := db.SkipMuted
	if rec != nil && rec.Unsubscribed {
		mutedWhy = db.SkipUnsubscribed
	}
	if len(muted) > 0 {
		reason = mutedWhy
	}
	stopWhy := ""
	if len(stopped) > 0 {
		stopWhy = fc.Suppression.SkipReason()
		reason = stopWhy
	}
	switch {
	case rec != nil && !rec.Active:
		return nil, nil, Composed{Skip: db.SkipInactive}, nil
	case len(items) == 0:
		return nil, nil, Composed{Skip: reason}, nil
	case rec.Email == "":
		return nil, nil, Composed{Skip: db.SkipNoEmail}, nil
	}
	skips := func(byType map[string]int, reason string) []db.Skip {
		var out []db.Skip
		for key, n := range byType {
			out = append(out, db.Skip{RecipientID: rec.ID, TypeKey: key, BatchID: &fc.Batch.ID, Items: n, Reason: reason})
		}
		return out
	}
	// Items of a muted thread were taken out of a digest as it was read;
	// they are accounted for like every other item the email leaves out.
	c := Composed{
		Dropped: slices.Concat(skips(muted, mutedWhy), skips(stopped, stopWhy),
			skips(fc.ThreadMutedItems, db.SkipMutedThread)),
		Read: skips(read, db.SkipRead),
	}
	for _, s := range logged {
		s.RecipientID = rec.ID
		c.Dropped = append(c.Dropped, s)
	}
	return items, rec, c, nil
}

// leftOutBefore takes out of items, for a batch composed again, what an
// earlier attempt left out and logged (fc.Logged) beyond what is left out
// now (out, by type): an item unmuted since would otherwise go out and be
// in the skip log too. It returns the items still to send and the skips
// of those it took out, under the reasons logged, which the skip log
// holds already.
func leftOutBefore(fc *db.FlushContent, items []db.Item, out func(key string) int) ([]db.Item, []db.Skip) {
	var taken []db.Skip
	for _, key := range slices.Sorted(maps.Keys(fc.Logged)) {
		byReason := maps.Clone(fc.Logged[key])
		n := -out(key)
		for _, logged := range byReason {
			n += logged
		}
		// Taken from the end the email does not show, whose data the
		// flush did not read.
		var of []int
		for i, it := range items {
			if it.TypeKey == key {
				of = append(of, i)
			}
		}
		if t := fc.Types[key]; t != nil && t.ItemOrder == "first" {
			slices.Reverse(of)
		}
		drop := map[int]bool{}
		for _, i := range of[:min(max(n, 0), len(of))] {
			drop[i], taken = true, addSkip(taken, fc, key, byReason)
		}
		kept := items[:0:0]
		for i, it := range items {
			if !drop[i] {
				kept = append(kept, it)
			}
		}
		items = kept
	}
	return items, taken
}

// addSkip counts one more item of type key in taken, under the first
// reason of byReason not used up yet.
func addSkip(taken []db.Skip, fc *db.FlushContent, key string, byReason map[string]int) []db.Skip {
	for _, reason := range slices.Sorted(maps.Keys(byReason)) {
		if byReason[reason] == 0 {
			continue
		}
		byReason[reason]--
		if n := len(taken); n > 0 && taken[n-1].TypeKey == key && taken[n-1].Reason == reason {
			taken[n-1].Items++
			return taken
		}
		return append(taken, db.Skip{TypeKey: key, BatchID: &fc.Batch.ID, Items: 1, Reason: reason})
	}
	return taken
}
