package web

import (
	"html/template"
	"net/http"

	"github.com/lull-dev/lull/mailtemplates"
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
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	unsubscribedPage.Execute(w, nil)
}

// unsubscribeConfirm answers a click on the link in a browser with a
// button, so that link scanners that follow every URL do not unsubscribe
// anyone by merely fetching it.
func (s *Server) unsubscribeConfirm(w http.ResponseWriter, r *http.Request) {
	token := r.URL.Query().Get("token")
	if _, err := s.Links.Verify(token, mailtemplates.PurposeUnsubscribe, s.now()); err != nil {
		w.WriteHeader(http.StatusForbidden)
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	confirmPage.Execute(w, token)
}

var confirmPage = template.Must(template.New("").Parse(`<!doctype html><html lang="en"><meta charset="utf-8">
<meta name="viewport" content="width=device-width,initial-scale=1"><title>Unsubscribe</title>
<main style="font:16px/1.5 system-ui,sans-serif;max-width:32rem;margin:3rem auto;padding:0 1rem">
<h1>Unsubscribe from all emails?</h1>
<p>You will still get emails that cannot be turned off, such as security alerts.</p>
<form method="post" action="/unsubscribe?token={{.}}"><button type="submit">Unsubscribe</button></form>
</main></html>`))

var unsubscribedPage = template.Must(template.New("").Parse(`<!doctype html><html lang="en"><meta charset="utf-8">
<meta name="viewport" content="width=device-width,initial-scale=1"><title>Unsubscribed</title>
<main style="font:16px/1.5 system-ui,sans-serif;max-width:32rem;margin:3rem auto;padding:0 1rem">
<h1>You are unsubscribed</h1><p>You will only get emails that cannot be turned off.</p></main></html>`))
