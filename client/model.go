package client

import (
	"encoding/json"
	"time"
)

// Nullable is a field of a merge (PUT of a recipient or of preferences):
// left out (the zero Nullable) keeps the stored value, Null clears it,
// and Value sets it.
type Nullable[T any] struct {
	set, null bool
	value     T
}

// Value is a Nullable that sets v.
func Value[T any](v T) Nullable[T] { return Nullable[T]{set: true, value: v} }

// Null is a Nullable that clears the stored value.
func Null[T any]() Nullable[T] { return Nullable[T]{set: true, null: true} }

// IsZero reports a field left out, for the omitzero option of
// encoding/json.
func (n Nullable[T]) IsZero() bool { return !n.set }

// MarshalJSON writes null or the value.
func (n Nullable[T]) MarshalJSON() ([]byte, error) {
	if !n.set || n.null {
		return []byte("null"), nil
	}
	return json.Marshal(n.value)
}

// Event is one thing that happened, as POST /api/v1/events takes it.
type Event struct {
	Type       string         `json:"type"`
	Key        string         `json:"key,omitempty"`
	Actor      *Actor         `json:"actor,omitempty"`
	Object     *Object        `json:"object,omitempty"`
	Recipients []RecipientRef `json:"recipients"`
	BatchKey   string         `json:"batch_key,omitempty"`
	Data       map[string]any `json:"data,omitempty"`
	OccurredAt *time.Time     `json:"occurred_at,omitempty"`
}

// Actor is who did it.
type Actor struct {
	ID   string `json:"id,omitempty"`
	Name string `json:"name,omitempty"`
}

// Object is what it was done to.
type Object struct {
	Type  string `json:"type,omitempty"`
	ID    string `json:"id,omitempty"`
	Title string `json:"title,omitempty"`
	URL   string `json:"url,omitempty"`
}

// RecipientRef names a stored recipient by ID, or gives the recipient in
// full, to be created or updated on the way in: with an Email, Name,
// Timezone or Locale, or Inline set.
type RecipientRef struct {
	ID       string `json:"id"`
	Email    string `json:"email,omitempty"`
	Name     string `json:"name,omitempty"`
	Timezone string `json:"timezone,omitempty"`
	// Locale is a BCP 47 language tag ("de", "pt-BR"); empty keeps the
	// stored one.
	Locale string `json:"locale,omitempty"`
	// Inline sends the recipient as an object even with no details, which
	// creates it if it is new; a bare id must name a stored recipient.
	Inline bool `json:"-"`
}

// MarshalJSON writes a bare id, or an object for a recipient given in
// full.
func (r RecipientRef) MarshalJSON() ([]byte, error) {
	if !r.Inline && r.Email == "" && r.Name == "" && r.Timezone == "" && r.Locale == "" {
		return json.Marshal(r.ID)
	}
	type plain RecipientRef
	return json.Marshal(plain(r))
}

// IngestResult says where each recipient's notification went.
type IngestResult struct {
	ID            int64      `json:"id"`
	Notifications int        `json:"notifications"`
	Suppressed    int        `json:"suppressed"`
	Batches       []BatchRef `json:"batches"`
}

// BatchRef is the batch one recipient's notification went into.
type BatchRef struct {
	ID        int64     `json:"id"`
	Recipient string    `json:"recipient"`
	BatchKey  string    `json:"batch_key"`
	ClosesAt  time.Time `json:"closes_at"`
}

// RetractResult says what a retraction removed.
type RetractResult struct {
	ID              int64   `json:"id"`
	Removed         int     `json:"removed"`
	CanceledBatches []int64 `json:"canceled_batches"`
}

// RecipientPatch is merged onto the stored recipient: a field left out
// keeps its value. Email, Name and Locale may be cleared with Null; an
// empty Timezone counts as left out.
type RecipientPatch struct {
	Email    Nullable[string] `json:"email,omitzero"`
	Name     Nullable[string] `json:"name,omitzero"`
	Timezone string           `json:"timezone,omitempty"`
	Locale   Nullable[string] `json:"locale,omitzero"`
	Active   *bool            `json:"active,omitempty"`
}

