package mailtemplates

import (
	"math"
	"net/mail"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Limits of the brand's fields: a name is shown in a header line, a title
// and a From header, where a long one crowds out what matters.
const (
	maxBrandName = 60
	maxBrandURL  = 2000
)

// plainHost is a host name or address with an optional port: nothing
// that could end a directive of a page's security policy, which names
// the logo's origin.
var plainHost = regexp.MustCompile(`^([A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])(:[0-9]+)?$`)

// DefaultColor is the accent of an unbranded email: links and buttons.
const DefaultColor = "#3b3bb3"

// Check returns what is wrong with b, keyed by field name
// ("product_name", "product_url", "logo_url", "color", "from_name"); an
// empty map means b is fine. Empty fields are always fine.
func (b Brand) Check() map[string]string {
	errs := map[string]string{}
	name := func(field, v string) {
		switch {
		case v != oneLine(v):
			errs[field] = "Use one line of text, without control characters."
		case utf8.RuneCountInString(v) > maxBrandName:
			errs[field] = "Use at most " + strconv.Itoa(maxBrandName) + " characters."
		}
	}
	name("product_name", b.ProductName)
	name("from_name", b.FromName)
	link := func(field, v string) {
		if v == "" {
			return
		}
		u, err := url.Parse(v)
		switch {
		case err != nil || len(v) > maxBrandURL || safeURL(v) != v || !plainHost.MatchString(u.Host):
			errs[field] = "Use a full http:// or https:// address; write an international domain in its xn-- form."
		case u.User != nil:
			// "https://docs.acme.example@evil.example/" reads as one
			// host and leads to another; a logo's password would go to
			// every recipient.
			errs[field] = "Leave out the user name and password before the @."
		}
	}
	link("product_url", b.ProductURL)
	link("logo_url", b.LogoURL)
	if b.Color != "" {
		l, ok := luminance(b.Color)
		switch {
		case !ok:
			errs["color"] = "Use a colour written #rrggbb, such as #1d4ed8."
		case contrastWithWhite(l) < 4.5:
			errs["color"] = "Too light: white button text on it would be hard to read. Choose a darker colour."
		}
	}
	return errs
}

// Accent is the colour of links and buttons: the brand's, or the default.
func (b Brand) Accent() string {
	if b.Color == "" {
		return DefaultColor
	}
	return strings.ToLower(b.Color)
}

// Sender is the From header for address (LULL_MAIL_FROM, which may carry
// a display name of its own): the brand's FromName wins, then the name
// written in the address, then the product's name.
func (b Brand) Sender(address string) string {
	a, err := mail.ParseAddress(address)
	if err != nil {
		return address // mail.Build refuses it with a clear error
	}
	name := oneLine(b.FromName)
	if name == "" && a.Name == "" {
		name = oneLine(b.ProductName)
	}
	if name == "" {
		return address
	}
	a.Name = name
	return a.String()
}

// luminance is the WCAG relative luminance of a "#rrggbb" colour.
func luminance(hex string) (float64, bool) {
	if len(hex) != 7 || hex[0] != '#' {
		return 0, false
	}
	v, err := strconv.ParseUint(hex[1:], 16, 32)
	if err != nil {
		return 0, false
	}
	channel := func(shift uint) float64 {
		c := float64((v>>shift)&0xff) / 255
		if c <= 0.03928 {
			return c / 12.92
		}
		return math.Pow((c+0.055)/1.055, 2.4)
	}
	return 0.2126*channel(16) + 0.7152*channel(8) + 0.0722*channel(0), true
}

// contrastWithWhite is the WCAG contrast ratio of white on a colour of
// luminance l; 4.5 is the minimum for normal text.
func contrastWithWhite(l float64) float64 { return 1.05 / (l + 0.05) }
