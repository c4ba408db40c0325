package mailtemplates

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// maxDataValue is the longest string an event's data can carry under the
// default LULL_MAX_DATA: 64 KiB less the 8 bytes of {"x":""}.
const maxDataValue = 64<<10 - 8

// maxOneItemEmail is the documented bound on a one-item email's HTML and
// text parts together, whatever the event holds: the item line is at most
// maxLine characters and appears in the title, the body and the text part.
const maxOneItemEmail = 32 << 10

// TestHugeValuesAreClippedBeforeExpansion: a value is cut to maxValue
// characters before it goes into a text, so one long excerpt leaves room
// for the rest of the line, and an item_text of 100 × {{data.x}} with a
// value at the data limit renders an email of a few kilobytes (building
// the line took 6 MB, and 1.1 GB with a 3 MB value, before values were
// cut first).
func TestHugeValuesAreClippedBeforeExpansion(t *testing.T) {
	t.Parallel()
	huge := strings.Repeat("y", maxDataValue)
	item := event("Ann", "Q3 plan", "", 0)
	item.Data = map[string]any{"x": huge, "tail": "the rest of the line"}

	t.Run("RestOfTheLineShows", func(t *testing.T) {
		t.Parallel()
		typ := commentType()
		typ.ItemText = "{{data.x}} and then {{data.tail}}"
		m, doc := render(t, input("cooldown", Group{Type: typ, Total: 1, Items: []Item{item}}))
		line := doc.Find(`[data-testid="item"]`).First().Text()
		want := strings.Repeat("y", 299) + "… and then the rest of the line"
		if !strings.Contains(line, want) {
			t.Errorf("item line %.80q… (%d characters), want the value cut to 300 characters and the rest of the line after it", line, utf8.RuneCountInString(line))
		}
		if !strings.Contains(m.Text, "the rest of the line") {
			t.Error("the text part lost what follows the long value")
		}
	})

	t.Run("HundredPlaceholders", func(t *testing.T) {
		t.Parallel()
		typ := commentType()
		typ.ItemText = strings.Repeat("{{data.x}}", 100)
		if err := ValidateItemText(typ.ItemText); err != nil {
			t.Fatal(err)
		}
		m, doc := render(t, input("cooldown", Group{Type: typ, Total: 1, Items: []Item{item}}))
		t.Logf("one-item email: %d bytes of HTML and text", len(m.HTML)+len(m.Text))
		if n := len(m.HTML) + len(m.Text); n > maxOneItemEmail {
			t.Errorf("a one-item email is %d bytes, want at most %d", n, maxOneItemEmail)
		}
		if n := utf8.RuneCountInString(doc.Find(`[data-testid="item"]`).First().Text()); n > maxLine+100 {
			t.Errorf("the item shows %d characters, want about %d", n, maxLine)
		}
	})
}

// BenchmarkRenderHugeData renders the email of TestHugeValuesAreClippedBeforeExpansion:
// 100 × {{data.x}} with a value at the data limit. B/op is the memory one
// such email takes.
func BenchmarkRenderHugeData(b *testing.B) {
	item := event("Ann", "Q3 plan", "", 0)
	item.Data = map[string]any{"x": strings.Repeat("y", maxDataValue)}
	typ := commentType()
	typ.ItemText = strings.Repeat("{{data.x}}", 100)
	in := input("cooldown", Group{Type: typ, Total: 1, Items: []Item{item}})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Render(in); err != nil {
			b.Fatal(err)
		}
	}
}
