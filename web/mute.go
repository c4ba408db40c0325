package web

import (
	"context"
	"errors"
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
	"github.com/lull-dev/lull/preferences"
	"github.com/lull-dev/lull/views"
)

// purposeMuteUndo signs the undo button of the page after a mute.
const purposeMuteUndo = "mute-undo"

// muteChoices are the durations a mute may have, as the form posts them;
// 0 mutes for good. Nothing else is accepted, so a hand-made request
// cannot mute for a negative or a thousand-year time.
var muteChoices = []struct {
	value string
	d     time.Duration
	label string
}{
	{"1d", 24 * time.Hour, "mute_for_day"},
	{"7d", 7 * 24 * time.Hour, "mute_for_week"},
	{"forever", 0, "mute_forever"},
}

// muteLink is a verified mute link: who, which conversation, and the
// language to speak.
type muteLink struct {
	token, thread string
	rec           *db.Recipient
	lang          i18n.Locale
}

// verifyMute checks the link's signature and expiry and finds its
// recipient; on failure it answers with a page and returns nil. A link
// is checked before anything else is read, so a forged one learns
// nothing and changes nothing.
func (s *Server) verifyMute(w http.ResponseWriter, r *http.Request) *muteLink {
	token := r.URL.Query().Get("token")
	id, thread, err := s.Links.VerifyData(token, mailtemplates.PurposeMute, s.now())
	var rec *db.Recipient
	if err == nil {
		rec, err = db.GetRecipient(r.Context(), s.DB.Bun, id)
	}
	if err != nil {
		lang := i18n.Resolve("", r.Header.Get("Accept-Language"), s.DefaultLocale)
		if errors.Is(err, mailtemplates.ErrExpiredLink) {
			s.localMessage(w, r, http.StatusForbidden, lang, "mute_expired_heading", lang.T("mute_expired", nil))
		} else {
			s.localMessage(w, r, http.StatusForbidden, lang, "mute_bad_link_heading", lang.T("mute_bad_link", nil))
		}
		return nil
	}
	return &muteLink{token: token, thread: thread, rec: rec,
		lang: i18n.Resolve(rec.Locale, r.Header.Get("Accept-Language"), s.DefaultLocale)}
}

// muteView starts a mute page in the link's language.
func (s *Server) muteView(w http.ResponseWriter, r *http.Request, l *muteLink, heading string) views.MuteView {
	return views.MuteView{Page: s.localPage(w, r, l.lang, "mute_page_title"), Heading: heading}
}

// muteConfirm answers a click on an email's "mute this conversation"
// link with the durations to choose from and a button: fetching the link
// mutes nothing.
func (s *Server) muteConfirm(w http.ResponseWriter, r *http.Request) {
	l := s.verifyMute(w, r)
	if l == nil {
		return
	}
	typ, ok := db.ThreadType(l.thread)
	t, err := db.GetType(r.Context(), s.DB.Pool, typ)
	switch {
	case err != nil && !isNotFound(err):
		s.recipientError(w, r, err)
		return
	case !ok || err != nil || t.Required:
		s.cannotMute(w, r, l.lang)
		return
	}
	name, err := s.threadName(r, l.lang, l.thread)
	if err != nil {
		s.recipientError(w, r, err)
		return
	}
	v := s.muteView(w, r, l, l.lang.T("mute_heading", nil))
	v.Text = l.lang.T("mute_intro", map[string]any{"Email": l.rec.Email, "Thread": name})
	v.Action = "/mute?" + url.Values{"token": {l.token}}.Encode()
	v.HowLong, v.Button = l.lang.T("mute_how_long", nil), l.lang.T("mute_button", nil)
	for i, c := range muteChoices {
		v.Choices = append(v.Choices, views.Option{Value: c.value, Label: l.lang.T(c.label, nil), Selected: i == 0})
	}
	w.Header().Set("Cache-Control", "no-store")
	s.render(w, r, http.StatusOK, views.Mute(v))
}

