package mailtemplates

import (
	"bytes"
	"context"
	"html"
	"strings"

	"github.com/a-h/templ"
)

// The HTML layouts are templ components (layout.templ), compiled to Go:
// escaping is decided when they are generated, not found by reflection on
// every field of every send, which made html/template a sixth of a flush
// wave's CPU. templ drops the white space between tags, so the line
// breaks the layouts have always had are written out as nl.
var (
	nl      = templ.Raw("\n")
	dot     = templ.Raw(" · ")
	space   = templ.Raw(" ")
	doctype = templ.Raw("<!DOCTYPE html>\n")
)

// renderHTML writes v's HTML part into b.
func renderHTML(b *bytes.Buffer, v *view) error {
	return emailHTML(v).Render(context.Background(), b)
}

// styleBlock is the <style> element, whose text templ cannot interpolate.
// accent is a "#rrggbb" colour, checked by renderFit, so it needs no
// escaping.
func styleBlock(accent string) templ.Component {
	return templ.Raw(`<style>
:root { color-scheme: light dark; supported-color-schemes: light dark; }
.l-button { background-color: ` + accent + ` !important; }
@media (prefers-color-scheme: dark) {
  .l-bg { background-color: #111113 !important; }
  .l-card { background-color: #1c1c1f !important; border-color: #2e2e33 !important; }
  .l-text { color: #ededef !important; }
  .l-muted { color: #a1a1aa !important; }
  .l-line { border-color: #2e2e33 !important; }
  .l-link { color: #a5b4fc !important; }
  .l-button { background-color: #a5b4fc !important; color: #111113 !important; }
}
</style>
`)
}

// linkURL is a link as an href carries it: a link with a scheme other
// than http, https or mailto becomes "#ZgotmplZ", and the bytes a URL
// should not hold raw are percent-encoded, as html/template did, so links
// read as they always have. templ escapes the result for the attribute.
func linkURL(s string) templ.SafeURL {
	if !isSafeURL(s) {
		return "#ZgotmplZ"
	}
	return templ.SafeURL(normalizeURL(s))
}

func isSafeURL(s string) bool {
	if protocol, _, ok := strings.Cut(s, ":"); ok && !strings.Contains(protocol, "/") {
		return strings.EqualFold(protocol, "http") || strings.EqualFold(protocol, "https") || strings.EqualFold(protocol, "mailto")
	}
	return true
}

// normalizeURL percent-encodes every byte of s that is neither
// unreserved nor reserved in RFC 3986, leaving valid escapes alone; a
// quote, angle bracket or space can then never end the attribute.
func normalizeURL(s string) string {
	var b strings.Builder
	written := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if urlByteKept(c) || (c == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2])) {
			continue
		}
		if written == 0 {
			b.Grow(len(s) + 16)
		}
		b.WriteString(s[written:i])
		b.WriteByte('%')
		b.WriteByte(lowerHex[c>>4])
		b.WriteByte(lowerHex[c&15])
		written = i + 1
	}
	if written == 0 {
		return s
	}
	b.WriteString(s[written:])
	return b.String()
}

const lowerHex = "0123456789abcdef"

func urlByteKept(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$&*+,/:;=?@[]-._~", c) >= 0
}

func isHex(c byte) bool {
	return ('0' <= c && c <= '9') || ('a' <= c && c <= 'f') || ('A' <= c && c <= 'F')
}

// escapeText and escapeHref escape a value as the HTML layouts do where
// the address and the links appear: in text, and in a link's href.
func escapeText(s string) string { return html.EscapeString(s) }

func escapeHref(s string) string { return html.EscapeString(string(linkURL(s))) }

// linkStyle is the footer links' style, in the brand's colour.
func linkStyle(accent string) templ.SafeCSS {
	return templ.SafeCSS("color:" + accent + ";text-decoration:underline;")
}

// sepIf is sep when ok, else nothing.
func sepIf(ok bool, sep templ.Component) templ.Component {
	if ok {
		return sep
	}
	return templ.NopComponent
}
