package web

import (
	"context"
	"net/http"
)

// Handler returns every route of lull, with what every request passes
// through: counting, panic recovery, security headers and the refusal of
// cross-site form posts.
func (s *Server) Handler() http.Handler {
	mux := s.routes()
	// Cross-site form posts are refused on every form; the one-click
	// unsubscribe is exempt because mail providers POST it from their own
	// servers, and its token is its authorisation.
	cop := http.NewCrossOriginProtection()
	cop.AddInsecureBypassPattern("POST /unsubscribe")
	cop.AddInsecureBypassPattern("/api/")
	return s.countRequests(s.recoverPanics(securityHeaders(cop.Handler(mux))))
}

// patternMux is an http.ServeMux that remembers the patterns it was
// given, so that tests can hold the API document to what is served.
type patternMux struct {
	*http.ServeMux
	patterns []string
}

func (m *patternMux) Handle(pattern string, h http.Handler) {
	m.patterns = append(m.patterns, pattern)
	m.ServeMux.Handle(pattern, h)
}

func (m *patternMux) HandleFunc(pattern string, h http.HandlerFunc) { m.Handle(pattern, h) }

// routes registers every route in one place.
func (s *Server) routes() *patternMux {
	s.init()
	mux := &patternMux{ServeMux: http.NewServeMux()}
	mux.Handle("GET /static/", s.assets)
	mux.Handle("GET /favicon.ico", s.assets)
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.HandleFunc("GET /readyz", s.readyz)

	// Every handler that reads the request's values sits behind checkText
	// (after authentication, which it must not change the answer of).
	api := func(pattern string, h http.HandlerFunc) { mux.Handle(pattern, s.apiAuth(s.checkText(h))) }
	api("POST /api/v1/events", s.bigBodies.gate(s.createEvent))
	api("DELETE /api/v1/events/{id}", s.retractEvent)
	api("DELETE /api/v1/events", s.retractEventByKey)
	api("PUT /api/v1/recipients/{id}", s.putRecipient)
	api("GET /api/v1/recipients/{id}/preferences", s.getPreferences)
	api("PUT /api/v1/recipients/{id}/preferences", s.putPreferences)
	api("POST /api/v1/recipients/{id}/preferences-link", s.preferencesLink)
	api("GET /api/v1/recipients/{id}/feed", s.getFeed)
	api("GET /api/v1/recipients/{id}/feed/count", s.feedCount)
	api("GET /api/v1/recipients/{id}/feed/stream", s.feedStream)
	api("POST /api/v1/recipients/{id}/feed/read", s.markRead)
	api("POST /api/v1/recipients/{id}/feed/seen", s.markSeen)
	api("POST /api/v1/recipients/{id}/seen", s.recipientSeen)
	api("GET /api/v1/types", s.listTypes)
	api("GET /api/v1/types/{key}", s.getType)
	api("PUT /api/v1/types/{key}", s.putType)
	api("GET /api/v1/batches", s.listBatches)
	api("GET /api/v1/batches/{id}", s.getBatch)
	api("POST /api/v1/batches/{id}/flush", s.flushBatch)
	api("POST /api/v1/batches/{id}/cancel", s.cancelBatch)
	api("GET /api/v1/suppressions", s.listSuppressions)
	api("POST /api/v1/suppressions", s.createSuppression)
	api("DELETE /api/v1/suppressions/{address}", s.deleteSuppression)
	api("POST /api/v1/simulations", s.bigBodies.gate(s.createSimulation))
	// The contract needs no key: it holds nothing secret, and a client
	// generator or a person must be able to read it before having one.
	mux.HandleFunc("GET /api/v1/openapi.json", s.openAPIDocument)
	mux.HandleFunc("GET /api/docs", s.apiDocs)
	mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) { s.problem(w, r, errNotFound) })

	// Email services report bounces and complaints here; each request is
	// verified by its service's signature, not by an API key.
	mux.HandleFunc("POST /webhooks/{service}", func(w http.ResponseWriter, r *http.Request) {
		if s.Webhooks == nil {
			s.problem(w, r, errNotFound)
			return
		}
		s.Webhooks.ServeHTTP(w, r)
	})

	page := func(pattern string, h http.HandlerFunc) { mux.Handle(pattern, s.checkText(h)) }
	page("GET /unsubscribe", s.unsubscribeConfirm)
	page("POST /unsubscribe", s.unsubscribeOneClick)
	page("POST /unsubscribe/undo", s.unsubscribeUndo)
	page("GET /mute", s.muteConfirm)
	page("POST /mute", s.muteThread)
	page("POST /mute/undo", s.muteUndo)
	page("GET /unsubscribe/shared", s.sharedUnsubscribePage)
	page("POST /unsubscribe/shared", s.sharedUnsubscribeSend)
	mux.HandleFunc("GET /brand.css", s.brandCSS)
	page("GET /settings/enter", s.settingsEnter)
	page("GET /settings", s.settingsPage)
	page("POST /settings", s.settingsSave)
	page("POST /settings/threads", s.settingsUnmute)

	page("GET /admin/login", s.loginPage)
	page("POST /admin/login", s.login)
	page("POST /admin/logout", s.logout)
	admin := func(pattern string, h http.HandlerFunc) { mux.HandleFunc(pattern, s.requireOperator(s.checkText(h))) }
	admin("GET /admin", s.dashboard)
	admin("GET /admin/batches", s.adminBatches)
	admin("GET /admin/batches/{id}", s.adminBatch)
	admin("POST /admin/batches/{id}/flush", s.adminBatchAction("flush", s.Engine.FlushNow))
	admin("GET /admin/batches/{id}/cancel", s.cancelConfirm)
	admin("POST /admin/batches/{id}/cancel", s.adminBatchAction("cancel", func(ctx context.Context, id int64) error {
		return s.Engine.Cancel(ctx, id, "")
	}))
	admin("POST /admin/batches/{id}/retry", s.adminBatchAction("retry delivery", s.Engine.Retry))
	batchTitle := func(r *http.Request) string { return "Batch " + r.PathValue("id") }
	batchURL := func(r *http.Request) string { return "/admin/batches/" + r.PathValue("id") }
	admin("GET /admin/batches/{id}/preview", s.previewPage(s.batchEmail, batchTitle, batchURL, batchTitle, "batches"))
	admin("GET /admin/batches/{id}/preview/html", s.previewHTML(s.batchEmail))
	typeTitle := func(r *http.Request) string { return "Type " + r.PathValue("key") + " with sample data" }
	admin("GET /admin/types", s.adminTypes)
	admin("GET /admin/types/{key}/preview", s.previewPage(s.typeEmail, typeTitle,
		func(*http.Request) string { return "/admin/types" }, func(*http.Request) string { return "Types" }, "types"))
	admin("GET /admin/types/{key}/preview/html", s.previewHTML(s.typeEmail))
	admin("GET /admin/types/{key}/edit", s.typeEditPage)
	admin("POST /admin/types/{key}/edit", s.typeEditSave)
	admin("GET /admin/recipients", s.adminRecipient)
	admin("GET /admin/suppressions", s.adminSuppressions)
	admin("POST /admin/suppressions", s.adminSuppressionAdd)
	admin("POST /admin/suppressions/remove", s.adminSuppressionRemove)
	admin("GET /admin/outbox", s.outboxList)
	admin("GET /admin/outbox/{id}", s.outboxPage)
	admin("GET /admin/outbox/{id}/html", s.outboxHTML)
	admin("GET /admin/jobs", s.adminJobs)
	admin("POST /admin/jobs/{id}/retry", s.adminJobAction("retry job"))
	admin("POST /admin/jobs/{id}/cancel", s.adminJobAction("cancel job"))
	admin("GET /admin/brand", s.adminBrand)
	admin("POST /admin/brand", s.adminBrandSave)
	admin("GET /admin/simulate", s.simulatePage)
	admin("POST /admin/simulate", s.simulateRun)
	return mux
}