// cannotMute answers a link to a conversation that cannot be muted: a
// required type's, or one whose type is gone.
func (s *Server) cannotMute(w http.ResponseWriter, r *http.Request, lang i18n.Locale) {
	s.localMessage(w, r, http.StatusConflict, lang, "mute_required_heading", lang.T("mute_required", nil))
}

// muteThread mutes the link's conversation for the chosen time and says
// until when, in the recipient's zone, with an undo button.
func (s *Server) muteThread(w http.ResponseWriter, r *http.Request) {
	l := s.verifyMute(w, r)
	if l == nil {
		return
	}
	d := time.Duration(-1)
	for _, c := range muteChoices {
		if r.PostFormValue("for") == c.value {
			d = c.d
		}
	}
	if d < 0 {
		s.localMessage(w, r, http.StatusUnprocessableEntity, l.lang, "mute_bad_choice_heading", l.lang.T("mute_bad_choice", nil))
		return
	}
	var m db.MutedThread
	err := s.DB.InTx(r.Context(), func(tx pgx.Tx) (err error) {
		_, m, err = db.MuteThreadFor(r.Context(), tx, l.rec.ID, l.thread, d)
		return err
	})
	switch {
	case errors.Is(err, db.ErrRequiredThread), errors.Is(err, db.ErrNotThread):
		s.cannotMute(w, r, l.lang)
		return
	case err != nil:
		s.recipientError(w, r, err)
		return
	}
	name, err := s.threadName(r, l.lang, l.thread)
	if err != nil {
		s.recipientError(w, r, err)
		return
	}
	v := s.muteView(w, r, l, l.lang.T("mute_done_heading", nil))
	data := map[string]any{"Email": l.rec.Email, "Thread": name}
	v.Text = l.lang.T("mute_done_forever", data)
	if m.Until != nil {
		data["Until"] = l.lang.DateTime(m.Until.In(preferences.Location(l.rec.Timezone)))
		v.Text = l.lang.T("mute_done_until", data)
	}
	// The undo carries when this mute was made, so that replayed after a
	// later mute it leaves that one, and, as after an unsubscribe, the
	// settings link's deadline: the page links to the settings only while
	// the email's own settings link would still work.
	undo := muteUndoPrefix + db.Undo{Thread: l.thread, MutedAt: m.CreatedAt}.Encode()
	if settings := s.Links.SettingsDeadline(l.token); s.now().Before(settings) {
		v.SettingsURL, v.SettingsLabel = s.settingsLink(l.rec.ID), l.lang.T("mute_settings", nil)
		undo += "&settings=" + strconv.FormatInt(settings.Unix(), 10)
	}
	token := s.Links.SignedToken(purposeMuteUndo, l.rec.ID, undo, s.now().Add(7*24*time.Hour))
	v.UndoAction, v.UndoLabel = "/mute/undo?"+url.Values{"token": {token}}.Encode(), l.lang.T("mute_undo", nil)
	w.Header().Set("Cache-Control", "no-store")
	s.render(w, r, http.StatusOK, views.Mute(v))
}

// muteUndoPrefix starts the data of a mute's undo button, the encoded
// db.Undo and "settings=": a batch key may hold any character, a newline
// too, so the first form ("thread\ndeadline", without the mute's time)
// could be misread. Buttons of that form are still read until they
// expire, as undoing whatever mute the thread has.
const muteUndoPrefix = "2\n"

// readMuteUndo reads a mute's undo button: what to undo, and the
// settings link's deadline.
func readMuteUndo(data string) (db.Undo, string, error) {
	rest, ok := strings.CutPrefix(data, muteUndoPrefix)
	if !ok {
		thread, deadline, _ := strings.Cut(data, "\n")
		return db.Undo{Thread: thread}, deadline, nil
	}
	u, err := db.DecodeUndo(rest)
	if err == nil && (u.Thread == "" || u.MutedAt.IsZero()) {
		err = errors.New("an undo without its thread or its mute's time")
	}
	q, _ := url.ParseQuery(rest)
	return u, q.Get("settings"), err
}

