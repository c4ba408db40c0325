package web

import (
	"net/http"
	"time"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/i18n"
	"github.com/lull-dev/lull/preferences/batching"
)

// RecipientBody is a recipient's contact details, as PUT answers them.
type RecipientBody struct {
	ID       string `json:"id"`
	Email    string `json:"email"`
	Name     string `json:"name"`
	Timezone string `json:"timezone"`
	Locale   string `json:"locale"`
	Active   *bool  `json:"active"`
}

// RecipientPatch is the body of PUT /api/v1/recipients/{id}: it creates
// the recipient or merges onto the stored one. A field left out keeps
// its stored value (a new recipient gets no email, name or locale, UTC
// and active); an empty timezone counts as left out. null clears email,
// name and locale; it is refused for timezone and active, which have no
// empty state.
type RecipientPatch struct {
	ID       string           `json:"id"`
	Email    Optional[string] `json:"email"`
	Name     Optional[string] `json:"name"`
	Timezone Optional[string] `json:"timezone"`
	Locale   Optional[string] `json:"locale"`
	Active   Optional[bool]   `json:"active"`
}

func (s *Server) putRecipient(w http.ResponseWriter, r *http.Request) {
	var b RecipientPatch
	if err := decodeJSON(w, r, &b); err != nil {
		s.problem(w, r, err)
		return
	}
	rec, columns, errs := b.recipient(r.PathValue("id"))
	if len(errs) > 0 {
		s.problem(w, r, Invalid(errs...))
		return
	}
	if err := db.MergeRecipient(r.Context(), s.DB.Pool, rec, columns...); err != nil {
		s.problem(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, RecipientBody{ID: rec.ID, Email: rec.Email, Name: rec.Name, Timezone: rec.Timezone, Locale: rec.Locale, Active: &rec.Active})
}

// recipient checks the body and returns the recipient to create (with
// the defaults where the body is silent) and the columns it sets, which
// are all an existing recipient's update may change.
func (b RecipientPatch) recipient(id string) (*db.Recipient, []string, []FieldError) {
	var errs []FieldError
	if len(id) > 255 {
		errs = append(errs, FieldError{"id", "is longer than 255 characters"})
	}
	if b.ID != "" && b.ID != id {
		errs = append(errs, FieldError{"id", "differs from the id in the URL"})
	}
	rec := &db.Recipient{ID: id, Timezone: "UTC", Active: true}
	var columns []string
	set := func(column string, sent bool) {
		if sent {
			columns = append(columns, column)
		}
	}
	mergeClearable(b.Email, &rec.Email)
	set("email", b.Email.Set)
	if rec.Email != "" {
		if msg := batching.CheckEmail(rec.Email); msg != "" {
			errs = append(errs, FieldError{"email", msg})
		}
	}
	mergeClearable(b.Name, &rec.Name)
	set("name", b.Name.Set)
	mergeClearable(b.Locale, &rec.Locale)
	set("locale", b.Locale.Set)
	if canon, err := i18n.Parse(rec.Locale); err != nil {
		errs = append(errs, FieldError{"locale", err.Error()})
	} else {
		rec.Locale = canon
	}
	mergeValue(&errs, "active", b.Active, &rec.Active)
	set("active", b.Active.Set)
	if b.Timezone.Value == "" {
		b.Timezone.Set = false // as left out; a null is still refused
	} else if msg := checkZone(b.Timezone.Value); msg != "" {
		errs = append(errs, FieldError{"timezone", msg})
	}
	mergeValue(&errs, "timezone", b.Timezone, &rec.Timezone)
	set("timezone", b.Timezone.Set)
	return rec, columns, errs
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
