package web

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/language"
	"golang.org/x/text/language/display"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/i18n"
	"github.com/lull-dev/lull/mail"
	"github.com/lull-dev/lull/mailtemplates"
	"github.com/lull-dev/lull/preferences/batching"
	"github.com/lull-dev/lull/views"
)

// previewEmail is an email as a preview page shows it.
type previewEmail struct {
	Text, HTML string
	Headers    map[string]string
	// Note says where the email comes from when that is not plain: a
	// stored copy, or a fresh render of a batch already sent.
	Note string
	// Unsent says why no email goes out; the rest is then empty.
	Unsent string
	// Own is what the locale picker's default choice means here: the
	// recipient's own language, or LULL_DEFAULT_LOCALE for sample data.
	Own string
	// Language says which language the email is in, and where its
	// strings and type texts come from.
	Language string
}

func shown(m *mailtemplates.Message) previewEmail {
	return previewEmail{Text: m.Text, HTML: m.HTML, Headers: mail.Headers(m)}
}

func (s *Server) envelope() batching.Envelope {
	return batching.Envelope{From: s.MailFrom, Links: s.Links, Brand: s.Brands.Get(context.Background()), DefaultLocale: s.DefaultLocale}
}

// batchEmail is a stored batch's email: the copy the outbox kept when the
// batch went out there, else what its flush would send now, composed by
// the flush's own step, or why the flush would send nothing. It takes no
// lock and changes nothing, so it never holds up a flush.
func (s *Server) batchEmail(r *http.Request) (previewEmail, error) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		return previewEmail{}, db.ErrNotFound
	}
	locale, err := previewLocale(r)
	if err != nil {
		return previewEmail{}, err
	}
	ctx := r.Context()
	fc, err := db.ReadForFlush(ctx, s.DB.Pool, id)
	if err == nil {
		err = db.AttachSuppressions(ctx, s.DB.Pool, fc)
	}
	if err != nil {
		return previewEmail{}, err
	}
	own := "Recipient's own (" + cmp.Or(recipientLocale(fc), "none, so "+cmp.Or(s.DefaultLocale, "en")) + ")"
	state := fc.Batch.State
	if state == db.StateCanceled {
		return previewEmail{Unsent: "Not sent: " + fc.Batch.Reason, Own: own}, nil
	}
	// The stored copy is in the language it went out in; another one
	// asked for is a fresh render.
	if state != db.StateOpen && locale == "" {
		stored, err := db.ListOutbox(ctx, s.DB.Pool, id, 0, 1)
		if err != nil {
			return previewEmail{}, err
		}
		if len(stored) > 0 {
			m := stored[0]
			return previewEmail{Text: m.Text, HTML: m.HTML, Headers: m.Headers, Own: own,
				Note: "The email as it went out: the copy the outbox kept at " + fmtTime(&m.CreatedAt) + "."}, nil
		}
	}
	env := s.envelope()
	env.Locale = locale
	c, err := env.Compose(fc, s.now())
	if err != nil {
		return previewEmail{}, err
	}
	gone := state == db.StateSent || state == db.StateFailed
	switch {
	case c.Skip != "" && gone:
		return previewEmail{Own: own, Unsent: "This batch is " + state + " and no copy of its email was kept; composed now, it would not be sent: " + c.Skip}, nil
	case c.Skip != "":
		return previewEmail{Own: own, Unsent: "Would not be sent: " + c.Skip}, nil
	}
	v := shown(c.Message)
	v.Own = own
	v.Language = languageNote(i18n.Resolve(cmp.Or(locale, recipientLocale(fc)), "", s.DefaultLocale))
	if state == db.StateOpen {
		if v.Note, err = s.budgetNote(ctx, fc); err != nil {
			return previewEmail{}, err
		}
	}
	if gone {
		v.Note = "A fresh render, not the email as it went out: this batch is " + state +
			", and only the outbox keeps a copy of what it sends. This is how the batch renders now."
	}
	return v, nil
}

