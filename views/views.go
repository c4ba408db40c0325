// Package views holds lull's pages as templ components. Components take
// display-shaped view models (strings ready to show, choices already
// marked), never database rows, so they render the same in tests and in
// the server.
package views

import (
	_ "embed"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/a-h/templ"

	"github.com/lull-dev/lull/i18n"
)

//go:embed zones.txt
var zonesText string

// Zones lists the IANA time zone names offered by the zone picker.
func Zones() []string { return strings.Fields(zonesText) }

// Page is what every page shares.
type Page struct {
	Title  string
	CSSURL string
	JSURL  string
	Flash  string
	// Suffix follows the title ("Settings · Acme Docs"); Brand heads a
	// recipient's page. Both are the host product's on recipient pages.
	Suffix string
	Brand  Brand
	// Locale is the language of a recipient's page; the console's zero
	// Locale speaks English.
	Locale i18n.Locale
}

// T is the page's string id in its language, with data filled in.
func (p Page) T(id string, data ...any) string { return p.Locale.T(id, pairs(data)) }

// List joins names the way the page's language does ("A, B and C").
func (p Page) List(names []string) string { return p.Locale.List(names, 0) }

// pairs reads "Name", value, ... as a catalog entry's data, which keeps
// the templates short.
func pairs(kv []any) map[string]any {
	if len(kv) == 0 {
		return nil
	}
	m := make(map[string]any, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	return m
}

// Option is one choice of a select or radio group.
type Option struct {
	Value, Label string
	Selected     bool
	Disabled     bool
}

// SettingsView is the recipient's settings page.
type SettingsView struct {
	Page
	RecipientName string
	// Errors maps a field's name to its message, shown next to it.
	Errors       map[string]string
	Timezone     string
	Zones        []string
	GuessZone    bool // the zone is only the default: a script may offer the browser's
	DailyAt      string
	WeeklyDays   []Option // one checkbox per weekday, Monday first
	WeeklyAt     string
	EveryHours   []Option
	MonthlyDays  []Option
	MonthlyAt    string
	QuietEnabled bool
	QuietStart   string
	QuietEnd     string
	Unsubscribed bool
	HasRequired  bool
	Categories   []CategoryView
	// Threads are the conversations the recipient stopped, each with the
	// batch key that turns it back on.
	Threads []Option
	// Budget is the daily email budget field.
	Budget BudgetField
}

// BudgetField is the daily email budget on the settings page: the
// recipient's own number (empty for the default) and its texts.
type BudgetField struct {
	Value, Label, Default, Hint string
}

// CategoryView groups types under a heading.
type CategoryView struct {
	Name  string
	Types []TypeRow
}

// TypeRow is one notification type's choice on the settings page.
type TypeRow struct {
	Key, Name, Description string
	Required               bool
	Modes                  []Option
	Windows                []Option
	MaxWaits               []Option
	Preview                string
}

// Field returns the form name for a type's field ("types.KEY.mode").
func (t TypeRow) Field(name string) string { return "types." + t.Key + "." + name }

// ID makes an element id from a form name.
func ID(name string) string {
	return "f-" + strings.NewReplacer(".", "-", ":", "-").Replace(name)
}

// MessageView is a page with a heading and a sentence, for errors such as
// an expired link.
type MessageView struct {
	Page
	Heading string
	Text    string
}

// f formats a chart coordinate.
func f(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) }

// FieldAttrs marks a field that has an error as invalid and points it at
// the message fieldError shows.
func FieldAttrs(errs map[string]string, name string) templ.Attributes {
	if _, ok := errs[name]; !ok {
		return templ.Attributes{}
	}
	return templ.Attributes{"aria-invalid": "true", "aria-describedby": ID(name) + "-error"}
}

// SortedKeys lists a form's error fields in a stable order.
func SortedKeys(errs map[string]string) []string {
	keys := make([]string, 0, len(errs))
	for k := range errs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// ZoneOptions offers zones with current chosen; a current zone not in the
// list (a hand-made request) is kept, so its error shows what was sent.
func ZoneOptions(zones []string, current string) []Option {
	opts := make([]Option, 0, len(zones)+1)
	found := false
	for _, z := range zones {
		opts = append(opts, Option{Value: z, Label: strings.ReplaceAll(z, "_", " "), Selected: z == current})
		found = found || z == current
	}
	if !found {
		opts = append([]Option{{Value: current, Label: current, Selected: true}}, opts...)
	}
	return opts
}

// FieldName words a form name for the error summary: "max_items" is
// "Max items", "types.comment.window" is "Comment window".
func FieldName(name string) string {
	words := strings.NewReplacer(".", " ", "_", " ").Replace(strings.TrimPrefix(name, "types."))
	if words == "" {
		return "Form"
	}
	r, size := utf8.DecodeRuneInString(words)
	return string(unicode.ToUpper(r)) + words[size:]
}
