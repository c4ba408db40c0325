package i18n

import (
	"slices"
	"strings"
	"time"

	goi18n "github.com/nicksnyder/go-i18n/v2/i18n"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// Locale is the language one email or page is written in.
type Locale struct {
	// requested is the tag asked for, which may be more specific than any
	// catalog ("de-AT"); a type's own texts are looked up by it.
	requested language.Tag
	// tag is the shipped catalog that serves it ("de").
	tag language.Tag
	loc *goi18n.Localizer
}

var matcher = language.NewMatcher(Shipped())

// Resolve picks the locale for a recipient: their stored locale when it
// is a valid tag, else the page request's Accept-Language (empty for
// emails), else def (LULL_DEFAULT_LOCALE). Each is matched to the
// closest shipped catalog the way CLDR does it, so de-AT is served by de
// and pt by pt-BR; what no catalog serves falls back to def, then English.
// A stored locale no catalog serves ("ko") yields to the browser's
// languages before def: the page is more likely read in one of those.
func Resolve(recipient, accept, def string) Locale {
	var want []language.Tag
	if t := clean(recipient); t != language.Und {
		want = append(want, t)
	}
	want = append(want, acceptLanguage(accept)...)
	d := clean(def)
	if d == language.Und {
		d = language.English
	}
	want = append(want, d, language.English)
	served := language.English
	for _, t := range want {
		// One tag at a time: given the whole list, the matcher passes
		// over English (the catalogs' default) for an exact match further
		// down, serving German to an en-GB recipient when the default is de.
		if _, i, c := matcher.Match(t); c != language.No {
			served = Shipped()[i]
			break
		}
	}
	return Locale{requested: want[0], tag: served, loc: goi18n.NewLocalizer(bundle, served.String())}
}

// Tag is the served catalog's tag, for a page's or email's lang attribute.
func (l Locale) Tag() string {
	if l.loc == nil {
		return "en" // the zero Locale speaks English
	}
	return l.tag.String()
}

// Requested is the tag asked for, the key for a type's texts per locale.
func (l Locale) Requested() string { return l.requested.String() }

// Dir is "rtl" for a right-to-left language, else "ltr".
func (l Locale) Dir() string { return direction(l.tag) }

// TextChain is the order in which a type's per-locale texts are tried:
// the requested tag and its parents, then the served catalog's. The
// type's own default texts come after all of them.
func (l Locale) TextChain() []string {
	tags := chain(l.requested)
	for _, t := range chain(l.tag) {
		if !slices.Contains(tags, t) {
			tags = append(tags, t)
		}
	}
	return tags
}

// T returns the string id with data filled in. A key missing from every
// catalog returns the id itself, so the gap shows and the catalog test
// names it, instead of an email failing to send.
func (l Locale) T(id string, data map[string]any) string {
	s, err := l.localizer().Localize(&goi18n.LocalizeConfig{MessageID: id, TemplateData: data})
	if err != nil && s == "" {
		return id
	}
	return s
}

// N is T for a string that depends on a count: the count picks the
// language's plural category and is available to the text as .Count,
// written with the locale's digit grouping.
func (l Locale) N(id string, count int, data map[string]any) string {
	d := map[string]any{"Count": l.Number(count)}
	for k, v := range data {
		d[k] = v
	}
	s, err := l.localizer().Localize(&goi18n.LocalizeConfig{MessageID: id, TemplateData: d, PluralCount: count})
	if err != nil && s == "" {
		return id
	}
	return s
}

// localizer serves the zero Locale as English, so a view model built
// without resolving a locale still renders.
func (l Locale) localizer() *goi18n.Localizer {
	if l.loc == nil {
		return english
	}
	return l.loc
}

var english = goi18n.NewLocalizer(bundle, "en")

// Number writes n with the locale's grouping ("12,345", "12.345"), in
// the digits the requested tag asks for with a -u-nu- extension
// (ar-u-nu-latn: Arabic with Latin digits), else the language's own.
func (l Locale) Number(n int) string {
	tag := l.tag
	if l.loc == nil {
		tag = language.English
	} else if nu := l.requested.TypeForKey("nu"); nu != "" {
		if t, err := tag.SetTypeForKey("nu", nu); err == nil {
			tag = t
		}
	}
	return message.NewPrinter(tag).Sprintf("%d", n)
}

// List joins names the way the language does ("Alice, Bob and Carol");
// others > 0 counts the names left out ("Alice, Bob and 13 others").
func (l Locale) List(names []string, others int) string {
	isolated := make([]string, len(names))
	for i, n := range names {
		isolated[i] = l.Isolate(n)
	}
	names = isolated
	if others > 0 {
		head := strings.Join(names, l.T("list_separator", nil))
		return l.N("list_others", others, map[string]any{"Names": head})
	}
	switch len(names) {
	case 0:
		return ""
	case 1:
		return names[0]
	}
	head := strings.Join(names[:len(names)-1], l.T("list_separator", nil))
	return l.T("list_last", map[string]any{"Head": head, "Last": names[len(names)-1]})
}

// Weekday is the day's name ("Montag").
func (l Locale) Weekday(d time.Weekday) string {
	return l.T(weekdayKeys[d], nil)
}

var weekdayKeys = [...]string{"weekday_sunday", "weekday_monday", "weekday_tuesday", "weekday_wednesday",
	"weekday_thursday", "weekday_friday", "weekday_saturday"}

var monthKeys = [...]string{"month_january", "month_february", "month_march", "month_april", "month_may",
	"month_june", "month_july", "month_august", "month_september", "month_october", "month_november",
	"month_december"}

// Month is the month's name ("März").
func (l Locale) Month(m time.Month) string { return l.T(monthKeys[(m+11)%12], nil) }

// Clock is the time of day in the locale's form ("14:05", "2:05 PM").
func (l Locale) Clock(t time.Time) string {
	return t.Format(l.T("format_clock", nil))
}

// DateTime is a moment in its own zone with the zone named, in the
// locale's order and words: "Monday, March 2 at 2:05 PM CET",
// "Montag, 2. März um 14:05 CET", the zone abbreviated as the time zone database has it.
func (l Locale) DateTime(t time.Time) string {
	zone, _ := t.Zone()
	return l.T("format_datetime", map[string]any{
		"Weekday": l.Weekday(t.Weekday()),
		"Day":     t.Day(),
		"Month":   l.Month(t.Month()),
		"Year":    t.Year(),
		"Time":    l.Clock(t),
		"Zone":    zone,
	})
}