// typeEmail renders a type with sample data, for previewing its texts.
func (s *Server) typeEmail(r *http.Request) (previewEmail, error) {
	locale, err := previewLocale(r)
	if err != nil {
		return previewEmail{}, err
	}
	t, err := db.GetType(r.Context(), s.DB.Pool, r.PathValue("key"))
	if err != nil {
		return previewEmail{}, err
	}
	// The type editor previews unsaved texts through the query string;
	// invalid ones fall back to the stored texts. They are the type's
	// own texts, so a locale's texts still win over them in that locale.
	q := r.URL.Query()
	if v := q.Get("item_text"); v != "" && mailtemplates.ValidateItemText(v) == nil {
		t.ItemText = v
	}
	if v := q.Get("group_text"); v != "" && mailtemplates.ValidateGroupText(v) == nil {
		t.GroupText = v
	}
	if locale != "" {
		if t.Texts == nil {
			t.Texts = map[string]db.TypeTexts{}
		}
		lt := t.Texts[locale]
		if v := q.Get("locale_name"); v != "" && utf8.RuneCountInString(v) <= 200 {
			lt.Name = v
		}
		if v := q.Get("locale_item_text"); v != "" && mailtemplates.ValidateItemText(v) == nil {
			lt.ItemText = v
		}
		if v := q.Get("locale_group_text"); v != "" && mailtemplates.ValidateGroupText(v) == nil {
			lt.GroupText = v
		}
		t.Texts[locale] = lt
	}
	lang := i18n.Resolve(locale, "", s.DefaultLocale)
	mt := batching.TemplateTypeIn(t, lang.TextChain())
	if n, err := strconv.Atoi(q.Get("display_limit")); err == nil && n >= 1 && n <= 100 {
		mt.DisplayLimit = n
	}
	if v := q.Get("item_order"); v == "first" || v == "latest" {
		mt.ItemOrder = v
	}
	now := s.now()
	in := mailtemplates.Input{Mode: "cooldown", Recipient: mailtemplates.Recipient{ID: "sample", Name: "Sam Sample", Email: "sam@example.com"},
		Since: now.Add(-3 * 3600e9), Groups: []mailtemplates.Group{mailtemplates.Sample(mt, 12, now)}, Locale: lang}
	s.envelope().Address(&in, now)
	in.MessageID = "preview@lull.localhost"
	m, err := mailtemplates.Render(in)
	if err != nil {
		return previewEmail{}, err
	}
	v := shown(m)
	v.Own, v.Language = "Default ("+cmp.Or(s.DefaultLocale, "en")+")", languageNote(lang)
	return v, nil
}

// previewLocale is the language a preview is asked in: "" for the
// default choice, else a BCP 47 tag in canonical form. A value that is
// no tag is refused rather than quietly shown in another language.
func previewLocale(r *http.Request) (string, error) {
	tag, err := i18n.Parse(r.URL.Query().Get("locale"))
	if err != nil {
		return "", Invalid(FieldError{"locale", err.Error()})
	}
	return tag, nil
}

// recipientLocale is the stored locale of a batch's recipient.
func recipientLocale(fc *db.FlushContent) string {
	for _, rs := range fc.Settings {
		return rs.Recipient.Locale
	}
	return ""
}

// languageNote tells the operator which language an email is in and
// where its words come from, since a tag with no catalog of its own
// (de-AT) is served by another (de), and type texts fall back.
func languageNote(l i18n.Locale) string {
	note := "In " + localeName(l.Requested())
	if l.Requested() != l.Tag() {
		note += ", with lull's own words from its " + localeName(l.Tag()) + " catalog"
	}
	return note + ". The type's texts are taken from the first of " + strings.Join(l.TextChain(), ", ") + " that has them, else its own."
}

// localeOptions are the picker's choices: the default one, each shipped
// locale, and the one asked for when it is none of those.
func localeOptions(own, chosen string) []views.Option {
	opts := []views.Option{{Value: "", Label: own, Selected: chosen == ""}}
	found := chosen == ""
	for _, t := range i18n.Shipped() {
		tag := t.String()
		opts = append(opts, views.Option{Value: tag, Label: localeName(tag), Selected: tag == chosen})
		found = found || tag == chosen
	}
	if !found {
		opts = append(opts, views.Option{Value: chosen, Label: localeName(chosen), Selected: true})
	}
	return opts
}

// localeName names a tag for the console, in English: "German (de)".
func localeName(tag string) string {
	return display.English.Tags().Name(language.Make(tag)) + " (" + tag + ")"
}

