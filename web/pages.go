package web

import (
	"net/http"

	"github.com/a-h/templ"

	"github.com/lull-dev/lull/views"
)

// page fills what every page shares. The console is lull's own, so its
// titles say so; recipient pages use recipientPage instead.
func (s *Server) page(title string) views.Page {
	return views.Page{Title: title, Suffix: "lull", CSSURL: s.assets.URL("app.css"), JSURL: s.assets.URL("app.js")}
}

// render writes a templ component with status.
func (s *Server) render(w http.ResponseWriter, r *http.Request, status int, c templ.Component) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	if err := c.Render(r.Context(), w); err != nil {
		s.Logger.Error("render page", "path", r.URL.Path, "err", err)
	}
}

// message renders a friendly page with a heading and a sentence. Most
// are a recipient's (a link that expired), so it wears the brand.
func (s *Server) message(w http.ResponseWriter, r *http.Request, status int, heading, text string) {
	s.render(w, r, status, views.Message(views.MessageView{Page: s.recipientPage(w, r, heading), Heading: heading, Text: text}))
}

// securityHeaders sets the headers every page carries: a content security
// policy without inline scripts, no framing by other sites, and no MIME
// sniffing.
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "+
			"frame-src 'self'; frame-ancestors 'self'; form-action 'self'; base-uri 'none'; object-src 'none'")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "SAMEORIGIN")
		next.ServeHTTP(w, r)
	})
}
