package web

import (
	"net/http"
	"net/url"

	"github.com/lull-dev/lull/mailtemplates"
	"github.com/lull-dev/lull/views"
)

// unsubscribeOneClick is the RFC 8058 endpoint of List-Unsubscribe: a
// mail client POSTs "List-Unsubscribe=One-Click" with no cookie and no
// login; the signed token alone says who. Required types keep coming.
func (s *Server) unsubscribeOneClick(w http.ResponseWriter, r *http.Request) {
	id, err := s.Links.Verify(r.URL.Query().Get("token"), mailtemplates.PurposeUnsubscribe, s.now())
	if err != nil {
		s.problem(w, r, newProblem(http.StatusForbidden, "bad-link", "Invalid link", err.Error()))
		return
	}
	if _, err := s.DB.Pool.Exec(r.Context(), `UPDATE recipients SET unsubscribed = true, updated_at = now() WHERE id = $1`, id); err != nil {
		s.problem(w, r, err)
		return
	}
	if r.FormValue("List-Unsubscribe") == "One-Click" {
		w.WriteHeader(http.StatusOK)
		return
	}
	s.message(w, r, http.StatusOK, "You are unsubscribed", "You will only get emails that cannot be turned off.")
}

// unsubscribeConfirm answers a click on the link in a browser with a
// button, so that link scanners that follow every URL do not unsubscribe
// anyone by merely fetching it.
func (s *Server) unsubscribeConfirm(w http.ResponseWriter, r *http.Request) {
	token := r.URL.Query().Get("token")
	if _, err := s.Links.Verify(token, mailtemplates.PurposeUnsubscribe, s.now()); err != nil {
		s.badLink(w, r, err, "Unsubscribe links work for a while after their email was sent: use the link in a newer email, or its settings link.")
		return
	}
	action := "/unsubscribe?" + url.Values{"token": {token}}.Encode()
	s.render(w, r, http.StatusOK, views.Unsubscribe(views.UnsubscribeView{Page: s.page("Unsubscribe"), Action: action}))
}
