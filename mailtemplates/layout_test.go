package mailtemplates

import (
	"fmt"
	"html"
	htmltemplate "html/template"
	"reflect"
	"strings"
	"testing"

	"github.com/lull-dev/lull/i18n"
)

var oddValues = []string{"", "plain", `a+b & c's "q" <x>`, "bob+tag@example.com", "مرحبا \u2068x\u2069", "بريد@مثال.السعودية",
	"https://app.example/s?q=a+b&c='x'(y)\"z\"<>{|}^`\\ %zz%41 ü#frag", "javascript:alert(1)", "JavaScript:x",
	"HTTPS://EX.example/ok", "mailto:a@b.example", "//x.example/p", "/relative?x=1", "data:text/html,<b>"}

// The layouts escape as html/template did, but for "+", which they write
// as itself rather than "&#43;": a page reads the same characters and
// follows the same links.
func TestLayoutEscapingReadsAsHTMLTemplateDid(t *testing.T) {
	t.Parallel()
	text := htmltemplate.Must(htmltemplate.New("").Parse(`<p>{{.}}</p>`))
	href := htmltemplate.Must(htmltemplate.New("").Parse(`<a href="{{.}}">`))
	exec := func(tm *htmltemplate.Template, s, pre, post string) string {
		var b strings.Builder
		if err := tm.Execute(&b, s); err != nil {
			t.Fatal(err)
		}
		return strings.TrimSuffix(strings.TrimPrefix(b.String(), pre), post)
	}
	for _, s := range oddValues {
		if got, want := escapeText(s), exec(text, s, "<p>", "</p>"); html.UnescapeString(got) != html.UnescapeString(want) || strings.ContainsAny(got, `<>"'`) {
			t.Errorf("text %q: %q, html/template wrote %q", s, got, want)
		}
		if got, want := escapeHref(s), exec(href, s, `<a href="`, `">`); html.UnescapeString(got) != html.UnescapeString(want) || strings.ContainsAny(got, `<>"' `) {
			t.Errorf("href %q: %q, html/template wrote %q", s, got, want)
		}
	}
}

// Recipients whose addresses and links hold characters the HTML part
// escapes get, from a shared render, the bytes a render of their own
// gives.
func TestSharedCopiesOfOddValuesEqualRenderingAlone(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"cooldown", "daily", "ar"} {
		ins := make([]Input, len(oddValues))
		for i, v := range oddValues {
			in := mutable(input(mode, comments(), shares()))
			if mode == "ar" {
				// Arabic, where a Latin address is isolated and an
				// Arabic one is not.
				in = mutable(input("daily", comments(), shares()))
				in.Locale = i18n.Resolve("ar", "", "")
			}
			in.Recipient.Email = fmt.Sprintf("r%d+%s@example.com", i, v)
			if mode == "ar" {
				in.Recipient.Email = v
			}
			in.SettingsURL, in.UnsubscribeURL = "https://lull.example/s?t="+v, v
			for th := range in.ThreadMuteURLs {
				in.ThreadMuteURLs[th] = v + "&mute=" + th
			}
			ins[i] = in
		}
		got, errs := RenderMany(ins)
		for i, in := range ins {
			want, err := Render(in)
			if err != nil || errs[i] != nil {
				t.Fatalf("%s %d: %v / %v", mode, i, err, errs[i])
			}
			if !reflect.DeepEqual(got[i], want) {
				t.Errorf("%s %q: the shared copy differs from rendering alone", mode, oddValues[i])
			}
		}
	}
}

// The brand's colour is written unescaped into the <style> block, so one
// that is not "#rrggbb" never reaches it.
func TestHostileColourNeverReachesTheStyle(t *testing.T) {
	t.Parallel()
	for _, c := range []string{"#123456;}</style><script>alert(1)</script>", "red", "#12345g", "#+12345", "expression(alert(1))"} {
		in := input("cooldown", comments())
		in.Color = c
		m, err := Render(in)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(m.HTML, "script") || strings.Contains(m.HTML, "expression") || !strings.Contains(m.HTML, "background-color: "+DefaultColor+" !important") {
			t.Errorf("colour %q reached the HTML", c)
		}
	}
}
