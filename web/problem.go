package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/preferences/batching"
)

// Problem is an RFC 9457 problem detail. Validation problems list each
// failing field in Errors.
type Problem struct {
	Type   string       `json:"type"`
	Title  string       `json:"title"`
	Status int          `json:"status"`
	Detail string       `json:"detail,omitempty"`
	Errors []FieldError `json:"errors,omitempty"`
}

// FieldError names one invalid field, with a JSON-pointer-like path
// ("recipients[2].email").
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// Error makes a Problem usable as an error, so domain code can return one.
func (p *Problem) Error() string { return p.Title + ": " + p.Detail }

// Invalid builds a 422 validation problem from field errors.
func Invalid(errs ...FieldError) *Problem {
	detail := "The request has invalid fields."
	if len(errs) == 1 {
		detail = errs[0].Field + ": " + errs[0].Message
	}
	return &Problem{Type: "https://lull.dev/problems/validation", Title: "Invalid request", Status: http.StatusUnprocessableEntity, Detail: detail, Errors: errs}
}

func newProblem(status int, slug, title, detail string) *Problem {
	return &Problem{Type: "https://lull.dev/problems/" + slug, Title: title, Status: status, Detail: detail}
}

var (
	errUnavailable  = newProblem(http.StatusServiceUnavailable, "unavailable", "Service unavailable", "The database cannot be reached; try again shortly.")
	errUnauthorized = newProblem(http.StatusUnauthorized, "unauthorized", "Unauthorized", "Send a valid API key as 'Authorization: Bearer <key>'.")
	errNotFound     = newProblem(http.StatusNotFound, "not-found", "Not found", "")
	errClientGone   = newProblem(499, "client-closed", "Client closed request", "")
	errTooLarge     = newProblem(http.StatusRequestEntityTooLarge, "too-large", "Request body too large", "Request bodies are limited to 4 MiB.")
	// errEventTooLarge names the recipient limit too, since a long
	// recipient list is what makes an event body big.
	errEventTooLarge = newProblem(http.StatusRequestEntityTooLarge, "too-large", "Request body too large",
		fmt.Sprintf("Event bodies are limited to %d MiB, and recipients to %d per event: send the rest in further events.",
			MaxEventBodyBytes>>20, batching.MaxRecipients))
)

// problem writes err as problem+json. This is the one place that maps
// errors to status codes: a *Problem is sent as it is, a missing row is
// 404, an unreachable database 503, and anything else is logged once and
// answered as a bare 500 that reveals nothing.
func (s *Server) problem(w http.ResponseWriter, r *http.Request, err error) {
	var p *Problem
	switch {
	case errors.As(err, &p):
	case errors.Is(err, db.ErrNotFound):
		p = &Problem{Type: errNotFound.Type, Title: errNotFound.Title, Status: http.StatusNotFound, Detail: err.Error()}
	case db.IsUnavailable(err):
		s.Logger.Warn("database unavailable", "path", r.URL.Path, "err", err)
		p = errUnavailable
	case errors.Is(err, context.Canceled) && r.Context().Err() != nil:
		// The client hung up mid-request (a timeout on its side, a
		// deploy): nothing failed here, so it is no internal error to
		// alarm anyone. 499, as nginx logs it, keeps logs and metrics
		// honest; nobody is left to read the answer.
		s.Logger.Debug("client went away", "method", r.Method, "path", r.URL.Path)
		p = errClientGone
	default:
		s.Logger.Error("internal error", "method", r.Method, "path", r.URL.Path, "err", err)
		p = newProblem(http.StatusInternalServerError, "internal", "Internal error", "")
	}
	w.Header().Set("Content-Type", "application/problem+json")
	if p.Status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "5")
	}
	w.WriteHeader(p.Status)
	json.NewEncoder(w).Encode(p)
}

// writeJSON sends v with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}
