package web_test

import (
	"strings"
	"testing"
)

// TestSettingsIsolateANameInTheOtherDirection: an Arabic recipient name
// in the English "Settings for …" is wrapped in a first-strong isolate,
// so it cannot reorder the words around it; an Arabic page isolates a
// Latin name the same way.
func TestSettingsIsolateANameInTheOtherDirection(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ locale, name, want string }{
		{"en", "أحمد", "Settings for \u2068أحمد\u2069"},
		{"ar", "Bob", "إعدادات \u2068Bob\u2069"},
	} {
		a, link := localeSetup(t, c.locale)
		a.mustCall(t, "PUT", "/api/v1/recipients/u_bob", `{"name":"`+c.name+`"}`, 200)
		_, doc := getDoc(t, langClient(""), link)
		if got := doc.Find("body").Text(); !strings.Contains(got, c.want) {
			t.Errorf("%s page lacks %q", c.locale, c.want)
		}
	}
}
