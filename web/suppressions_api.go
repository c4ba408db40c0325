package web

import (
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/preferences/batching"
)

// SuppressionRequest is the body of POST /api/v1/suppressions: an
// address the host app learned not to mail.
type SuppressionRequest struct {
	Address string `json:"address"`
	Reason  string `json:"reason"`
	Scope   string `json:"scope"`
	Detail  string `json:"detail"`
}

// maxSuppressionDetail is the longest detail, in characters, a request
// may give.
const maxSuppressionDetail = 1000

// suppression checks the request and returns the entry to add, with the
// defaults where it is silent: reason operator, and the scope a reason
// implies (a complaint keeps required types, anything else stops all).
func (b SuppressionRequest) suppression(createdBy string) (db.Suppression, []FieldError) {
	var errs []FieldError
	s := db.Suppression{Address: b.Address, Reason: b.Reason, Scope: b.Scope, Detail: b.Detail, Source: "api", CreatedBy: createdBy}
	switch {
	case b.Address == "":
		errs = append(errs, FieldError{"address", "is required"})
	default:
		if msg := batching.CheckEmail(b.Address); msg != "" {
			errs = append(errs, FieldError{"address", msg})
		}
	}
	switch s.Reason {
	case "":
		s.Reason = db.ReasonOperator
	case db.ReasonHardBounce, db.ReasonSoftBounce, db.ReasonComplaint, db.ReasonOperator:
	default:
		errs = append(errs, FieldError{"reason", "must be one of hard_bounce, soft_bounce, complaint, operator"})
	}
	switch s.Scope {
	case "":
		s.Scope = db.ScopeAll
		if s.Reason == db.ReasonComplaint {
			s.Scope = db.ScopeNonRequired
		}
	case db.ScopeAll, db.ScopeNonRequired:
	default:
		errs = append(errs, FieldError{"scope", "must be all or non_required"})
	}
	if utf8.RuneCountInString(b.Detail) > maxSuppressionDetail {
		errs = append(errs, FieldError{"detail", "is longer than " + strconv.Itoa(maxSuppressionDetail) + " characters"})
	}
	return s, errs
}

func (s *Server) createSuppression(w http.ResponseWriter, r *http.Request) {
	var b SuppressionRequest
	if err := decodeJSON(w, r, &b); err != nil {
		s.problem(w, r, err)
		return
	}
	sup, errs := b.suppression("api key " + strconv.FormatInt(apiKeyID(r), 10))
	if len(errs) > 0 {
		s.problem(w, r, Invalid(errs...))
		return
	}
	var stored *db.Suppression
	var created bool
	err := s.DB.InTx(r.Context(), func(tx pgx.Tx) (err error) {
		stored, created, err = db.AddSuppression(r.Context(), tx, sup, time.Now())
		return err
	})
	if err != nil {
		s.problem(w, r, err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	writeJSON(w, status, stored)
}

func (s *Server) deleteSuppression(w http.ResponseWriter, r *http.Request) {
	gone, err := db.Unsuppress(r.Context(), s.DB.Pool, r.PathValue("address"))
	if err != nil {
		s.problem(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, gone)
}

func (s *Server) listSuppressions(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	prefix, cursor := q.Get("prefix"), q.Get("cursor")
	limit := 50
	var errs []FieldError
	if len(prefix) > 320 {
		errs = append(errs, FieldError{"prefix", "is longer than 320 characters"})
	}
	if len(cursor) > 320 {
		errs = append(errs, FieldError{"cursor", "is not a cursor this API returned"})
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 500 {
			errs = append(errs, FieldError{"limit", "must be a number from 1 to 500"})
		}
		limit = n
	}
	if len(errs) > 0 {
		s.problem(w, r, Invalid(errs...))
		return
	}
	ss, err := db.ListSuppressions(r.Context(), s.DB.Pool, prefix, cursor, limit)
	if err != nil {
		s.problem(w, r, err)
		return
	}
	out := map[string]any{"suppressions": ss, "next_cursor": nil}
	if len(ss) == limit {
		out["next_cursor"] = ss[len(ss)-1].Address
	}
	if ss == nil {
		out["suppressions"] = []any{}
	}
	writeJSON(w, http.StatusOK, out)
}
