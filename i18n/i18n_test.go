package i18n

import (
	"encoding/json"
	"io/fs"
	"path"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/text/feature/plural"
	"golang.org/x/text/language"
)

// catalog is one locale as written: a key maps to a string or to its
// plural forms.
type catalog map[string]any

// readCatalogs merges each locale's files: "de.json" and any
// "<area>.de.json" beside it. A key written in two files of one locale
// is an error, since which one wins would depend on load order.
func readCatalogs(t *testing.T) map[string]catalog {
	t.Helper()
	names, _ := fs.Glob(catalogFiles, "locales/*.json")
	out := map[string]catalog{}
	for _, name := range names {
		b, _ := fs.ReadFile(catalogFiles, name)
		var c catalog
		if err := json.Unmarshal(b, &c); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		lang := strings.TrimSuffix(path.Base(name), ".json")
		lang = lang[strings.LastIndex(lang, ".")+1:]
		if out[lang] == nil {
			out[lang] = catalog{}
		}
		for k, v := range c {
			if _, dup := out[lang][k]; dup {
				t.Errorf("%s: %q is also in another %s file", name, k, lang)
			}
			out[lang][k] = v
		}
	}
	return out
}

var formNames = map[plural.Form]string{plural.Other: "other", plural.Zero: "zero", plural.One: "one",
	plural.Two: "two", plural.Few: "few", plural.Many: "many"}

// neededForms are the CLDR plural categories whole numbers fall into in
// lang: every one of them must be written for a counted string.
func neededForms(lang language.Tag) []string {
	var forms []string
	for n := 0; n <= 1_000_000; n = next(n) {
		f := formNames[plural.Cardinal.MatchPlural(lang, n, 0, 0, 0, 0)]
		if !slices.Contains(forms, f) {
			forms = append(forms, f)
		}
	}
	return forms
}

// next walks 0..1000 one by one, then the round numbers where languages
// such as French switch to "many".
func next(n int) int {
	if n < 1000 {
		return n + 1
	}
	return n * 10
}

var placeholder = regexp.MustCompile(`\{\{\s*\.(\w+)\s*\}\}`)

// fields are the placeholders a message uses, over all its forms.
func fields(v any) map[string]bool {
	out := map[string]bool{}
	add := func(s string) {
		for _, m := range placeholder.FindAllStringSubmatch(s, -1) {
			out[m[1]] = true
		}
	}
	switch v := v.(type) {
	case string:
		add(v)
	case map[string]any:
		for _, s := range v {
			add(s.(string))
		}
	}
	return out
}

// TestCatalogsComplete fails when a shipped locale misses a key of the
// English catalog, keeps a key English no longer has, lacks a plural
// category its language needs, or uses a placeholder English does not
// give it.
func TestCatalogsComplete(t *testing.T) {
	cats := readCatalogs(t)
	en := cats["en"]
	if len(cats) < 8 {
		t.Fatalf("%d catalogs shipped, want at least en, de, fr, es, pt-BR, ja, ar, ru", len(cats))
	}
	for name, c := range cats {
		tag := language.MustParse(name)
		for key, want := range en {
			got, ok := c[key]
			if !ok {
				t.Errorf("%s: missing %q", name, key)
				continue
			}
			for f := range fields(got) {
				if !fields(want)[f] {
					t.Errorf("%s: %q uses {{.%s}}, which the English text does not have", name, key, f)
				}
			}
			forms, counted := got.(map[string]any)
			if _, enCounted := want.(map[string]any); enCounted != counted {
				t.Errorf("%s: %q is counted in one catalog and not in the other", name, key)
				continue
			}
			for _, f := range neededForms(tag) {
				if counted && forms[f] == nil {
					t.Errorf("%s: %q lacks the plural form %q", name, key, f)
				}
			}
		}
		for key := range c {
			if _, ok := en[key]; !ok {
				t.Errorf("%s: %q is not in the English catalog", name, key)
			}
		}
	}
}

func TestPluralCategories(t *testing.T) {
	cases := []struct {
		locale string
		n      int
		want   string
	}{
		{"ru", 1, "1 обновление"}, {"ru", 21, "21 обновление"}, // one
		{"ru", 3, "3 обновления"}, {"ru", 24, "24 обновления"}, // few
		{"ru", 5, "5 обновлений"}, {"ru", 11, "11 обновлений"}, // many
		{"ar", 0, "لا مستجدات"}, {"ar", 1, "تحديث واحد"}, {"ar", 2, "تحديثان"}, // zero, one, two
		{"ar", 3, "3 تحديثات"}, {"ar", 11, "11 تحديثًا"}, {"ar", 100, "100 تحديث"}, // few, many, other
		{"de", 1, "1 Neuigkeit"}, {"de", 1234, "1.234 Neuigkeiten"},
		{"ja", 1, "1件の新着"},
	}
	for _, c := range cases {
		got := Resolve(c.locale, "", "en").N("updates", c.n, nil)
		// Arabic may write its digits as Arabic-Indic ones; compare the
		// words and accept either digit form.
		if got != c.want && toLatinDigits(got) != c.want {
			t.Errorf("%s %d: got %q, want %q", c.locale, c.n, got, c.want)
		}
	}
}