// muteUndo turns the conversation of a mute just made back on.
func (s *Server) muteUndo(w http.ResponseWriter, r *http.Request) {
	id, data, err := s.Links.VerifyData(r.URL.Query().Get("token"), purposeMuteUndo, s.now())
	var u db.Undo
	var deadline string
	if err == nil {
		u, deadline, err = readMuteUndo(data)
	}
	var rec *db.Recipient
	if err == nil {
		rec, err = db.GetRecipient(r.Context(), s.DB.Bun, id)
	}
	if err != nil {
		lang := i18n.Resolve("", r.Header.Get("Accept-Language"), s.DefaultLocale)
		s.localMessage(w, r, http.StatusForbidden, lang, "mute_bad_link_heading", lang.T("mute_bad_link", nil))
		return
	}
	undo := s.DB.InTx(r.Context(), func(tx pgx.Tx) error { return db.UndoUnsubscribe(r.Context(), tx, id, u) })
	if undo != nil && !errors.Is(undo, db.ErrMutedSince) {
		s.recipientError(w, r, undo)
		return
	}
	s.unmuted(w, r, rec, u.Thread, undo != nil, deadline)
}

// unmuted answers the undo of a conversation's mute (also of an
// unsubscribe from a thread): turned back on, or still muted (kept) when
// the recipient muted it again since, with a link to the settings until
// deadline (Unix seconds, as the undo button carries it).
func (s *Server) unmuted(w http.ResponseWriter, r *http.Request, rec *db.Recipient, thread string, kept bool, deadline string) {
	l := &muteLink{thread: thread, rec: rec, lang: s.pageLocale(r, rec.Locale)}
	name, err := s.threadName(r, l.lang, thread)
	if err != nil {
		s.recipientError(w, r, err)
		return
	}
	heading, text := "mute_undone_heading", "mute_undone"
	if kept {
		heading, text = "mute_kept_heading", "mute_kept"
	}
	v := s.muteView(w, r, l, l.lang.T(heading, nil))
	v.Text = l.lang.T(text, map[string]any{"Email": rec.Email, "Thread": name})
	if s.beforeDeadline(deadline) {
		v.SettingsURL, v.SettingsLabel = s.settingsLink(rec.ID), l.lang.T("mute_settings", nil)
	}
	w.Header().Set("Cache-Control", "no-store")
	s.render(w, r, http.StatusOK, views.Mute(v))
}

// beforeDeadline says whether the settings link's deadline an undo button
// carries (Unix seconds; "" once it has passed) is still ahead.
func (s *Server) beforeDeadline(deadline string) bool {
	until, err := strconv.ParseInt(deadline, 10, 64)
	return err == nil && s.now().Before(time.Unix(until, 0))
}

// threadName names a conversation as the settings page lists it: the
// type's name and the event's batch key ("Comments · document:7").
func (s *Server) threadName(r *http.Request, lang i18n.Locale, thread string) (string, error) {
	names, err := s.typeNames(r.Context(), lang)
	if err != nil {
		return "", err
	}
	return threadLabel(names, thread), nil
}

// threadLabel is "Comments · document:7" for "comment+document:7".
func threadLabel(names func(string) string, thread string) string {
	typ, key, ok := strings.Cut(thread, "+")
	if !ok {
		return thread
	}
	return names(typ) + " · " + key
}

// muteEnds adds to each listed conversation muted for a while when its
// mute ends, in the recipient's zone and language.
func (s *Server) muteEnds(ctx context.Context, id string, threads []db.MutedThread, opts []views.Option) error {
	if !slices.ContainsFunc(threads, func(th db.MutedThread) bool { return th.Until != nil }) {
		return nil
	}
	rec, err := db.GetRecipient(ctx, s.DB.Bun, id)
	if err != nil {
		return err
	}
	lang, loc := i18n.Resolve(rec.Locale, "", s.DefaultLocale), preferences.Location(rec.Timezone)
	for i, th := range threads {
		if th.Until != nil {
			opts[i].Label = lang.T("mute_list_until", map[string]any{"Thread": opts[i].Label, "Until": lang.DateTime(th.Until.In(loc))})
		}
	}
	return nil
}
