package mailtemplates

import (
	"fmt"
	"regexp"
	"strings"
)

// A type text is a short template such as
// "{{actors}} commented on {{object.title}}|{{actors}} left {{count}} comments".
// "|" splits the singular from the plural form, so a literal "|" cannot
// appear in a text. Placeholders name fields; expansion gives plain text,
// which each output (HTML, text, subject) then escapes its own way.

var placeholder = regexp.MustCompile(`\{\{\s*([^{}]*?)\s*\}\}`)

// itemFields are the placeholders of item_text; data.KEY is also allowed.
var itemFields = map[string]bool{
	"actor.name": true, "actor.id": true,
	"object.title": true, "object.url": true, "object.type": true, "object.id": true,
	"occurred_at": true,
}

// text is a parsed type text: literal and placeholder segments for the
// singular and (when given) the plural form.
type text struct {
	one, many []segment
}

type segment struct {
	lit   string
	field string // set for a placeholder
}

func parseText(s string, group bool) (*text, error) {
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("is empty")
	}
	forms := strings.Split(s, "|")
	if len(forms) > 2 {
		return nil, fmt.Errorf("has more than one '|' (it splits singular|plural)")
	}
	t := &text{}
	for i, f := range forms {
		segs, err := parseForm(f, group)
		if err != nil {
			return nil, err
		}
		if i == 0 {
			t.one = segs
		} else {
			t.many = segs
		}
	}
	if t.many == nil {
		t.many = t.one
	}
	return t, nil
}

func parseForm(f string, group bool) ([]segment, error) {
	var segs []segment
	rest := f
	for {
		loc := placeholder.FindStringSubmatchIndex(rest)
		if loc == nil {
			break
		}
		if err := literal(rest[:loc[0]]); err != nil {
			return nil, err
		}
		segs = append(segs, segment{lit: rest[:loc[0]]})
		name := rest[loc[2]:loc[3]]
		if !knownField(name, group) {
			return nil, fmt.Errorf("unknown placeholder {{%s}}; use %s", name, fieldList(group))
		}
		segs = append(segs, segment{field: name})
		rest = rest[loc[1]:]
	}
	if err := literal(rest); err != nil {
		return nil, err
	}
	return append(segs, segment{lit: rest}), nil
}

func literal(s string) error {
	if strings.Contains(s, "{{") || strings.Contains(s, "}}") {
		return fmt.Errorf("has unbalanced braces near %q", s)
	}
	return nil
}

func knownField(name string, group bool) bool {
	if itemFields[name] {
		return true
	}
	if key, ok := strings.CutPrefix(name, "data."); ok && key != "" {
		return true
	}
	return group && (name == "count" || name == "actors")
}

func fieldList(group bool) string {
	s := "actor.name, actor.id, object.title, object.url, object.type, object.id, data.KEY, occurred_at"
	if group {
		s = "count, actors, " + s
	}
	return s
}

// expand fills the form for count with field values.
func (t *text) expand(count int, value func(string) string) string {
	segs := t.many
	if count == 1 {
		segs = t.one
	}
	var b strings.Builder
	for _, s := range segs {
		if s.field != "" {
			b.WriteString(value(s.field))
		} else {
			b.WriteString(s.lit)
		}
	}
	return strings.TrimSpace(b.String())
}

// ValidateItemText checks an item_text when a type is saved, so a typo is
// an error at once rather than a broken email later.
func ValidateItemText(s string) error {
	_, err := parseText(s, false)
	return err
}

// ValidateGroupText checks a group_text when a type is saved.
func ValidateGroupText(s string) error {
	_, err := parseText(s, true)
	return err
}

// DefaultItemText is used for a type saved without item_text.
func DefaultItemText() string { return "{{actor.name}}: {{object.title}}" }

// DefaultGroupText is used for a type saved without group_text: the type's
// name with the count ("1 new Comments" reads poorly, so the singular
// names one update).
func DefaultGroupText(typeName string) string {
	name := strings.NewReplacer("{", "", "}", "", "|", "/").Replace(typeName)
	return "1 update: " + name + "|{{count}} updates: " + name
}
