package mailtemplates

import "time"

// Type is how a notification type reads in email.
type Type struct {
	Key, Name, Category string
	ItemText, GroupText string
	DisplayLimit        int
	ItemOrder           string // "first" or "latest"
}

// Actor is who did something.
type Actor struct{ ID, Name string }

// Object is what it was done to.
type Object struct{ Type, ID, Title, URL string }

// Item is one notification.
type Item struct {
	Actor      Actor
	Object     Object
	Data       map[string]any
	OccurredAt time.Time
}

// Group is one type's items in a batch. Items are already cut to at most
// Type.DisplayLimit by the loader, in Type.ItemOrder; Total is the true
// count; ActorNames are up to three distinct names, newest first, and
// ActorCount the number of distinct actors.
type Group struct {
	Type       Type
	Total      int
	Items      []Item
	ActorNames []string
	ActorCount int
}

// Recipient is who the email is for.
type Recipient struct {
	ID, Name, Email string
	Location        *time.Location
}

// Input is everything one email is made from.
type Input struct {
	BatchID   int64
	Mode      string // immediate, cooldown, daily, weekly
	Recipient Recipient
	Since     time.Time // when the batch opened
	Groups    []Group   // in the order they are shown
	From      string
	MessageID string
	Date      time.Time
	// SettingsURL and UnsubscribeURL are the signed links of the footer.
	SettingsURL, UnsubscribeURL string
	ProductName                 string // "lull" when empty
}