// Recipient is a recipient as stored.
type Recipient struct {
	ID       string `json:"id"`
	Email    string `json:"email"`
	Name     string `json:"name"`
	Timezone string `json:"timezone"`
	Locale   string `json:"locale"`
	Active   bool   `json:"active"`
}

// Preferences are a recipient's preferences as stored.
type Preferences struct {
	Timezone     string                    `json:"timezone"`
	Digest       Digest                    `json:"digest"`
	QuietHours   *QuietHours               `json:"quiet_hours"`
	Unsubscribed bool                      `json:"unsubscribed"`
	Types        map[string]TypePreference `json:"types"`
	// Muted are the conversations muted now, by batch key.
	Muted map[string]Mute `json:"muted"`
}

// Mute is one muted conversation; a nil Until mutes it until it is
// turned back on.
type Mute struct {
	Until *time.Time `json:"until"`
}

// Digest is when digests go out, "HH:MM" in the recipient's time zone.
type Digest struct {
	DailyAt  string `json:"daily_at,omitempty"`
	WeeklyOn string `json:"weekly_on,omitempty"`
	WeeklyAt string `json:"weekly_at,omitempty"`
	// WeeklyDays are every weekly digest day; WeeklyOn alone sets one.
	WeeklyDays []string `json:"weekly_days,omitempty"`
	// EveryHours is the hourly digest's period: 1, 2, 4, 6 or 12.
	EveryHours int `json:"every_hours,omitempty"`
	// MonthlyDay is 1-31; 31 is the last day of every month.
	MonthlyDay int    `json:"monthly_day,omitempty"`
	MonthlyAt  string `json:"monthly_at,omitempty"`
}

// QuietHours is a local time range with no emails.
type QuietHours struct {
	Start string `json:"start,omitempty"`
	End   string `json:"end,omitempty"`
}

// TypePreference is a recipient's choice for one type; empty parameters
// follow the type's.
type TypePreference struct {
	Mode    string `json:"mode"`
	Window  string `json:"window,omitempty"`
	MaxWait string `json:"max_wait,omitempty"`
	Lead    *bool  `json:"lead,omitempty"`
}

// PreferencesPatch is merged onto the stored preferences: a field left
// out keeps its value, inside Digest, QuietHours and each type too.
// Null clears QuietHours, all of Types, or one type's choice.
type PreferencesPatch struct {
	Timezone     string                                             `json:"timezone,omitempty"`
	Digest       *Digest                                            `json:"digest,omitempty"`
	QuietHours   Nullable[QuietHours]                               `json:"quiet_hours,omitzero"`
	Unsubscribed *bool                                              `json:"unsubscribed,omitempty"`
	Types        Nullable[map[string]Nullable[TypePreferencePatch]] `json:"types,omitzero"`
	// Muted mutes conversations by batch key, or with Null turns one (or,
	// for the whole map, every one) back on.
	Muted Nullable[map[string]Nullable[Mute]] `json:"muted,omitzero"`
}

// TypePreferencePatch changes one type's choice; Null clears a parameter
// back to the type's own.
type TypePreferencePatch struct {
	Mode    string           `json:"mode,omitempty"`
	Window  Nullable[string] `json:"window,omitzero"`
	MaxWait Nullable[string] `json:"max_wait,omitzero"`
	Lead    Nullable[bool]   `json:"lead,omitzero"`
}

// PreferencesLink is a signed link to the recipient's settings page.
type PreferencesLink struct {
	URL       string    `json:"url"`
	ExpiresAt time.Time `json:"expires_at"`
}

// FeedQuery pages the feed; the zero FeedQuery is the first page of 50.
type FeedQuery struct {
	Limit  int
	Cursor string
	Unread bool
}

// Feed is a page of a recipient's in-app feed.
type Feed struct {
	Groups       []FeedGroup    `json:"groups"`
	Unread       int            `json:"unread"`
	Unseen       int            `json:"unseen"`
	UnreadByType map[string]int `json:"unread_by_type"`
	// NextCursor is empty on the last page.
	NextCursor string `json:"next_cursor"`
}

