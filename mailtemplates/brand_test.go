package mailtemplates

import (
	"net/mail"
	"strings"
	"testing"
)

// acme is a host product's brand, as an operator sets it.
var acme = Brand{ProductName: "Acme Docs", ProductURL: "https://docs.acme.example/", LogoURL: "https://docs.acme.example/logo.png",
	Color: "#0F5132", FromName: "Acme Docs Notifications"}

// branded is in as the host product sends it: its brand, its address and
// its links, so that anything saying "lull" came from the layouts.
func branded(in Input, b Brand) Input {
	in.Brand = b
	in.From = "notify@acme.example"
	in.SettingsURL = "https://docs.acme.example/settings/enter?token=s"
	in.UnsubscribeURL = "https://docs.acme.example/unsubscribe?token=u"
	if in.MuteURL != "" {
		in.MuteURL = "https://docs.acme.example/mute?token=m"
	}
	links := map[string]string{}
	for th := range in.ThreadMuteURLs {
		links[th] = "https://docs.acme.example/mute?token=" + th
	}
	in.ThreadMuteURLs = links
	return in
}

// TestNoLullReachesARecipient renders every layout with a brand, and
// with none, and finds "lull" nowhere a recipient can see it: subject,
// From, HTML (title, alt text, footer, markup) and text.
func TestNoLullReachesARecipient(t *testing.T) {
	t.Parallel()
	for _, b := range []Brand{acme, {}} {
		for name, in := range layouts() {
			m, doc := render(t, branded(in, b))
			for part, s := range map[string]string{"subject": m.Subject, "from": m.From, "html": m.HTML, "text": m.Text} {
				if i := strings.Index(strings.ToLower(s), "lull"); i >= 0 {
					t.Errorf("%s, brand %q: %s says lull: …%s…", name, b.ProductName, part, s[max(0, i-60):min(len(s), i+60)])
				}
			}
			if b.ProductName == "" {
				continue
			}
			if got := strings.TrimSpace(doc.Find(`[data-testid=brand]`).Text()); got != "Acme Docs" {
				t.Errorf("%s: header says %q, want Acme Docs", name, got)
			}
			if alt, _ := doc.Find(`[data-testid=brand] img`).Attr("alt"); alt != "Acme Docs" {
				t.Errorf("%s: logo alt %q", name, alt)
			}
			if href, _ := doc.Find(`[data-testid=brand] a`).Attr("href"); href != acme.ProductURL {
				t.Errorf("%s: header links to %q", name, href)
			}
			if !strings.Contains(doc.Find(`[data-testid=footer]`).Text(), "Sent by Acme Docs to bob@example.com.") ||
				!strings.Contains(m.Text, "Sent by Acme Docs to bob@example.com.") {
				t.Errorf("%s: footer does not name Acme Docs", name)
			}
			if style, _ := doc.Find(`[data-testid=unsubscribe-link]`).Attr("style"); !strings.Contains(style, "#0f5132") {
				t.Errorf("%s: links not in the brand's colour: %q", name, style)
			}
			if a, err := mail.ParseAddress(m.From); err != nil || a.Name != "Acme Docs Notifications" || a.Address != "notify@acme.example" {
				t.Errorf("%s: From %q", name, m.From)
			}
		}
	}
}

func TestSenderName(t *testing.T) {
	t.Parallel()
	cases := []struct {
		brand      Brand
		from, want string
	}{
		{Brand{}, "notify@acme.example", "notify@acme.example"},
		{Brand{ProductName: "Acme Docs"}, "notify@acme.example", `"Acme Docs" <notify@acme.example>`},
		{Brand{ProductName: "Acme Docs"}, "Acme Alerts <notify@acme.example>", "Acme Alerts <notify@acme.example>"},
		{Brand{ProductName: "Acme Docs", FromName: "Docs bot"}, "Acme Alerts <notify@acme.example>", `"Docs bot" <notify@acme.example>`},
		{Brand{FromName: "Zoë\r\nBcc: eve@example.com"}, "n@acme.example", "=?utf-8?b?Wm/DqyBCY2M6IGV2ZUBleGFtcGxlLmNvbQ==?= <n@acme.example>"},
	}
	for _, c := range cases {
		if got := c.brand.Sender(c.from); got != c.want {
			t.Errorf("%+v.Sender(%q) = %q, want %q", c.brand, c.from, got, c.want)
		}
	}
}

func TestBrandCheck(t *testing.T) {
	t.Parallel()
	if errs := acme.Check(); len(errs) != 0 {
		t.Fatalf("acme refused: %v", errs)
	}
	if errs := (Brand{}).Check(); len(errs) != 0 {
		t.Fatalf("the empty brand refused: %v", errs)
	}
	bad := []struct {
		field string
		brand Brand
	}{
		{"product_url", Brand{ProductURL: "javascript:alert(1)"}},
		{"product_url", Brand{ProductURL: "docs.acme.example"}},
		{"logo_url", Brand{LogoURL: "data:image/png;base64,AAAA"}},
		{"logo_url", Brand{LogoURL: "https://cdn.example;script-src/logo.png"}}, // would end the page policy's img-src
		{"logo_url", Brand{LogoURL: "https://cdn.example'/logo.png"}},
		{"logo_url", Brand{LogoURL: "https://acme.example/" + strings.Repeat("a", 2000)}},
		// A link showing one host while leading to another, and a logo
		// whose password every recipient's mail client would fetch with.
		{"product_url", Brand{ProductURL: "https://docs.acme.example@evil.example/"}},
		{"logo_url", Brand{LogoURL: "https://user:secret@cdn.example/logo.png"}},
		{"color", Brand{Color: "red"}},
		{"color", Brand{Color: "#12345"}},
		{"color", Brand{Color: "#ffeb3b"}}, // yellow: white text on it is unreadable
		{"color", Brand{Color: "#3b82f6"}}, // a mid blue at 3.7:1
		{"product_name", Brand{ProductName: strings.Repeat("A", 61)}},
		{"product_name", Brand{ProductName: "Acme\nBcc: x"}},
		{"from_name", Brand{FromName: " Acme"}},
	}
	for _, c := range bad {
		if errs := c.brand.Check(); errs[c.field] == "" || len(errs) != 1 {
			t.Errorf("%+v: errors %v, want one on %s", c.brand, errs, c.field)
		}
	}
}
