package mailtemplates

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestTypeTextValidation(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		text  string
		group bool
		// mention is what the error must contain, so the person saving
		// the type sees which placeholder is wrong; empty for a good text.
		mention string
	}{
		{"ItemDefault", DefaultItemText(), false, ""},
		{"ItemAllFields", "{{actor.name}} {{actor.id}} {{object.title}} {{object.url}} {{object.type}} {{object.id}} {{occurred_at}}", false, ""},
		{"SpacesInsideBraces", "{{ actor.name }}: {{\tobject.title }}", false, ""},
		{"DataKeys", "{{data.excerpt}} {{data.a.b}} {{data.build-id}} {{data.n_2}} {{data.größe}}", false, ""},
		{"PlainText", "Something happened", false, ""},
		{"SingleBracesAreText", "{json} } {", false, ""},
		{"GroupSingularPlural", "{{actors}} commented on {{object.title}}|{{actors}} left {{count}} comments on {{object.title}}", true, ""},
		{"GroupOneForm", "{{count}} × {{object.title}}", true, ""},
		{"GroupItemFields", "{{data.status}} at {{occurred_at}}", true, ""},

		{"Empty", "", false, "empty"},
		{"Blank", "   ", true, "empty"},
		{"CountInItem", "{{count}} items", false, "{{count}}"},
		{"ActorsInItem", "{{ actors }} did it", false, "{{ actors }}"},
		{"Typo", "{{actor.nam}} wrote", false, "{{actor.nam}}"},
		{"UnknownGroup", "{{foo}} happened", true, "{{foo}}"},
		{"EmptyPlaceholder", "a {{}} b", false, "{{}}"},
		{"BlankPlaceholder", "a {{  }} b", true, "{{  }}"},
		{"DataWithoutKey", "{{data.}}", false, "{{data.}}"},
		{"DataEmptySegment", "{{data.a..b}}", false, "{{data.a..b}}"},
		{"DataBadKey", "{{data.a b}}", false, "{{data.a b}}"},
		{"Unclosed", "{{actor.name}: hi", false, "{{actor.name}: hi"},
		{"UnclosedAtEnd", "hi {{actor.name", true, "{{actor.name"},
		{"StrayClose", "actor.name}} wrote", false, `"}}"`},
		{"TripleBraces", "{{{actor.name}}}", false, "{{{actor.name}}"},
		{"PipeInItem", "{{actor.name}}|{{actor.name}}s", false, `"|"`},
		{"TwoPipes", "a|b|c", true, `more than one "|"`},
		{"EmptySingular", "|{{count}} comments", true, "singular"},
		{"EmptyPlural", "1 comment| ", true, "plural"},
		{"PipeInsidePlaceholder", "{{data.a|b}}", true, "{{data.a|b}}"},
		{"TooLong", strings.Repeat("a", maxTextLen+1), false, "characters long"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			validate := ValidateItemText
			if c.group {
				validate = ValidateGroupText
			}
			err := validate(c.text)
			switch {
			case c.mention == "" && err != nil:
				t.Errorf("%q refused: %v", c.text, err)
			case c.mention != "" && err == nil:
				t.Errorf("%q accepted", c.text)
			case c.mention != "" && !strings.Contains(err.Error(), c.mention):
				t.Errorf("%q: error %q does not mention %q", c.text, err, c.mention)
			}
			var te *TextError
			if err != nil && !errors.As(err, &te) {
				t.Errorf("error %T is not a *TextError", err)
			}
		})
	}
}

func TestItemTextsAreValidGroupTexts(t *testing.T) {
	t.Parallel()
	// A group text may use every item field, so anything valid as an
	// item text without "|" is valid as a group text.
	for _, s := range []string{DefaultItemText(), "{{data.x}} at {{occurred_at}}"} {
		if err := ValidateGroupText(s); err != nil {
			t.Errorf("%q: %v", s, err)
		}
	}
}

func TestDefaultGroupText(t *testing.T) {
	t.Parallel()
	cases := map[string][2]string{
		"Comments":               {"Comments: 1 new", "Comments: 15 new"},
		"Shared apps":            {"Shared apps: 1 new", "Shared apps: 15 new"},
		"Weird {{name}} | type":  {"Weird name type: 1 new", "Weird name type: 15 new"},
		"Line\r\nbreak {{count}": {"Line break count: 1 new", "Line break count: 15 new"},
		"":                       {"1 new update", "15 new updates"},
		"{{}}|":                  {"1 new update", "15 new updates"},
	}
	for name, want := range cases {
		src := DefaultGroupText(name)
		if err := ValidateGroupText(src); err != nil {
			t.Errorf("DefaultGroupText(%q) = %q does not validate: %v", name, src, err)
			continue
		}
		for i, count := range []int{1, 15} {
			g := Group{Type: Type{Key: "k", GroupText: src}, Total: count, Items: []Item{{Actor: Actor{Name: "Ann"}}}}
			if got := Heading(g, time.UTC); got != want[i] {
				t.Errorf("DefaultGroupText(%q) with %d reads %q, want %q", name, count, got, want[i])
			}
		}
	}
}

// TestAbsentFieldsRenderEmpty: a field absent from an event renders
// empty, and the separators and brackets it leaves stranded go with it,
// so the default item text without an actor reads "Task 1", not ": Task 1".
func TestAbsentFieldsRenderEmpty(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"[{{actor.name}}][{{object.url}}][{{data.excerpt}}][{{occurred_at}}]": "",
		DefaultItemText():                          "Task 1",
		"{{object.title}} failed ({{data.error}})": "Task 1 failed",
		"{{actor.name}} — {{object.title}}":        "Task 1",
		"{{object.title}}: {{data.excerpt}}":       "Task 1",
	}
	for src, want := range cases {
		tx, err := parseText(src, false)
		if err != nil {
			t.Fatal(err)
		}
		if got := tx.expand(fields{item: &Item{Object: Object{Title: "Task 1"}}, loc: time.UTC, count: 1}, maxLine); got != want {
			t.Errorf("%q without its fields expands to %q, want %q", src, got, want)
		}
	}
}
