package mailtemplates

import (
	"strings"
	"testing"

	"github.com/lull-dev/lull/i18n"
)

// TestOtherDirectionNamesAreIsolated: a name written in the other
// direction than the email's language, put into one of its sentences,
// is wrapped in a first-strong isolate (U+2068 … U+2069). Without it an
// Arabic product name in "Sent by متجر to bob@example.com." pulls the
// words beside it into its own direction, and a Latin name in an Arabic
// sentence drags the Arabic comma and full stop to the wrong side. Names
// in the email's own direction are left as they are.
func TestOtherDirectionNamesAreIsolated(t *testing.T) {
	t.Parallel()
	const fsi, pdi = "\u2068", "\u2069"
	cases := []struct {
		locale, product, want string
	}{
		{"en", "متجر", "Sent by " + fsi + "متجر" + pdi + " to bob@example.com."},
		{"en", "Acme Docs", "Sent by Acme Docs to bob@example.com."},
		{"ar", "Acme Docs", "أرسلها " + fsi + "Acme Docs" + pdi + " إلى " + fsi + "bob@example.com" + pdi + "."},
		{"ar", "متجر", "أرسلها متجر إلى " + fsi + "bob@example.com" + pdi + "."},
	}
	for _, c := range cases {
		in := branded(layouts()["digest"], Brand{ProductName: c.product})
		in.Locale = i18n.Resolve(c.locale, "", "")
		m, doc := render(t, in)
		if !strings.Contains(m.Text, c.want) || !strings.Contains(doc.Find(`[data-testid=footer]`).Text(), c.want) {
			t.Errorf("%s, product %q: footer lacks %q:\n%s", c.locale, c.product, c.want, m.Text)
		}
	}

	// The digest's summary names each section: an Arabic type name in an
	// English email keeps its count on its own side.
	in := layouts()["digest"]
	in.Groups[1].Type.Name = "مشاركات"
	m, _ := render(t, in)
	if !strings.Contains(m.Text, fsi+"مشاركات"+pdi+" (") {
		t.Errorf("summary does not isolate an Arabic section name:\n%s", m.Text)
	}

	// Actors in lull's list form: Latin names in an Arabic list keep the
	// Arabic comma and "and" between them in the reading order.
	got := i18n.Resolve("ar", "", "").List([]string{"Alice", "Bob"}, 0)
	if want := fsi + "Alice" + pdi + " و" + fsi + "Bob" + pdi; got != want {
		t.Errorf("Arabic list %q, want %q", got, want)
	}
}