// FeedGroup is a run of notifications of one type and batch key.
type FeedGroup struct {
	Type          string      `json:"type"`
	BatchKey      string      `json:"batch_key"`
	Text          string      `json:"text"`
	Count         int         `json:"count"`
	Unread        int         `json:"unread"`
	LatestAt      time.Time   `json:"latest_at"`
	Notifications []FeedEntry `json:"notifications"`
	// MuteURL is a signed link to the page that mutes the group's
	// conversation; empty for a group that is not one.
	MuteURL string `json:"mute_url,omitempty"`
}

// FeedEntry is one notification in the feed.
type FeedEntry struct {
	ID         int64          `json:"id"`
	Actor      Actor          `json:"actor"`
	Object     Object         `json:"object"`
	Data       map[string]any `json:"data"`
	OccurredAt time.Time      `json:"occurred_at"`
	ReadAt     *time.Time     `json:"read_at"`
	SeenAt     *time.Time     `json:"seen_at"`
}

// FeedCounts are the numbers for a badge.
type FeedCounts struct {
	Unread       int            `json:"unread"`
	Unseen       int            `json:"unseen"`
	UnreadByType map[string]int `json:"unread_by_type"`
}

// FeedRead says what to mark read: IDs, everything Before a time, or All.
type FeedRead struct {
	IDs    []int64    `json:"ids,omitempty"`
	Before *time.Time `json:"before,omitempty"`
	All    bool       `json:"all,omitempty"`
}

// FeedReadResult is how many were marked read, and the batches canceled
// because nothing unread was left in them.
type FeedReadResult struct {
	Read            int     `json:"read"`
	CanceledBatches []int64 `json:"canceled_batches"`
}

// Type is a notification type. In PutType a field left empty gets its
// default.
type Type struct {
	Key          string `json:"key,omitempty"`
	Name         string `json:"name,omitempty"`
	Description  string `json:"description,omitempty"`
	Category     string `json:"category,omitempty"`
	Required     bool   `json:"required,omitempty"`
	DefaultMode  string `json:"default_mode,omitempty"`
	Window       string `json:"window,omitempty"`
	MaxWait      string `json:"max_wait,omitempty"`
	Lead         bool   `json:"lead,omitempty"`
	MaxItems     int    `json:"max_items,omitempty"`
	DisplayLimit int    `json:"display_limit,omitempty"`
	ItemOrder    string `json:"item_order,omitempty"`
	ItemText     string `json:"item_text,omitempty"`
	GroupText    string `json:"group_text,omitempty"`
	ViewURL      string `json:"view_url,omitempty"`
	BurstLimit   *int   `json:"burst_limit,omitempty"`
	SkipRead     *bool  `json:"skip_read,omitempty"`
	// Texts are the type's texts per locale, keyed by BCP 47 tag.
	Texts map[string]TypeTexts `json:"texts,omitempty"`
	// Unsubscribe is what an email's one-click link stops: "type" or
	// "thread" (only the email's batch, such as one document's comments).
	Unsubscribe string `json:"unsubscribe,omitempty"`
}

// TypeTexts are a type's texts in one locale; what is left empty falls
// back to the next locale (de-AT, de) and then to the type's own.
type TypeTexts struct {
	Name        string `json:"name,omitempty"`
	Description string `json:"description,omitempty"`
	ItemText    string `json:"item_text,omitempty"`
	GroupText   string `json:"group_text,omitempty"`
}

// BatchQuery filters and pages the batch listing.
type BatchQuery struct {
	State, Recipient, Type, BatchKey string
	Limit                            int
	Cursor                           string
}

// BatchList is a page of batches; NextCursor is empty on the last.
type BatchList struct {
	Batches    []Batch `json:"batches"`
	NextCursor string  `json:"next_cursor"`
}

