package web

import (
	"net/http"
)

// Handler returns every route of lull in one place.
func (s *Server) Handler() http.Handler {
	s.init()
	mux := http.NewServeMux()
	mux.Handle("GET /static/", s.assets)
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.HandleFunc("GET /readyz", s.readyz)

	api := func(pattern string, h http.HandlerFunc) { mux.Handle(pattern, s.apiAuth(h)) }
	api("POST /api/v1/events", s.createEvent)
	api("DELETE /api/v1/events/{id}", s.retractEvent)
	api("PUT /api/v1/recipients/{id}", s.putRecipient)
	api("GET /api/v1/recipients/{id}/preferences", s.getPreferences)
	api("PUT /api/v1/recipients/{id}/preferences", s.putPreferences)
	api("POST /api/v1/recipients/{id}/preferences-link", s.preferencesLink)
	api("GET /api/v1/types", s.listTypes)
	api("GET /api/v1/types/{key}", s.getType)
	api("PUT /api/v1/types/{key}", s.putType)
	api("GET /api/v1/batches", s.listBatches)
	api("GET /api/v1/batches/{id}", s.getBatch)
	api("POST /api/v1/batches/{id}/flush", s.flushBatch)
	api("POST /api/v1/batches/{id}/cancel", s.cancelBatch)
	mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) { s.problem(w, r, errNotFound) })

	mux.HandleFunc("GET /unsubscribe", s.unsubscribeConfirm)
	mux.HandleFunc("POST /unsubscribe", s.unsubscribeOneClick)
	mux.HandleFunc("GET /settings/enter", s.settingsEnter)
	mux.HandleFunc("GET /settings", s.settingsPage)
	mux.HandleFunc("POST /settings", s.settingsSave)

	// Cross-site form posts are refused on every form; the one-click
	// unsubscribe is exempt because mail providers POST it from their own
	// servers, and its token is its authorisation.
	cop := http.NewCrossOriginProtection()
	cop.AddInsecureBypassPattern("POST /unsubscribe")
	cop.AddInsecureBypassPattern("/api/")
	return s.recoverPanics(securityHeaders(cop.Handler(mux)))
}
