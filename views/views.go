// Package views holds lull's pages as templ components. Components take
// display-shaped view models (strings ready to show, choices already
// marked), never database rows, so they render the same in tests and in
// the server.
package views

import (
	_ "embed"
	"strconv"
	"strings"
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
	DailyAt      string
	WeeklyOn     []Option
	WeeklyAt     string
	QuietEnabled bool
	QuietStart   string
	QuietEnd     string
	Unsubscribed bool
	HasRequired  bool
	Categories   []CategoryView
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