// Batch is one batch of notifications for one recipient.
type Batch struct {
	ID          int64      `json:"id"`
	Recipient   string     `json:"recipient"`
	BatchKey    string     `json:"batch_key"`
	Type        string     `json:"type"`
	Mode        string     `json:"mode"`
	State       string     `json:"state"`
	OpenedAt    time.Time  `json:"opened_at"`
	LastEventAt time.Time  `json:"last_event_at"`
	ClosesAt    time.Time  `json:"closes_at"`
	ItemCount   int        `json:"item_count"`
	FlushingAt  *time.Time `json:"flushing_at"`
	ProcessedAt *time.Time `json:"processed_at"`
	Reason      string     `json:"reason"`
}

// BatchDetail is a batch with its items, deliveries and skip log.
type BatchDetail struct {
	Batch
	Items      []BatchItem `json:"items"`
	Deliveries []Delivery  `json:"deliveries"`
	Skips      []Skip      `json:"skips"`
}

// BatchItem is one notification in a batch.
type BatchItem struct {
	ID          int64          `json:"id"`
	EventID     int64          `json:"event_id"`
	Type        string         `json:"type"`
	Actor       Actor          `json:"actor"`
	Object      Object         `json:"object"`
	Data        map[string]any `json:"data"`
	OccurredAt  time.Time      `json:"occurred_at"`
	RetractedAt *time.Time     `json:"retracted_at"`
	ReadAt      *time.Time     `json:"read_at"`
}

// Delivery is the email of a batch and every attempt to send it.
type Delivery struct {
	ID           int64      `json:"id"`
	BatchID      int64      `json:"batch_id"`
	State        string     `json:"state"`
	MessageID    string     `json:"message_id"`
	To           string     `json:"to"`
	Subject      string     `json:"subject"`
	Attempts     int        `json:"attempts"`
	LastError    string     `json:"last_error"`
	PossiblyLost bool       `json:"possibly_lost"`
	Confirmed    bool       `json:"confirmed"`
	CreatedAt    time.Time  `json:"created_at"`
	SendingAt    *time.Time `json:"sending_at"`
	SentAt       *time.Time `json:"sent_at"`
	FailedAt     *time.Time `json:"failed_at"`
	AttemptLog   []Attempt  `json:"attempt_log"`
}

// Attempt is one try to hand an email over, with the server's answer.
type Attempt struct {
	At     time.Time `json:"at"`
	OK     bool      `json:"ok"`
	Answer string    `json:"answer"`
}

// Skip says why a notification or batch was not sent.
type Skip struct {
	At        time.Time `json:"at"`
	Recipient string    `json:"recipient"`
	Type      string    `json:"type"`
	EventID   *int64    `json:"event_id"`
	BatchID   *int64    `json:"batch_id"`
	Items     int       `json:"items"`
	Reason    string    `json:"reason"`
}

// Simulation asks to replay stored events (From and To, RFC 3339 or a
// UTC date) or the Events given, under each of Policies.
type Simulation struct {
	From     string   `json:"from,omitempty"`
	To       string   `json:"to,omitempty"`
	Events   []Event  `json:"events,omitempty"`
	Policies []Policy `json:"policies"`
}

// Policy is a proposed change: to types, or Everyone on one mode.
type Policy struct {
	Name     string                `json:"name,omitempty"`
	Types    map[string]TypeChange `json:"types,omitempty"`
	Everyone *Everyone             `json:"everyone,omitempty"`
}

// TypeChange changes one type's settings; empty fields keep the stored
// value.
type TypeChange struct {
	Mode               string `json:"mode,omitempty"`
	Window             string `json:"window,omitempty"`
	MaxWait            string `json:"max_wait,omitempty"`
	Lead               *bool  `json:"lead,omitempty"`
	MaxItems           *int   `json:"max_items,omitempty"`
	DisplayLimit       *int   `json:"display_limit,omitempty"`
	BurstLimit         *int   `json:"burst_limit,omitempty"`
	OverrideRecipients bool   `json:"override_recipients,omitempty"`
}

