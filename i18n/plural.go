package i18n

import (
	"golang.org/x/text/feature/plural"
	"golang.org/x/text/language"
)

// OneForm reports whether n takes the first, singular form of a type's
// "one|other" text written in tag: when n is 1, or when the language's
// plural rules put n in "one" (Russian 21 and 101). An empty or
// malformed tag, a type's own texts, says 1 only.
func OneForm(tag string, n int) bool {
	if n == 1 {
		return true
	}
	t := clean(tag)
	if t == language.Und || n < 0 {
		return false
	}
	return plural.Cardinal.MatchPlural(t, n, 0, 0, 0, 0) == plural.One
}