func toLatinDigits(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= '٠' && r <= '٩' {
			return '0' + (r - '٠')
		}
		return r
	}, s)
}

func TestResolve(t *testing.T) {
	cases := []struct {
		recipient, accept, def string
		tag, requested         string
		chain                  []string
	}{
		{"de-AT", "fr", "en", "de", "de-AT", []string{"de-AT", "de"}},
		{"", "fr-CH, en;q=0.5", "en", "fr", "fr-CH", []string{"fr-CH", "fr"}},
		{"ko", "", "es", "es", "ko", []string{"ko", "es"}},
		{"", "", "es", "es", "es", []string{"es"}},
		{"pt", "", "en", "pt-BR", "pt", []string{"pt", "pt-BR"}},
		{"not a tag!", "ja", "en", "ja", "ja", []string{"ja"}},
		{"", "garbage;;q=", "", "en", "en", []string{"en"}},
		{"ar-EG", "", "en", "ar", "ar-EG", []string{"ar-EG", "ar"}},
		// English is served to an en-GB recipient or browser, not the default.
		{"en-GB", "", "de", "en", "en-GB", []string{"en-GB", "en-001", "en"}},
		{"", "en-GB, de;q=0.5", "de", "en", "en-GB", []string{"en-GB", "en-001", "en"}},
		// A stored locale no catalog serves yields to the browser's.
		{"ko", "ja, en;q=0.5", "en", "ja", "ko", []string{"ko", "ja"}},
		{"", "de;q=0.1, fr;q=0.9", "en", "fr", "fr", []string{"fr"}},
		{"", "*", "es", "es", "mul", []string{"mul", "es"}},
	}
	for _, c := range cases {
		l := Resolve(c.recipient, c.accept, c.def)
		if l.Tag() != c.tag || l.Requested() != c.requested || !slices.Equal(l.TextChain(), c.chain) {
			t.Errorf("Resolve(%q, %q, %q) = %s for %s, chain %v; want %s for %s, chain %v",
				c.recipient, c.accept, c.def, l.Tag(), l.Requested(), l.TextChain(), c.tag, c.requested, c.chain)
		}
	}
	if d := Resolve("ar", "", "").Dir(); d != "rtl" {
		t.Errorf("ar is %s", d)
	}
	if d := Resolve("de", "", "").Dir(); d != "ltr" {
		t.Errorf("de is %s", d)
	}
}

func TestParse(t *testing.T) {
	for in, want := range map[string]string{"": "", "en-us": "en-US", "de-AT": "de-AT", "pt-br": "pt-BR", "zh-Hant-TW": "zh-Hant-TW"} {
		if got, err := Parse(in); err != nil || got != want {
			t.Errorf("Parse(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"english", "x", "de_AT!", "und", strings.Repeat("a", 40), "\x00"} {
		if got, err := Parse(in); err == nil {
			t.Errorf("Parse(%q) = %q, want an error", in, got)
		}
	}
}

func TestListsAndDates(t *testing.T) {
	lists := []struct {
		locale string
		names  []string
		others int
		want   string
	}{
		{"en", []string{"Alice", "Bob"}, 13, "Alice, Bob and 13 others"},
		{"en", []string{"Alice"}, 1, "Alice and 1 other"},
		{"en", []string{"Alice", "Bob", "Carol"}, 0, "Alice, Bob and Carol"},
		{"de", []string{"Alice", "Bob"}, 13, "Alice, Bob und 13 weitere"},
		{"ja", []string{"アリス", "ボブ"}, 3, "アリス、ボブ、他3人"},
		{"ru", []string{"Алиса"}, 5, "Алиса и ещё 5 человек"},
	}
	for _, c := range lists {
		if got := Resolve(c.locale, "", "").List(c.names, c.others); got != c.want {
			t.Errorf("%s List = %q, want %q", c.locale, got, c.want)
		}
	}
	berlin, _ := time.LoadLocation("Europe/Berlin")
	at := time.Date(2026, 3, 2, 14, 5, 0, 0, berlin)
	for locale, want := range map[string]string{
		"en": "Monday, March 2 at 2:05 PM CET",
		"de": "Montag, 2. März um 14:05 CET",
		"fr": "lundi 2 mars à 14:05 CET",
	} {
		if got := Resolve(locale, "", "").DateTime(at); got != want {
			t.Errorf("%s DateTime = %q, want %q", locale, got, want)
		}
	}
}
