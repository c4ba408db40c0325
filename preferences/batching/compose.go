package batching

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/lull-dev/lull/db"
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
}

// Address fills in's sender, Message-ID, date and footer links for an
// email sent at now.
func (e Envelope) Address(in *mailtemplates.Input, now time.Time) {
	in.From, in.Date, in.Brand = e.From, now, e.Brand
	in.MessageID = messageID(in.BatchID, e.From)
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

// threadKey is the batch key an email's unsubscribe link stops instead of
// its type: set when the batch holds one type that unsubscribes by
// thread, and the events named a thread (a batch_key of their own).
func threadKey(fc *db.FlushContent) string {
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

// messageID is derived from the batch alone, so a resend after a crash
// carries the same Message-ID and mail systems can tell it is one email.
func messageID(batchID int64, from string) string {
	domain := "lull.localhost"
	if _, d, ok := strings.Cut(from, "@"); ok && d != "" {
		domain = strings.Trim(d, "> ")
	}
	return fmt.Sprintf("batch-%d@%s", batchID, domain)
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
}

// Compose turns a batch, as read for its flush, into the email it sends
// at now or the reason it sends none. It looks at the recipient's
// preferences again: anything muted or unsubscribed since the batch
// opened is left out, and a batch left with nothing to send, or whose
// recipient is inactive or has no address, is skipped. It reads and
// writes nothing, so the flush and the console's preview call it alike
// and cannot disagree about what a batch sends.
func (e Envelope) Compose(fc *db.FlushContent, now time.Time) (Composed, error) {
	if fc.ThreadMuted && !required(fc) {
		return Composed{Skip: db.SkipMutedThread}, nil
	}
	items, rec, c, err := wanted(fc)
	if err != nil || c.Skip != "" {
		return c, err
	}
	in := input(fc.Batch, rec, items, fc.Types)
	e.Address(&in, now)
	if key := threadKey(fc); key != "" {
		in.UnsubscribeURL, in.UnsubscribeThread = e.Links.UnsubscribeThreadURL(rec.ID, key, now), true
	}
	if c.Message, err = mailtemplates.Render(in); err != nil {
		return Composed{}, err
	}
	return c, nil
}

// wanted sorts a batch's items into those still to send and those the
// recipient no longer wants. Items read in the app left the batch, and
// were logged, when they were read, so only what was muted or
// unsubscribed is logged here.
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
	muted := map[string]int{} // type -> items dropped
	for _, it := range fc.Items {
		typ, ok := fc.Types[it.TypeKey]
		switch {
		case !ok:
			return nil, nil, Composed{}, fmt.Errorf("type %s: %w", it.TypeKey, db.ErrNotFound)
		case it.ReadAt != nil && typ.SkipRead:
			reason = db.SkipRead
		case policies[it.TypeKey].Mode == preferences.Never:
			muted[it.TypeKey]++
		default:
			items = append(items, it)
		}
	}
	mutedWhy := db.SkipMuted
	if rec != nil && rec.Unsubscribed {
		mutedWhy = db.SkipUnsubscribed
	}
	if len(muted) > 0 {
		reason = mutedWhy
	}
	switch {
	case rec != nil && !rec.Active:
		return nil, nil, Composed{Skip: db.SkipInactive}, nil
	case len(items) == 0:
		return nil, nil, Composed{Skip: reason}, nil
	case rec.Email == "":
		return nil, nil, Composed{Skip: db.SkipNoEmail}, nil
	}
	var c Composed
	for key, n := range muted {
		c.Dropped = append(c.Dropped, db.Skip{RecipientID: rec.ID, TypeKey: key, BatchID: &fc.Batch.ID, Items: n, Reason: mutedWhy})
	}
	return items, rec, c, nil
}