// Everyone puts every recipient and type on one mode.
type Everyone struct {
	Mode       string   `json:"mode"`
	Window     string   `json:"window,omitempty"`
	MaxWait    string   `json:"max_wait,omitempty"`
	Lead       *bool    `json:"lead,omitempty"`
	DailyAt    string   `json:"daily_at,omitempty"`
	WeeklyOn   string   `json:"weekly_on,omitempty"`
	WeeklyAt   string   `json:"weekly_at,omitempty"`
	WeeklyDays []string `json:"weekly_days,omitempty"`
	EveryHours int      `json:"every_hours,omitempty"`
	MonthlyDay int      `json:"monthly_day,omitempty"`
	MonthlyAt  string   `json:"monthly_at,omitempty"`
}

// SimulationReport is what each policy would send, the current settings
// first.
type SimulationReport struct {
	Source        string             `json:"source"`
	From          *time.Time         `json:"from"`
	To            *time.Time         `json:"to"`
	Events        int                `json:"events"`
	Notifications int                `json:"notifications"`
	Recipients    int                `json:"recipients"`
	FirstEvent    time.Time          `json:"first_event"`
	LastEvent     time.Time          `json:"last_event"`
	Results       []SimulationResult `json:"results"`
	Notes         []string           `json:"notes"`
}

// SimulationResult is what one policy would do, or (Kind "actual") what
// was done.
type SimulationResult struct {
	Name        string                  `json:"name"`
	Kind        string                  `json:"kind"`
	Description string                  `json:"description"`
	Overall     SimulationMetrics       `json:"overall"`
	Types       []SimulationTypeMetrics `json:"types"`
}

// SimulationTypeMetrics are the figures of one type.
type SimulationTypeMetrics struct {
	Type string `json:"type"`
	Name string `json:"name"`
	SimulationMetrics
}

// SimulationMetrics are the figures of a result.
type SimulationMetrics struct {
	Emails             int        `json:"emails"`
	Notifications      int        `json:"notifications"`
	Suppressed         int        `json:"suppressed"`
	Inactive           int        `json:"inactive"`
	Unsent             int        `json:"unsent"`
	Recipients         int        `json:"recipients"`
	EmailsPerRecipient Spread     `json:"emails_per_recipient"`
	WorstHour          *WorstHour `json:"worst_hour"`
	Delay              Delay      `json:"delay"`
	HiddenItems        int        `json:"hidden_items"`
}

// Spread is a distribution of counts.
type Spread struct {
	Median int `json:"median"`
	P90    int `json:"p90"`
	Max    int `json:"max"`
}

// WorstHour is the hour in which one recipient got the most emails.
type WorstHour struct {
	Recipient string    `json:"recipient"`
	Start     time.Time `json:"start"`
	Emails    int       `json:"emails"`
	Total     int       `json:"total"`
}

// Delay is the time from a batch's first notification to its email.
type Delay struct {
	Median        string  `json:"median"`
	P90           string  `json:"p90"`
	MedianSeconds float64 `json:"median_seconds"`
	P90Seconds    float64 `json:"p90_seconds"`
}

// SuppressionQuery filters and pages the suppression list.
type SuppressionQuery struct {
	Prefix string // addresses starting with this
	Limit  int
	Cursor string
}

// SuppressionList is a page of the suppression list; NextCursor is empty
// on the last.
type SuppressionList struct {
	Suppressions []Suppression `json:"suppressions"`
	NextCursor   string        `json:"next_cursor"`
}

// Suppression is an address lull does not mail (scope "all"), or mails
// only required types (scope "non_required").
type Suppression struct {
	Address   string    `json:"address"`
	Reason    string    `json:"reason"`
	Scope     string    `json:"scope"`
	Detail    string    `json:"detail"`
	Source    string    `json:"source"`
	BatchID   int64     `json:"batch_id"`
	CreatedBy string    `json:"created_by"`
	CreatedAt time.Time `json:"created_at"`
}

// SuppressionRequest adds an address to the suppression list. Reason is
// hard_bounce, soft_bounce, complaint or operator (the default); Scope
// defaults to non_required for a complaint and all otherwise.
type SuppressionRequest struct {
	Address string `json:"address"`
	Reason  string `json:"reason,omitempty"`
	Scope   string `json:"scope,omitempty"`
	Detail  string `json:"detail,omitempty"`
}
