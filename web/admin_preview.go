package web

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strconv"

	"github.com/lull-dev/lull/db"
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
	ctx := r.Context()
	fc, err := db.ReadForFlush(ctx, s.DB.Pool, id)
	if err == nil {
		err = db.AttachSuppressions(ctx, s.DB.Pool, fc)
	}
	if err != nil {
		return previewEmail{}, err
	}
	state := fc.Batch.State
	if state == db.StateCanceled {
		return previewEmail{Unsent: "Not sent: " + fc.Batch.Reason}, nil
	}
	if state != db.StateOpen {
		stored, err := db.ListOutbox(ctx, s.DB.Pool, id, 0, 1)
		if err != nil {
			return previewEmail{}, err
		}
		if len(stored) > 0 {
			m := stored[0]
			return previewEmail{Text: m.Text, HTML: m.HTML, Headers: m.Headers,
				Note: "The email as it went out: the copy the outbox kept at " + fmtTime(&m.CreatedAt) + "."}, nil
		}
	}
	c, err := s.envelope().Compose(fc, s.now())
	if err != nil {
		return previewEmail{}, err
	}
	gone := state == db.StateSent || state == db.StateFailed
	switch {
	case c.Skip != "" && gone:
		return previewEmail{Unsent: "This batch is " + state + " and no copy of its email was kept; composed now, it would not be sent: " + c.Skip}, nil
	case c.Skip != "":
		return previewEmail{Unsent: "Would not be sent: " + c.Skip}, nil
	}
	v := shown(c.Message)
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
	t, err := db.GetType(r.Context(), s.DB.Pool, r.PathValue("key"))
	if err != nil {
		return previewEmail{}, err
	}
	mt := batching.TemplateType(t)
	// The type editor previews unsaved texts through the query string;
	// invalid ones fall back to the stored texts.
	q := r.URL.Query()
	if v := q.Get("item_text"); v != "" && mailtemplates.ValidateItemText(v) == nil {
		mt.ItemText = v
	}
	if v := q.Get("group_text"); v != "" && mailtemplates.ValidateGroupText(v) == nil {
		mt.GroupText = v
	}
	if n, err := strconv.Atoi(q.Get("display_limit")); err == nil && n >= 1 && n <= 100 {
		mt.DisplayLimit = n
	}
	if v := q.Get("item_order"); v == "first" || v == "latest" {
		mt.ItemOrder = v
	}
	now := s.now()
	in := mailtemplates.Input{Mode: "cooldown", Recipient: mailtemplates.Recipient{ID: "sample", Name: "Sam Sample", Email: "sam@example.com"},
		Since: now.Add(-3 * 3600e9), Groups: []mailtemplates.Group{mailtemplates.Sample(mt, 12, now)}}
	s.envelope().Address(&in, now)
	in.MessageID = "preview@lull.localhost"
	m, err := mailtemplates.Render(in)
	if err != nil {
		return previewEmail{}, err
	}
	return shown(m), nil
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
		v := views.PreviewView{AdminPage: s.adminPage(r, "Preview", section), Heading: heading(r), Text: m.Text,
			Headers: headerList(m.Headers), Note: m.Note, Unsent: m.Unsent, Phone: phone, FrameURL: r.URL.Path + "/html",
			DesktopURL: r.URL.Path, PhoneURL: withWidth(r.URL.Path, true), BackURL: back(r), BackLabel: backLabel(r)}
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
