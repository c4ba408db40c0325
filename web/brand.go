package web

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"

	"github.com/lull-dev/lull/views"
)

// recipientPage fills what a recipient's page shares: the host product's
// brand instead of lull's name. A logo's origin is added to the page's
// image policy, as it is the one image from elsewhere a page may show.
func (s *Server) recipientPage(w http.ResponseWriter, r *http.Request, title string) views.Page {
	b := s.Brands.Get(r.Context())
	p := s.page(title)
	p.Suffix = b.ProductName
	p.Brand = views.Brand{Name: b.ProductName, URL: b.ProductURL, Logo: b.LogoURL}
	if b.Color != "" {
		p.Brand.CSSURL = "/brand.css?c=" + url.QueryEscape(strings.ToLower(strings.TrimPrefix(b.Color, "#")))
	}
	// Check keeps the host plain, so it cannot end the directive.
	if u, err := url.Parse(b.LogoURL); err == nil && b.LogoURL != "" && b.Check()["logo_url"] == "" {
		h := w.Header()
		h.Set("Content-Security-Policy", strings.Replace(h.Get("Content-Security-Policy"),
			"img-src 'self' data:", "img-src 'self' data: "+u.Scheme+"://"+u.Host, 1))
	}
	return p
}

var hexColor = regexp.MustCompile(`^[0-9a-f]{6}$`)

// brandCSS is the stylesheet that gives recipient pages the brand's
// colour. The colour is in its URL, so it needs no lookup and may be
// cached for good; the page's policy allows no inline styles. Dark mode
// keeps its own light accent, which a dark brand colour would not be
// readable as.
func (s *Server) brandCSS(w http.ResponseWriter, r *http.Request) {
	c := r.URL.Query().Get("c")
	if !hexColor.MatchString(c) {
		http.NotFound(w, r)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/css; charset=utf-8")
	h.Set("Cache-Control", "public, max-age=31536000, immutable")
	w.Write([]byte("@media (prefers-color-scheme: light) {\n  :root { --accent: #" + c + "; --accent-text: #ffffff; }\n}\n"))
}
