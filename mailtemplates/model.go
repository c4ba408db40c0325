package mailtemplates

import (
	"time"

	"github.com/lull-dev/lull/i18n"
)

// Type is how a notification type reads in email. It is a copy of the
// registry's fields that rendering needs, so this package can render a
// stored batch, a preview of unsaved texts and sample data alike.
type Type struct {
	Key, Name string
	// Category groups types on the settings page; the digest's summary
	// counts categories ("12 updates in 3 categories") and labels each
	// section with one.
	Category string
	// ItemText and GroupText are type texts (see ValidateItemText and
	// ValidateGroupText); an empty one falls back to the default.
	ItemText, GroupText string
	// GroupTextLocale is the language GroupText is written in, "" when
	// unknown (the type's own): its plural rules pick the text's "one"
	// form for Russian 21 as for 1.
	GroupTextLocale string
	// DisplayLimit caps the items shown; Render enforces it too, so a
	// loader that forgot cannot send a 1,000-line email.
	DisplayLimit int
	ItemOrder    string // "first" or "latest"
	// ViewURL is a type text (see ValidateViewURL) naming the page that
	// lists everything a group is about, such as
	// "https://app.example/docs/{{object.id}}/comments"; the email's
	// "View all" button goes there. Empty: the object's own URL, when
	// every shown item is about one object.
	ViewURL string
}

// Actor is who did something, as the host application named them.
type Actor struct{ ID, Name string }

// Object is what it was done to. URL is shown as a link only when it is
// http or https.
type Object struct{ Type, ID, Title, URL string }

// Item is one notification as the email shows it. Data is the event's
// free-form data, read by {{data.KEY}} placeholders; a loader may fill
// only the keys its type's texts read (DataKeys).
type Item struct {
	Actor      Actor
	Object     Object
	Data       map[string]any
	OccurredAt time.Time
	// Thread is the conversation the item belongs to, a batch key such as
	// "comment+document:7"; empty when its event named none. An email
	// about many conversations shows Input.ThreadMuteURLs[Thread] by it.
	Thread string
}

// Group is one type's items in a batch. Items are already cut to at most
// Type.DisplayLimit by the loader, in Type.ItemOrder; Total is the true
// count; ActorNames are up to three distinct names, newest first, and
// ActorCount the number of distinct actors. Carrying the totals next to
// the cut list is what lets an email say "1,000" while showing ten.
type Group struct {
	Type       Type
	Total      int
	Items      []Item
	ActorNames []string
	ActorCount int
}

// Recipient is who the email is for. Location is their time zone, used
// for every time the email shows; nil means UTC.
type Recipient struct {
	ID, Name, Email string
	Location        *time.Location
}

// Input is everything one email is made from: a display-shaped view of a
// batch, with no database types, so previews and tests can build one by
// hand.
type Input struct {
	BatchID   int64
	Mode      string // "immediate", "cooldown", or a digest: "hourly", "daily", "weekly", "monthly"
	Recipient Recipient
	Since     time.Time // when the batch opened, for "since Monday"
	// Locale is the language the email is written in; the zero Locale is
	// English.
	Locale    i18n.Locale
	Groups    []Group // in the order they are shown
	From      string
	MessageID string
	// ThreadKey names what successive emails are about (a batch key such
	// as "comment.created+document:7"); emails with one key thread
	// together. Empty: the email starts no thread.
	ThreadKey string
	// ThreadID and ListID are the References/In-Reply-To and List-Id
	// header values, filled in by the sender's envelope; Render copies
	// them to the Message.
	ThreadID, ListID string
	// Date is when the email is sent; it is also "now" for phrases such
	// as "since Monday", so a render is a pure function of its Input.
	Date time.Time
	// SettingsURL and UnsubscribeURL are the signed links of the footer.
	SettingsURL, UnsubscribeURL string
	// MuteURL mutes the email's conversation (see Links.MuteURL); empty
	// for an email about no one conversation, such as a digest.
	MuteURL string
	// ThreadMuteURLs are the mute links of an email about many
	// conversations (a digest), by Item.Thread: each conversation's first
	// shown item carries its link. A conversation without one (a required
	// type's) shows none.
	ThreadMuteURLs map[string]string
	// UnsubscribeThread says the unsubscribe link stops only this
	// email's thread, and the footer says so.
	UnsubscribeThread bool
	// Brand is the host product the email speaks for; its fields are
	// promoted, so in.ProductName is the brand's name.
	Brand
}

// Brand is the host product's identity on emails and recipient pages.
// lull runs inside someone else's product, so a recipient sees that
// product's name, never lull's: an empty ProductName gives a neutral
// email that names no product at all.
type Brand struct {
	ProductName string
	// ProductURL links the name in the email's header; LogoURL is an image
	// shown beside it. Both are http or https (see Brand.Check).
	ProductURL, LogoURL string
	// Color is "#rrggbb", dark enough for white text on it; empty keeps
	// lull's neutral indigo.
	Color string
	// FromName is the From display name; empty falls back to the display
	// name in LULL_MAIL_FROM, then to ProductName.
	FromName string
}
