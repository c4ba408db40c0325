package web

import (
	"context"
	"errors"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/i18n"
	"github.com/lull-dev/lull/mailtemplates"
	"github.com/lull-dev/lull/views"
)

// purposeUndo signs the undo button of an unsubscribe's page.
const purposeUndo = "unsubscribe-undo"

// unsubscribeNext is what to do about an unsubscribe link that fails (a
// catalog key).
const unsubscribeNext = "unsub_link_next"

// unsubscribeOneClick is the RFC 8058 endpoint of List-Unsubscribe, and
// the target of the confirmation page's button. A mail client POSTs
// "List-Unsubscribe=One-Click" with no cookie and no login; the signed
// token alone says who. The link stops the types its email showed, as
// the recipient most likely means: tired of comments, not of security
// alerts. A link without types (every link sent before links named them)
// and the page's "everything" button (scope=all) unsubscribe from all.
// Required types keep coming either way.
func (s *Server) unsubscribeOneClick(w http.ResponseWriter, r *http.Request) {
	oneClick := r.FormValue("List-Unsubscribe") == "One-Click"
	token := r.URL.Query().Get("token")
	id, data, err := s.Links.VerifyData(token, mailtemplates.PurposeUnsubscribe, s.now())
	switch {
	case err != nil && oneClick:
		s.problem(w, r, newProblem(http.StatusForbidden, "bad-link", "Invalid link", err.Error()))
		return
	case err != nil:
		s.badLink(w, r, err, unsubscribeNext)
		return
	}
	types, thread := mailtemplates.UnsubscribeTypes(data), mailtemplates.UnsubscribeThread(data)
	if r.PostFormValue("scope") == "all" {
		types, thread = nil, ""
	}
	var u *db.Unsubscribed
	err = s.DB.InTx(r.Context(), func(tx pgx.Tx) (err error) {
		if thread != "" {
			u, err = db.MuteThread(r.Context(), tx, id, thread)
		} else {
			u, err = db.Unsubscribe(r.Context(), tx, id, types)
		}
		return err
	})
	switch {
	case oneClick && errors.Is(err, db.ErrNotFound):
		w.WriteHeader(http.StatusOK) // nobody left to unsubscribe
		return
	case errors.Is(err, db.ErrNotFound):
		s.badLink(w, r, mailtemplates.ErrBadLink, unsubscribeNext)
		return
	case oneClick && (errors.Is(err, db.ErrRequiredThread) || errors.Is(err, db.ErrNotThread)):
		w.WriteHeader(http.StatusOK) // a type made required since: nothing to stop
		return
	case errors.Is(err, db.ErrRequiredThread), errors.Is(err, db.ErrNotThread):
		s.cannotMute(w, r, s.pageLocale(r, "")) // no recipient to take a locale from
		return
	case err != nil:
		s.recipientError(w, r, err)
		return
	case oneClick:
		w.WriteHeader(http.StatusOK)
		return
	}
	v, err := s.unsubscribedView(r.Context(), w, r, u, s.Links.SettingsDeadline(token))
	if err != nil {
		s.recipientError(w, r, err)
		return
	}
	if !u.All {
		v.EverythingAction = "/unsubscribe?" + url.Values{"token": {token}}.Encode()
	}
	w.Header().Set("Cache-Control", "no-store")
	s.render(w, r, http.StatusOK, views.Unsubscribed(v))
}

// unsubscribedView describes what an unsubscribe did, with a signed undo
// button that puts back exactly that. Until settings (the email's
// settings link's expiry, see Links.SettingsDeadline), the page links to
// the recipient's settings, and so does the page after an undo.
func (s *Server) unsubscribedView(ctx context.Context, w http.ResponseWriter, r *http.Request, u *db.Unsubscribed, settings time.Time) (views.UnsubscribedView, error) {
	l := s.pageLocale(r, u.Recipient.Locale)
	v := views.UnsubscribedView{Page: s.localPage(w, r, l, "unsub_done_title"), Email: u.Recipient.Email, All: u.All}
	data := u.Encode()
	if s.now().Before(settings) {
		v.SettingsURL = s.settingsLink(u.Recipient.ID)
		data += "&settings=" + strconv.FormatInt(settings.Unix(), 10)
	}
	names, err := s.typeNames(ctx, l)
	if err != nil {
		return v, err
	}
	for _, k := range slices.Sorted(maps.Keys(u.Modes)) {
		v.Types = append(v.Types, names(k))
	}
	if u.Thread != "" {
		v.Thread, v.Types = true, []string{names(threadType(u.Thread))}
	}
	for _, k := range u.Required {
		v.Required = append(v.Required, names(k))
	}
	undo := s.Links.SignedToken(purposeUndo, u.Recipient.ID, data, s.now().Add(7*24*time.Hour))
	v.UndoAction = "/unsubscribe/undo?" + url.Values{"token": {undo}}.Encode()
	return v, nil
}

