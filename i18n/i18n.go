// Package i18n speaks to each recipient in their own language: it resolves
// the locale of an email or a page, and looks lull's own strings up in the
// message catalogs under locales/ in go-i18n's format, plurals by CLDR's
// categories (one, few, many, ...). Each locale has a main file (de.json)
// and may have one per area of the product (settings.de.json), so strings
// of one page live together.
//
// English is the source catalog: every key exists in an English file, and
// the catalog test fails when another shipped locale misses a key or a
// plural category its language needs. A locale that has no catalog of its own
// falls back along its parents (de-AT to de) and then to the default.
package i18n

import (
	"embed"
	"fmt"
	"io/fs"
	"strings"

	goi18n "github.com/nicksnyder/go-i18n/v2/i18n"
	"golang.org/x/text/language"
)

//go:embed locales/*.json
var catalogFiles embed.FS

// bundle holds every shipped catalog; it is read once, at start, and only
// read afterwards, so lookups need no lock.
var bundle = loadBundle()

func loadBundle() *goi18n.Bundle {
	b := goi18n.NewBundle(language.English)
	names, err := fs.Glob(catalogFiles, "locales/*.json")
	if err != nil {
		panic(err)
	}
	for _, name := range names {
		if _, err := b.LoadMessageFileFS(catalogFiles, name); err != nil {
			panic(fmt.Sprintf("i18n: catalog %s: %v", name, err))
		}
	}
	return b
}

// Shipped lists the locales lull has catalogs for, English first.
func Shipped() []language.Tag { return bundle.LanguageTags() }

// maxTagLen bounds a stored locale: real tags are short, and a locale is
// copied into every email's view.
const maxTagLen = 35

// Parse checks that s is a well-formed BCP 47 language tag and returns its
// canonical form ("en-us" becomes "en-US"). The empty string is valid and
// means "no preference", so the default applies. A tag need not be
// shipped: a recipient's "de-AT" is kept as given and read as "de".
func Parse(s string) (string, error) {
	if s == "" {
		return "", nil
	}
	if len(s) > maxTagLen {
		return "", fmt.Errorf("is %d characters long; a language tag has at most %d", len(s), maxTagLen)
	}
	t, err := language.Parse(s)
	if err != nil || t == language.Und {
		return "", fmt.Errorf("is not a BCP 47 language tag such as \"en\", \"de-AT\" or \"pt-BR\"")
	}
	return t.String(), nil
}

// rtlScripts are the scripts written right to left among those CLDR
// knows a shipped or likely locale in.
var rtlScripts = map[string]bool{"Arab": true, "Hebr": true, "Thaa": true, "Syrc": true, "Nkoo": true, "Adlm": true}

// direction is "rtl" for a tag written right to left, else "ltr".
func direction(t language.Tag) string {
	if s, _ := t.Script(); rtlScripts[s.String()] {
		return "rtl"
	}
	return "ltr"
}

// chain is t and its parents, most specific first, without the root:
// de-AT, de. Type texts given per locale are looked up along it.
func chain(t language.Tag) []string {
	var tags []string
	for ; t != language.Und; t = t.Parent() {
		if s := t.String(); len(tags) == 0 || tags[len(tags)-1] != s {
			tags = append(tags, s)
		}
	}
	return tags
}

// acceptLanguage returns the tags of an Accept-Language header in the
// order of preference; a malformed header yields none.
func acceptLanguage(h string) []language.Tag {
	if h == "" || len(h) > 512 {
		return nil
	}
	tags, _, err := language.ParseAcceptLanguage(h)
	if err != nil {
		return nil
	}
	return tags
}

// clean trims and validates a candidate tag, returning Und when it is
// empty or malformed, so a bad stored value cannot break an email.
func clean(s string) language.Tag {
	t, err := language.Parse(strings.TrimSpace(s))
	if err != nil {
		return language.Und
	}
	return t
}
