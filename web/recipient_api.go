package web

import (
	"net/http"
	"time"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/preferences/batching"
)

// RecipientBody is a recipient's contact details.
type RecipientBody struct {
	ID       string `json:"id"`
	Email    string `json:"email"`
	Name     string `json:"name"`
	Timezone string `json:"timezone"`
	Locale   string `json:"locale"`
	Active   *bool  `json:"active"`
}

func (s *Server) putRecipient(w http.ResponseWriter, r *http.Request) {
	var b RecipientBody
	if err := decodeJSON(w, r, &b); err != nil {
		s.problem(w, r, err)
		return
	}
	id := r.PathValue("id")
	var errs []FieldError
	if len(id) > 255 {
		errs = append(errs, FieldError{"id", "is longer than 255 characters"})
	}
	if b.ID != "" && b.ID != id {
		errs = append(errs, FieldError{"id", "differs from the id in the URL"})
	}
	if b.Email != "" {
		if msg := batching.CheckEmail(b.Email); msg != "" {
			errs = append(errs, FieldError{"email", msg})
		}
	}
	if b.Timezone == "" {
		b.Timezone = "UTC"
	} else if msg := checkZone(b.Timezone); msg != "" {
		errs = append(errs, FieldError{"timezone", msg})
	}
	if len(errs) > 0 {
		s.problem(w, r, Invalid(errs...))
		return
	}
	rec := &db.Recipient{ID: id, Email: b.Email, Name: b.Name, Timezone: b.Timezone, Locale: b.Locale, Active: b.Active == nil || *b.Active}
	if err := db.UpsertRecipient(r.Context(), s.DB.Bun, rec); err != nil {
		s.problem(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, RecipientBody{ID: rec.ID, Email: rec.Email, Name: rec.Name, Timezone: rec.Timezone, Locale: rec.Locale, Active: &rec.Active})
}

func checkZone(name string) string {
	if _, err := time.LoadLocation(name); err != nil || name == "Local" {
		return "unknown time zone " + quote(name) + ": use an IANA name such as Europe/Berlin"
	}
	return ""
}

func quote(s string) string { return "\"" + s + "\"" }

// preferencesLink makes a signed, expiring link to the recipient's
// settings page, for the host application to show or send.
func (s *Server) preferencesLink(w http.ResponseWriter, r *http.Request) {
	rec, err := db.GetRecipient(r.Context(), s.DB.Bun, r.PathValue("id"))
	if err != nil {
		s.problem(w, r, err)
		return
	}
	url, exp := s.Links.SettingsURL(rec.ID, s.now())
	writeJSON(w, http.StatusOK, map[string]any{"url": url, "expires_at": exp})
}
