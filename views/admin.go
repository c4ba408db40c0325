package views

import "github.com/a-h/templ"

// AdminPage is what every operator page shares.
type AdminPage struct {
	Page
	Operator string
	Section  string // highlights the current menu entry
}

// LoginView is the operator login form.
type LoginView struct {
	Page
	Email string
	Error string
	Next  string // the console page to return to, already checked local
}

// Stat is one figure on the dashboard.
type Stat struct {
	Label, Value, Note string
}

// Bar is one bar of a server-rendered SVG chart, already laid out.
type Bar struct {
	X, Y, W, H float64
	Title      string
}

// Tick is a labelled mark on a chart's axis.
type Tick struct {
	X     float64
	Label string
}

// DashboardView is the operator dashboard.
type DashboardView struct {
	AdminPage
	Day, Hour           []Stat
	DaySince, HourSince string
	WindowNote          string // why the two windows may show the same figures
	Chart               []Bar
	Ticks               []Tick
	ChartMax            string
	ChartTitle          string
	Rates               []RateRow
}

// BatchRow is one batch in a listing.
type BatchRow struct {
	ID, URL, Recipient, Key, Mode, State, Items, Opened, Closes, Processed string
	// Shared says the batch's email went out with others' ("shared ×50").
	Shared string
}

// BatchListView is the batch browser.
type BatchListView struct {
	AdminPage
	State, Recipient, Type, BatchKey string
	From, Until                      string // opened between, UTC
	States                           []Option
	Rows                             []BatchRow
	NextURL                          string
}

// ItemRow is one notification of a batch.
type ItemRow struct {
	Type, Actor, Title, When string
	Retracted, Read          bool
}

// JobRow is one River job.
type JobRow struct {
	ID, Kind, State, Attempts, Scheduled, Args, Error string
	CanRetry, CanCancel                               bool
}

// AttemptRow is one SMTP attempt.
type AttemptRow struct {
	At, Result, Answer string
}

// SkipRow is one skip log entry.
type SkipRow struct {
	At, Recipient, Type, Reason, Items string
}

// AuditRow is one recorded operator action.
type AuditRow struct {
	At, Operator, Action, Detail string
}

// BatchDetailView is one batch with everything about it.
type BatchDetailView struct {
	AdminPage
	Batch                         BatchRow
	Reason                        string
	Items                         []ItemRow
	Jobs                          []JobRow
	Delivery                      []Stat
	Attempts                      []AttemptRow
	Skips                         []SkipRow
	Audit                         []AuditRow
	CanFlush, CanCancel, CanRetry bool
	PreviewURL                    string
	NotSent                       string // what the delivery section says when nothing went out
	// FoldedInto is the held digest an over-budget batch went to, and
	// FoldedFrom the batches a held digest took in (ids).
	FoldedInto string
	FoldedFrom []string
}

// Header is one email header.
type Header struct{ Name, Value string }

// PreviewView shows an email: HTML in a sandboxed frame, text and headers.
type PreviewView struct {
	AdminPage
	Heading  string
	FrameURL string
	Text     string
	Headers  []Header
	// Note says where the email comes from when that is not plain.
	Note string
	// Unsent says why no email would go out; nothing else is shown then.
	Unsent               string
	Phone                bool
	DesktopURL, PhoneURL string
	BackURL, BackLabel   string
	// Locales are the languages the email can be previewed in; the
	// picker's form goes to LocaleURL. Language says which one it is in.
	Locales   []Option
	LocaleURL string
	Language  string
}

// OutboxRow is one email in the outbox.
type OutboxRow struct {
	URL, To, Subject, When, BatchURL string
}

// OutboxView lists the outbox.
type OutboxView struct {
	AdminPage
	Rows    []OutboxRow
	NextURL string
}

// JobsView is the job queue.
type JobsView struct {
	AdminPage
	Counts   []Stat
	Upcoming []JobRow
	Failing  []JobRow
}

// TypeAdminRow is one notification type in the console.
type TypeAdminRow struct {
	Key, Name, Category, Mode, Window, MaxWait, PreviewURL string
	Required                                               bool
	// Locales lists the languages with texts of their own ("de, ja").
	Locales string
}

// TypesView lists notification types.
type TypesView struct {
	AdminPage
	Rows []TypeAdminRow
}

// TypeEditView is the form to edit a notification type.
type TypeEditView struct {
	AdminPage
	Key                                     string
	Name, Description, Category             string
	Required, Lead                          bool
	Modes                                   []Option
	Window, MaxWait, MaxItems, DisplayLimit string
	Orders                                  []Option
	ItemText, GroupText                     string
	Errors                                  map[string]string
	PreviewURL                              string
	// Locales are the type's texts per language; WithTexts names the
	// languages that have any.
	Locales   []TypeLocaleTexts
	WithTexts string
	// PreviewLocales are the languages the frame can preview in.
	PreviewLocales []Option
}

// TypeLocaleTexts is a type's texts in one language, as the editor shows
// them; empty ones fall back to the type's own.
type TypeLocaleTexts struct {
	Tag, Label                             string
	Name, Description, ItemText, GroupText string
	HasTexts                               bool
	PreviewURL                             string
}

// Field is the form name of one of the locale's texts
// ("texts.de.item_text").
func (l TypeLocaleTexts) Field(name string) string { return "texts." + l.Tag + "." + name }

// RecipientView is a recipient looked up by an operator.
type RecipientView struct {
	AdminPage
	Query string
	Found bool
	// SettingsURL is a signed link to the recipient's settings page;
	// BatchesURL the batch list filtered to them.
	SettingsURL, BatchesURL string
	Details                 []Stat
	Prefs                   []Stat
	Batches                 []BatchRow
	Skips                   []SkipRow
}

// Current marks the chosen link of a toggle.
func Current(on bool) templ.Attributes {
	if on {
		return templ.Attributes{"aria-current": "true"}
	}
	return templ.Attributes{}
}

// ItemCount says how many notifications a batch holds, "1 item" or
// "3 items".
func ItemCount(n string) string {
	if n == "1" {
		return "1 item"
	}
	return n + " items"
}
