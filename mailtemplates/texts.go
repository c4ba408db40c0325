package mailtemplates

import (
	"fmt"
	"github.com/lull-dev/lull/i18n"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Type texts are the small templates a notification type is written in,
// such as
//
//	{{actors}} commented on {{object.title}}|{{actors}} left {{count}} comments on {{object.title}}
//
// A placeholder is a field path between "{{" and "}}", with optional spaces
// inside the braces. A "|" outside the braces separates the singular form
// (used when the count is exactly 1) from the plural form; there is no
// escape, so a literal "|" cannot appear in a text, and item texts, which
// always describe one item, have no plural form at all. Expansion yields
// plain text; each output (HTML part, text part, subject) escapes it its
// own way, which is why the texts themselves never contain markup.
//
// The language is deliberately not text/template: type texts are written
// by integrators through the API and operators in the console, and a
// language without calls, loops or pipelines cannot fail at send time in
// any way validation did not catch when the type was saved.

// maxTextLen bounds a type text, so a pasted document is refused when the
// type is saved instead of producing an unreadable email later.
const maxTextLen = 1000

// TextError says what is wrong with a type text. Placeholder is the
// offending placeholder as written (for example "{{actor.nam}}"), or empty
// when the problem is not a single placeholder, so a form can point at it.
type TextError struct {
	Placeholder string
	Reason      string
}

// Error reads "{{actor.nam}}: is not a known field; use ...", so it can be
// shown next to the form field as it is.
func (e *TextError) Error() string {
	if e.Placeholder == "" {
		return e.Reason
	}
	return e.Placeholder + ": " + e.Reason
}

// field is what a placeholder refers to; it is resolved once when a text is
// parsed, so expanding a text for an item is a switch, not a string lookup.
type field uint8

const (
	fieldNone field = iota // a literal segment
	fieldActorName
	fieldActorID
	fieldObjectTitle
	fieldObjectURL
	fieldObjectType
	fieldObjectID
	fieldOccurredAt
	fieldData
	fieldCount  // group texts only
	fieldActors // group texts only
)

// itemFields are the placeholders every text may use; data.KEY is matched
// separately because its key is free.
var itemFields = map[string]field{
	"actor.name":   fieldActorName,
	"actor.id":     fieldActorID,
	"object.title": fieldObjectTitle,
	"object.url":   fieldObjectURL,
	"object.type":  fieldObjectType,
	"object.id":    fieldObjectID,
	"occurred_at":  fieldOccurredAt,
}

const (
	itemFieldList  = "actor.name, actor.id, object.title, object.url, object.type, object.id, data.KEY and occurred_at"
	groupFieldList = "count, actors, " + itemFieldList
)

// segment is a literal run of text or one placeholder.
type segment struct {
	lit   string
	field field
	data  []string // the key path of a data.KEY placeholder
}

// text is a parsed type text. many is the plural form; for a text without
// "|" it shares one's segments.
type text struct {
	one, many []segment
}

// parseText parses an item text (group false) or a group text (group
// true), refusing anything that could not expand sensibly.
func parseText(s string, group bool) (*text, error) {
	kind := "item_text"
	if group {
		kind = "group_text"
	}
	if strings.TrimSpace(s) == "" {
		return nil, &TextError{Reason: kind + " is empty"}
	}
	if n := utf8.RuneCountInString(s); n > maxTextLen {
		return nil, &TextError{Reason: fmt.Sprintf("%s is %d characters long; at most %d are allowed", kind, n, maxTextLen)}
	}
	t := &text{}
	var segs []segment
	split := false // a "|" has been seen
	lit := 0       // start of the current literal run
	addLiteral := func(end int) {
		if end > lit {
			segs = append(segs, segment{lit: s[lit:end]})
		}
	}
	for i := 0; i < len(s); {
		switch {
		case strings.HasPrefix(s[i:], "{{"):
			end := strings.Index(s[i+2:], "}}")
			if end < 0 {
				return nil, &TextError{Placeholder: abbreviate(s[i:]), Reason: `is not closed; add "}}"`}
			}
			raw := s[i : i+2+end+2]
			seg, err := parsePlaceholder(raw, group)
			if err != nil {
				return nil, err
			}
			addLiteral(i)
			segs = append(segs, seg)
			i += len(raw)
			lit = i
		case strings.HasPrefix(s[i:], "}}"):
			return nil, &TextError{Reason: fmt.Sprintf(`%s has "}}" without a matching "{{" near %q`, kind, abbreviate(s[max(0, i-20):i+2]))}
		case s[i] == '|':
			if !group {
				return nil, &TextError{Reason: `item_text cannot contain "|": an item is always one thing, so it has no plural form`}
			}
			if split {
				return nil, &TextError{Reason: `group_text has more than one "|"; write singular|plural, and note a literal "|" cannot appear`}
			}
			addLiteral(i)
			t.one, segs, split = nonEmpty(segs), nil, true
			i++
			lit = i
		default:
			i++
		}
	}
	addLiteral(len(s))
	if !split {
		// Validated non-blank above, so this form is not empty.
		t.one = segs
		t.many = segs
		return t, nil
	}
	t.many = nonEmpty(segs)
	switch {
	case t.one == nil:
		return nil, &TextError{Reason: `the singular form before "|" is empty`}
	case t.many == nil:
		return nil, &TextError{Reason: `the plural form after "|" is empty`}
	}
	return t, nil
}

// nonEmpty returns nil for a form that is only blanks, so parseText can
// report it, and segs otherwise (never nil).
func nonEmpty(segs []segment) []segment {
	for _, s := range segs {
		if s.field != fieldNone || strings.TrimSpace(s.lit) != "" {
			return segs
		}
	}
	return nil
}

// parsePlaceholder resolves one "{{ path }}" to its field.
func parsePlaceholder(raw string, group bool) (segment, error) {
	name := strings.TrimSpace(raw[2 : len(raw)-2])
	switch {
	case name == "":
		return segment{}, &TextError{Placeholder: raw, Reason: "is empty; name a field such as {{actor.name}}"}
	case strings.ContainsAny(name, "{}"):
		return segment{}, &TextError{Placeholder: abbreviate(raw), Reason: "has unbalanced braces"}
	}
	if f, ok := itemFields[name]; ok {
		return segment{field: f}, nil
	}
	if key, ok := strings.CutPrefix(name, "data."); ok {
		path := strings.Split(key, ".")
		for _, p := range path {
			if !validDataKey(p) {
				return segment{}, &TextError{Placeholder: raw, Reason: "is not a valid data key; use data.KEY or data.KEY.SUBKEY with letters, digits, _ and -"}
			}
		}
		return segment{field: fieldData, data: path}, nil
	}
	switch name {
	case "count", "actors":
		if !group {
			return segment{}, &TextError{Placeholder: raw, Reason: "only works in group_text; item_text describes one item and can use " + itemFieldList}
		}
		if name == "count" {
			return segment{field: fieldCount}, nil
		}
		return segment{field: fieldActors}, nil
	}
	list := itemFieldList
	if group {
		list = groupFieldList
	}
	return segment{}, &TextError{Placeholder: raw, Reason: "is not a known field; use " + list}
}

func validDataKey(k string) bool {
	if k == "" {
		return false
	}
	for _, r := range k {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != '_' && r != '-' {
			return false
		}
	}
	return true
}

// abbreviate keeps error messages short when the text is long.
func abbreviate(s string) string {
	if utf8.RuneCountInString(s) <= 40 {
		return s
	}
	return string([]rune(s)[:40]) + "…"
}

// fields is what a text expands against: one item, and for group texts
// the group's count and actors.
type fields struct {
	item  *Item
	loc   *time.Location
	lang  i18n.Locale
	count int
	// one picks the singular form for a count other than 1 (Russian 21).
	one    bool
	actors string
}

// maxValue caps one placeholder's value before it goes into a text: a
// long excerpt reads as its first 300 characters and an ellipsis, and
// leaves room on the line for what follows it. Names and titles are cut
// shorter, each on its own (maxName, maxTitle), so that a 300-character
// name cannot push the verb of "{{actor.name}} commented on {{object.title}}"
// out of a subject.
const (
	maxValue = 300
	maxName  = 40
	maxTitle = 100
)

// fieldLimit is the most characters one field's value brings into a text.
func fieldLimit(f field) int {
	switch f {
	case fieldActorName, fieldActorID, fieldObjectType, fieldObjectID:
		return maxName
	case fieldObjectTitle:
		return maxTitle
	}
	return maxValue
}

// expand writes the form for f.count, with every value folded onto one
// line so that no event can add line breaks to a heading or a subject, and
// cut to at most limit characters. Each value is cut to its field's limit
// (or limit, if less) before it goes in, and expansion stops once it holds
// the bytes of limit characters, so its work and memory are bounded
// whatever the event holds: an email of 100 × {{data.x}} with a 64 KiB
// value takes 50 KB to render, not 32 MB (BenchmarkRenderHugeData).
// When a field is empty, the punctuation it leaves stranded at either end
// and empty brackets are tidied away, so "{{actor.name}}: {{object.title}}"
// without a name reads "Task 1", not ": Task 1".
func (t *text) expand(f fields, limit int) string {
	segs := t.many
	if f.count == 1 || f.one {
		segs = t.one
	}
	var b strings.Builder
	missing := false
	for _, s := range segs {
		if b.Len() > limit*utf8.UTFMax {
			break
		}
		if s.field == fieldNone {
			b.WriteString(s.lit)
			continue
		}
		v := clip(oneLine(f.value(s)), min(fieldLimit(s.field), limit))
		missing = missing || v == ""
		b.WriteString(v)
	}
	out := oneLine(b.String())
	if missing {
		out = tidy(out)
	}
	return clip(out, limit)
}

// stranded is what an empty field leaves behind at the ends of a line.
const stranded = " :;,·|–—-/"

// tidy drops empty brackets and stranded separators from a line whose
// text had an empty field.
func tidy(s string) string {
	s = strings.NewReplacer("()", "", "[]", "", "“”", "", `""`, "", "«»", "").Replace(s)
	return oneLine(strings.Trim(s, stranded))
}

func (f fields) value(s segment) string {
	switch s.field {
	case fieldCount:
		return f.lang.Number(f.count)
	case fieldActors:
		return f.actors
	}
	if f.item == nil {
		return ""
	}
	it := f.item
	switch s.field {
	case fieldActorName:
		return it.Actor.Name
	case fieldActorID:
		return it.Actor.ID
	case fieldObjectTitle:
		return it.Object.Title
	case fieldObjectURL:
		return it.Object.URL
	case fieldObjectType:
		return it.Object.Type
	case fieldObjectID:
		return it.Object.ID
	case fieldOccurredAt:
		return formatWhen(it.OccurredAt, f.loc, f.lang)
	case fieldData:
		return dataValue(it.Data, s.data)
	}
	return ""
}

// formatWhen is how every time of an event reads: short, in the
// recipient's zone, and naming it ("Nov 22, 10:00 CET"), because an email
// is read in other places and forwarded to other people than its
// recipient's settings assume.
func formatWhen(t time.Time, loc *time.Location, lang i18n.Locale) string {
	if t.IsZero() {
		return ""
	}
	return formatWhenAs(t, loc, lang.T("layout_when", nil))
}

// formatWhenAs is formatWhen with the language's layout looked up
// already, once for a group's items.
func formatWhenAs(t time.Time, loc *time.Location, layout string) string {
	if t.IsZero() {
		return ""
	}
	return t.In(loc).Format(layout)
}

// dataValue follows a key path into event data. Strings render as they
// are, numbers and booleans as they print, lists of such values joined
// with commas; maps and anything missing render empty, because a half
// printed Go map in an email helps nobody.
func dataValue(data map[string]any, path []string) string {
	var v any = data
	for _, p := range path {
		switch m := v.(type) {
		case map[string]any:
			v = m[p]
		case map[string]string:
			v = m[p]
		default:
			return ""
		}
	}
	if list, ok := v.([]any); ok {
		parts := make([]string, 0, len(list))
		for _, e := range list {
			if s := scalar(e); s != "" {
				parts = append(parts, s)
			}
		}
		return strings.Join(parts, ", ")
	}
	return scalar(v)
}

func scalar(v any) string {
	switch x := v.(type) {
	case nil, map[string]any, map[string]string, []any:
		return ""
	case string:
		return x
	case float64:
		// JSON numbers arrive as float64; 1e+06 is not how people write
		// a million.
		return strconv.FormatFloat(x, 'f', -1, 64)
	case fmt.Stringer:
		return x.String()
	}
	return fmt.Sprint(v)
}

// ValidateItemText checks an item_text when a type is saved, so a typo
// such as {{actor.nam}} is an error for the person saving it rather than
// an empty line in every email later. Group-only placeholders ({{count}},
// {{actors}}) and "|" are refused, because an item is always one thing.
// The error is a *TextError naming the placeholder.
func ValidateItemText(s string) error {
	_, err := parseText(s, false)
	return err
}

// ValidateGroupText checks a group_text when a type is saved; it accepts
// {{count}}, {{actors}}, the item fields (taken from the newest item) and
// one "|" between the singular and the plural form.
func ValidateGroupText(s string) error {
	_, err := parseText(s, true)
	return err
}

// ValidateViewURL checks a type's view_url when the type is saved: an
// item text (its fields come from the newest item of a group) that starts
// with "http://" or "https://" and a host, so every expansion is a link
// to the host application and never a javascript: or relative URL.
func ValidateViewURL(s string) error {
	t, err := parseText(s, false)
	if err != nil {
		return err
	}
	head := ""
	if len(t.one) > 0 && t.one[0].field == fieldNone {
		head = t.one[0].lit
	}
	// With a placeholder, the host must end in the literal text, or an
	// event could extend "https://app.example" into another host.
	u, err := url.Parse(head)
	if safeURL(head) == "" || strings.ContainsAny(s, " \t\r\n") ||
		(len(t.one) > 1 && (err != nil || !strings.HasPrefix(u.Path, "/"))) {
		return &TextError{Reason: "view_url must start with http:// or https://, a host and a / written out, such as https://app.example/docs/{{object.id}}, and contain no spaces"}
	}
	return nil
}

// expandURL expands a view_url for one item, escaping every value as a
// path segment, or after a "?" as a query value, so a title with "/",
// "?", "&" or "#" stays inside its place. A value that makes a path
// segment "." or ".." makes no link: browsers read those, and "%2E%2E"
// too, as a step up the path, so no escaping keeps them in place.
func (t *text) expandURL(it *Item, loc *time.Location) string {
	var b strings.Builder
	f := fields{item: it, loc: loc, count: 1}
	query := false
	for _, s := range t.one {
		if s.field == fieldNone {
			b.WriteString(s.lit)
			query = query || strings.Contains(s.lit, "?")
			continue
		}
		v := clip(f.value(s), maxValue)
		if query {
			v = url.QueryEscape(v)
		} else {
			v = url.PathEscape(v)
		}
		b.WriteString(v)
	}
	link := safeURL(b.String())
	u, err := url.Parse(link)
	if err != nil {
		return ""
	}
	for _, seg := range strings.Split(u.EscapedPath(), "/") {
		if seg = strings.ReplaceAll(strings.ToLower(seg), "%2e", "."); seg == "." || seg == ".." {
			return ""
		}
	}
	return link
}

// DefaultItemText is given to a type saved without item_text: who did it
// and to what is the most a generic line can say.
func DefaultItemText() string { return "{{actor.name}}: {{object.title}}" }

// DefaultGroupText is given to a type saved without group_text. Type names
// are usually plural nouns ("Comments", "Shared apps"), so the count
// follows the name ("Comments: 15 new") instead of preceding it, which
// would read "1 new Comments". Braces, "|" and control characters are
// taken out of the name, and a long name is cut (to maxHeading, the most
// a heading shows anyway), so the result always passes ValidateGroupText.
func DefaultGroupText(typeName string) string {
	name := clip(oneLine(strings.Map(func(r rune) rune {
		if r == '{' || r == '}' || r == '|' {
			return ' '
		}
		return r
	}, typeName)), maxHeading)
	if name == "" {
		return "1 new update|{{count}} new updates"
	}
	return name + ": 1 new|" + name + ": {{count}} new"
}

// DataKeys are the keys of an item's data that t's texts read
// ({{data.KEY}}, {{data.KEY.SUBKEY}}), so a loader decodes those and
// nothing else. all is true when a text does not parse: the loader then
// decodes everything and the render reports the text.
func DataKeys(t Type) (keys []string, all bool) {
	item := t.ItemText
	if strings.TrimSpace(item) == "" {
		item = DefaultItemText()
	}
	for _, src := range []struct {
		s     string
		group bool
	}{{item, false}, {t.GroupText, true}, {t.ViewURL, false}} {
		if strings.TrimSpace(src.s) == "" {
			continue
		}
		tx, err := parseText(src.s, src.group)
		if err != nil {
			return nil, true
		}
		for _, s := range append(tx.one, tx.many...) {
			if s.field == fieldData && !slices.Contains(keys, s.data[0]) {
				keys = append(keys, s.data[0])
			}
		}
	}
	return keys, false
}