// unsubscribeUndo puts back what an unsubscribe changed.
func (s *Server) unsubscribeUndo(w http.ResponseWriter, r *http.Request) {
	id, data, err := s.Links.VerifyData(r.URL.Query().Get("token"), purposeUndo, s.now())
	if err != nil {
		s.badLink(w, r, err, "unsub_undo_next")
		return
	}
	u, err := db.DecodeUndo(data)
	if err == nil {
		err = s.DB.InTx(r.Context(), func(tx pgx.Tx) error { return db.UndoUnsubscribe(r.Context(), tx, id, u) })
	}
	kept := errors.Is(err, db.ErrMutedSince)
	var rec *db.Recipient
	if err == nil || kept {
		rec, err = db.GetRecipient(r.Context(), s.DB.Bun, id)
	}
	if err != nil {
		s.recipientError(w, r, err)
		return
	}
	q, _ := url.ParseQuery(data)
	if kept {
		s.unmuted(w, r, rec, u.Thread, true, q.Get("settings"))
		return
	}
	title := "unsub_subscribed_again"
	if rec.Unsubscribed {
		title = "unsub_undone"
	}
	v := views.UnsubscribedView{Page: s.localPage(w, r, s.pageLocale(r, rec.Locale), title), Email: rec.Email, Undone: true,
		StillAll: rec.Unsubscribed}
	if s.beforeDeadline(q.Get("settings")) {
		v.SettingsURL = s.settingsLink(id)
	}
	w.Header().Set("Cache-Control", "no-store")
	s.render(w, r, http.StatusOK, views.Unsubscribed(v))
}

// unsubscribeConfirm answers a click on the link in a browser with a
// button, so that link scanners that follow every URL do not unsubscribe
// anyone by merely fetching it. The page says what the link stops and
// for which address.
func (s *Server) unsubscribeConfirm(w http.ResponseWriter, r *http.Request) {
	token := r.URL.Query().Get("token")
	id, data, err := s.Links.VerifyData(token, mailtemplates.PurposeUnsubscribe, s.now())
	var rec *db.Recipient
	if err == nil {
		rec, err = db.GetRecipient(r.Context(), s.DB.Bun, id)
	}
	if err != nil {
		if errors.Is(err, db.ErrNotFound) {
			err = mailtemplates.ErrBadLink
		}
		s.badLink(w, r, err, unsubscribeNext)
		return
	}
	l := s.pageLocale(r, rec.Locale)
	names, err := s.typeNames(r.Context(), l)
	if err != nil {
		s.recipientError(w, r, err)
		return
	}
	v := views.UnsubscribeView{Page: s.localPage(w, r, l, "unsub_title"), Email: rec.Email,
		Action: "/unsubscribe?" + url.Values{"token": {token}}.Encode()}
	for _, k := range mailtemplates.UnsubscribeTypes(data) {
		v.Types = append(v.Types, names(k))
	}
	if thread := mailtemplates.UnsubscribeThread(data); thread != "" {
		v.Thread, v.Types = true, []string{names(threadType(thread))}
	}
	s.render(w, r, http.StatusOK, views.Unsubscribe(v))
}

// threadType is the type of a thread's batch key ("comment+doc:7").
func threadType(batchKey string) string {
	key, _, _ := strings.Cut(batchKey, "+")
	return key
}

// typeNames returns a function naming a type as the settings page does,
// in l's language.
func (s *Server) typeNames(ctx context.Context, l i18n.Locale) (func(key string) string, error) {
	types, err := db.ListTypes(ctx, s.DB.Bun)
	if err != nil {
		return nil, err
	}
	byKey := make(map[string]string, len(types))
	for _, t := range types {
		byKey[t.Key] = t.TextsIn(l.TextChain()).Name
	}
	return func(key string) string {
		if n := byKey[key]; n != "" {
			return n
		}
		return key
	}, nil
}

// settingsLink is a fresh link to the recipient's settings page, on this
// server whatever LULL_BASE_URL says.
func (s *Server) settingsLink(recipientID string) string {
	u, _ := s.Links.SettingsURL(recipientID, s.now())
	return strings.TrimPrefix(u, strings.TrimRight(s.Links.BaseURL, "/"))
}
