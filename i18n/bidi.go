package i18n

import "golang.org/x/text/unicode/bidi"

// Isolate wraps s in a first-strong isolate (U+2068 … U+2069) when it has
// letters written in the other direction than l's, for a name put into
// one of l's sentences. Unisolated, an Arabic product name in "Sent by
// متجر to bob@example.com." pulls the spaces and words beside it into its
// own direction, and a Latin name in an Arabic sentence drags the comma or
// full stop after it to the wrong side. Text in l's own direction is
// returned as it is.
func (l Locale) Isolate(s string) string {
	rtl := l.Dir() == "rtl"
	for _, r := range s {
		p, _ := bidi.LookupRune(r)
		switch p.Class() {
		case bidi.L:
			if rtl {
				return "\u2068" + s + "\u2069"
			}
		case bidi.R, bidi.AL:
			if !rtl {
				return "\u2068" + s + "\u2069"
			}
		}
	}
	return s
}
