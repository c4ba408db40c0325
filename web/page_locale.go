package web

import (
	"net/http"

	"github.com/lull-dev/lull/i18n"
	"github.com/lull-dev/lull/views"
)

// pageLocale is the language of a recipient's page: their stored locale,
// else what the browser asks for, else LULL_DEFAULT_LOCALE. recipient is
// "" when the page knows no recipient (a link that failed).
func (s *Server) pageLocale(r *http.Request, recipient string) i18n.Locale {
	return i18n.Resolve(recipient, r.Header.Get("Accept-Language"), s.DefaultLocale)
}

// localPage is recipientPage in l's language, its title the catalog's
// titleKey. The page may follow the browser's language, which a cache
// must therefore tell apart.
func (s *Server) localPage(w http.ResponseWriter, r *http.Request, l i18n.Locale, titleKey string) views.Page {
	w.Header().Add("Vary", "Accept-Language")
	p := s.recipientPage(w, r, l.T(titleKey, nil))
	p.Locale = l
	return p
}

// localMessage is message on a recipient's page, in l's language: the
// heading is the catalog's headingKey, text is already in l's language.
func (s *Server) localMessage(w http.ResponseWriter, r *http.Request, status int, l i18n.Locale, headingKey, text string) {
	p := s.localPage(w, r, l, headingKey)
	s.render(w, r, status, views.Message(views.MessageView{Page: p, Heading: p.Title, Text: text}))
}
