package mailtemplates

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
)

// FuzzTypeText feeds arbitrary type texts and event values through
// validation and a whole render. Validation never panics and explains
// every refusal; a text it accepts renders without error whatever the
// event holds (a type cannot fail at send time in a way its validation
// did not catch); the subject stays on one line; and no text or value,
// however hostile, puts an element or an event handler into the HTML.
// A type name of any kind gives a default group text that validates.
func FuzzTypeText(f *testing.F) {
	for _, seed := range []struct {
		text  string
		group bool
		value string
	}{
		{DefaultItemText(), false, "Alice"},
		{"{{actors}} commented on {{object.title}}|{{actors}} left {{count}} comments on {{object.title}}", true, "Q3 plan"},
		{"{{data.excerpt}} {{data.a.b}} {{ occurred_at }}", false, `<script>alert(1)</script>`},
		{"<img src=x onerror=alert(1)> {{actor.name}}", false, `"><svg onload=alert(1)>`},
		{"{{object.url}}", false, "javascript:alert(1)"},
		{"{{count}}|{{count}}", true, "a\r\nBcc: x@example.com"},
		{"{{actor.name}", false, "\u202eevil"},
		{"{{{actor.name}}}", true, "}}{{"},
		{"a|b|c", true, ""},
		{"{{data.größe}}", false, "\x00\xff"},
		{strings.Repeat("{{actor.name}}", 70), false, strings.Repeat("W", 2000)},
	} {
		f.Add(seed.text, seed.group, seed.value)
	}
	now := time.Date(2026, 11, 23, 7, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, text string, group bool, value string) {
		if err := ValidateGroupText(DefaultGroupText(value)); err != nil {
			t.Fatalf("DefaultGroupText(%.80q) does not validate: %v", value, err)
		}
		validate := ValidateItemText
		if group {
			validate = ValidateGroupText
		}
		if err := validate(text); err != nil {
			var te *TextError
			if !errors.As(err, &te) || err.Error() == "" {
				t.Fatalf("refusal %T %q is not a *TextError with a message", err, err)
			}
			return
		}
		typ := Type{Key: "fuzz", Name: value, Category: value, DisplayLimit: 3, ItemOrder: "latest",
			ItemText: DefaultItemText(), GroupText: DefaultGroupText(value)}
		if group {
			typ.GroupText = text
		} else {
			typ.ItemText = text
		}
		item := Item{
			Actor:      Actor{ID: value, Name: value},
			Object:     Object{Type: value, ID: value, Title: value, URL: value},
			Data:       map[string]any{"excerpt": value, "a": map[string]any{"b": value}, "größe": []any{value, 1.5}},
			OccurredAt: now.Add(-time.Hour),
		}
		for _, n := range []int{1, 4} {
			items := make([]Item, n)
			for i := range items {
				items[i] = item
			}
			in := Input{BatchID: 7, Mode: "cooldown", Recipient: Recipient{ID: "u", Name: value, Email: "bob@example.com", Location: time.UTC},
				Since: now.Add(-2 * time.Hour), Date: now, From: "lull@example.com", MessageID: "batch-7@example.com",
				Groups:      []Group{{Type: typ, Total: n, Items: items, ActorNames: []string{value}, ActorCount: 1}},
				SettingsURL: "https://lull.example/settings", UnsubscribeURL: "https://lull.example/unsubscribe", Brand: Brand{ProductName: value}}
			msg, err := Render(in)
			if err != nil {
				t.Fatalf("text %q validated but rendering %d items failed: %v", text, n, err)
			}
			if strings.ContainsAny(msg.Subject, "\r\n") {
				t.Fatalf("subject %q holds a line break", msg.Subject)
			}
			assertInertHTML(t, msg.HTML)
		}
	})
}

// assertInertHTML fails when the HTML part has an element or attribute
// that could run script or load something: event data must only ever
// appear as text.
func assertInertHTML(t *testing.T, html string) {
	t.Helper()
	doc, err := goquery.NewDocumentFromReader(strings.NewReader(html))
	if err != nil {
		t.Fatal(err)
	}
	if n := doc.Find("script, img, svg, iframe, object, embed, form, input, base, meta[http-equiv]").Length(); n > 0 {
		t.Fatalf("the HTML part has %d active elements:\n%s", n, html)
	}
	doc.Find("*").Each(func(_ int, s *goquery.Selection) {
		for _, a := range s.Nodes[0].Attr {
			v := strings.ToLower(strings.TrimSpace(a.Val))
			if strings.HasPrefix(strings.ToLower(a.Key), "on") || strings.HasPrefix(v, "javascript:") || strings.HasPrefix(v, "data:") {
				t.Fatalf("the HTML part has %s=%q on <%s>", a.Key, a.Val, s.Nodes[0].Data)
			}
		}
	})
}

// TestDefaultGroupTextOfALongName is FuzzTypeText's first finding: a type
// saved with a 2,000-character name and no group_text got a default group
// text over the 1,000-character limit, which then failed every flush of
// the type at render time.
func TestDefaultGroupTextOfALongName(t *testing.T) {
	t.Parallel()
	for _, name := range []string{strings.Repeat("W", 2000), strings.Repeat("é ", 600), strings.Repeat("{|}", 500)} {
		got := DefaultGroupText(name)
		if err := ValidateGroupText(got); err != nil {
			t.Errorf("DefaultGroupText of a %d-byte name: %v", len(name), err)
		}
	}
}