// previewPage shows a rendered email next to its text and headers.
func (s *Server) previewPage(render func(*http.Request) (previewEmail, error), heading, back, backLabel func(*http.Request) string, section string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		m, err := render(r)
		if err != nil {
			s.pageError(w, r, err)
			return
		}
		phone := r.URL.Query().Get("width") == "phone"
		// The locale was checked by render; the links keep it.
		locale, _ := previewLocale(r)
		at := func(path string, phone bool) string {
			q := url.Values{}
			if locale != "" {
				q.Set("locale", locale)
			}
			if phone {
				q.Set("width", "phone")
			}
			if len(q) == 0 {
				return path
			}
			return path + "?" + q.Encode()
		}
		v := views.PreviewView{AdminPage: s.adminPage(r, "Preview", section), Heading: heading(r), Text: m.Text,
			Headers: headerList(m.Headers), Note: m.Note, Unsent: m.Unsent, Phone: phone, FrameURL: at(r.URL.Path+"/html", false),
			DesktopURL: at(r.URL.Path, false), PhoneURL: at(r.URL.Path, true), BackURL: back(r), BackLabel: backLabel(r),
			Locales: localeOptions(m.Own, locale), LocaleURL: r.URL.Path, Language: m.Language}
		s.render(w, r, http.StatusOK, views.Preview(v))
	}
}

// previewHTML serves an email's HTML part for the preview frame, under a
// policy that forbids scripts and remote loads, sandboxed from the console.
func (s *Server) previewHTML(render func(*http.Request) (previewEmail, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		m, err := render(r)
		if err == nil && m.Unsent != "" {
			err = fmt.Errorf("%s: %w", m.Unsent, db.ErrNotFound)
		}
		if err != nil {
			s.pageError(w, r, err)
			return
		}
		serveEmailHTML(w, m.HTML)
	}
}

func serveEmailHTML(w http.ResponseWriter, html string) {
	h := w.Header()
	h.Set("Content-Security-Policy", "sandbox; default-src 'none'; style-src 'unsafe-inline'; img-src data:; frame-ancestors 'self'")
	h.Set("Content-Type", "text/html; charset=utf-8")
	w.Write([]byte(html))
}

func headerList(h map[string]string) []views.Header {
	order := map[string]int{"From": 0, "To": 1, "Subject": 2, "Date": 3, "Message-ID": 4}
	out := make([]views.Header, 0, len(h))
	for k, v := range h {
		out = append(out, views.Header{Name: k, Value: v})
	}
	sort.Slice(out, func(i, j int) bool {
		oi, iok := order[out[i].Name]
		oj, jok := order[out[j].Name]
		switch {
		case iok && jok:
			return oi < oj
		case iok != jok:
			return iok
		}
		return out[i].Name < out[j].Name
	})
	return out
}

func (s *Server) outboxMessage(r *http.Request) (*db.OutboxMessage, error) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		return nil, db.ErrNotFound
	}
	return db.GetOutbox(r.Context(), s.DB.Pool, id)
}

// outboxPage shows one stored email like a preview, with the headers it
// was stored with.
func (s *Server) outboxPage(w http.ResponseWriter, r *http.Request) {
	m, err := s.outboxMessage(r)
	if err != nil {
		s.pageError(w, r, err)
		return
	}
	phone := r.URL.Query().Get("width") == "phone"
	v := views.PreviewView{AdminPage: s.adminPage(r, "Outbox", "outbox"), Heading: m.Subject, Text: m.Text, Headers: headerList(m.Headers),
		Phone: phone, FrameURL: r.URL.Path + "/html", DesktopURL: r.URL.Path, PhoneURL: withWidth(r.URL.Path, true),
		BackURL: "/admin/outbox", BackLabel: "Outbox"}
	s.render(w, r, http.StatusOK, views.Preview(v))
}

func (s *Server) outboxHTML(w http.ResponseWriter, r *http.Request) {
	m, err := s.outboxMessage(r)
	if err != nil {
		s.pageError(w, r, err)
		return
	}
	serveEmailHTML(w, m.HTML)
}

func (s *Server) outboxList(w http.ResponseWriter, r *http.Request) {
	before, _ := strconv.ParseInt(r.URL.Query().Get("cursor"), 10, 64)
	ms, err := db.ListOutbox(r.Context(), s.DB.Pool, 0, before, 50)
	if err != nil {
		s.pageError(w, r, err)
		return
	}
	v := views.OutboxView{AdminPage: s.adminPage(r, "Outbox", "outbox")}
	for _, m := range ms {
		row := views.OutboxRow{URL: fmt.Sprintf("/admin/outbox/%d", m.ID), To: m.To, Subject: m.Subject, When: fmtTime(&m.CreatedAt)}
		if m.BatchID != nil {
			row.BatchURL = fmt.Sprintf("/admin/batches/%d", *m.BatchID)
		}
		v.Rows = append(v.Rows, row)
	}
	if len(ms) == 50 {
		v.NextURL = fmt.Sprintf("/admin/outbox?cursor=%d", ms[len(ms)-1].ID)
	}
	s.render(w, r, http.StatusOK, views.Outbox(v))
}
