package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/preferences"
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
	if len(errs) > maxFieldErrors {
		// 100,000 bad recipients would otherwise answer with megabytes of
		// errors; the first ones show the pattern.
		more := len(errs) - maxFieldErrors
		errs = append(errs[:maxFieldErrors:maxFieldErrors], FieldError{"body", fmt.Sprintf("%d more invalid fields are not listed", more)})
	}
	detail := "The request has invalid fields."
	if len(errs) == 1 {
		detail = errs[0].Field + ": " + errs[0].Message
	}
	return &Problem{Type: "https://lull.dev/problems/validation", Title: "Invalid request", Status: http.StatusUnprocessableEntity, Detail: detail, Errors: errs}
}

// maxFieldErrors bounds the fields a problem lists.
const maxFieldErrors = 100

// fieldErrors is the API's field list for the engine's and the
// simulator's field errors.
func fieldErrors(errs []preferences.FieldError) []FieldError {
	out := make([]FieldError, len(errs))
	for i, e := range errs {
		out[i] = FieldError{Field: e.Field, Message: e.Message}
	}
	return out
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

// problem writes err as problem+json.
func (s *Server) problem(w http.ResponseWriter, r *http.Request, err error) {
	p := s.classify(r, err)
	w.Header().Set("Content-Type", "application/problem+json")
	if p.Status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "5")
	}
	w.WriteHeader(p.Status)
	json.NewEncoder(w).Encode(p)
}

// maxDetailBytes bounds a problem's detail that quotes the client.
const maxDetailBytes = 300

// pageError shows an error on a page, with the status problem gives it:
// a missing row as "not found", an unreachable database as "try again",
// an internal error as logged and not described.
func (s *Server) pageError(w http.ResponseWriter, r *http.Request, err error) {
	s.pageProblem(w, r, s.classify(r, err))
}

// recipientErrorKeys are the catalog's words for the errors a recipient's
// page shows; "_text" added is the sentence under the heading.
var recipientErrorKeys = map[int]string{
	http.StatusNotFound:            "page_not_found",
	http.StatusServiceUnavailable:  "page_unavailable",
	http.StatusInternalServerError: "page_error",
}

// recipientError is pageError on a recipient's page (settings,
// unsubscribe, mute): in the language their browser asks for, since the
// page may not know the recipient, as every other word on it is.
func (s *Server) recipientError(w http.ResponseWriter, r *http.Request, err error) {
	p := s.classify(r, err)
	key, ok := recipientErrorKeys[p.Status]
	if !ok {
		s.pageProblem(w, r, p)
		return
	}
	l := s.pageLocale(r, "")
	s.localMessage(w, r, p.Status, l, key, l.T(key+"_text", nil))
}

// pageProblem shows a classified error on a page.
func (s *Server) pageProblem(w http.ResponseWriter, r *http.Request, p *Problem) {
	heading, text := p.Title, p.Detail
	switch p.Status {
	case http.StatusNotFound:
		text = "There is nothing here."
	case http.StatusServiceUnavailable:
		heading, text = "Try again shortly", "This page cannot reach its data right now. Try again in a few minutes."
	case http.StatusInternalServerError:
		text = "Something went wrong on our side. It has been logged."
	}
	s.message(w, r, p.Status, heading, text)
}

// classify is the one place that maps errors to status codes, for the
// API and the pages alike: a *Problem stands as it is, the engine's
// refusal of a request's content is 422 naming each field, an action on a
// batch that already left is 409, a missing row is 404, an unreachable
// database 503, and anything else is logged once and becomes a bare 500
// that reveals nothing.
func (s *Server) classify(r *http.Request, err error) *Problem {
	var p *Problem
	var invalid *batching.ValidationError
	switch {
	case errors.As(err, &p):
		return p
	case errors.As(err, &invalid):
		return Invalid(fieldErrors(invalid.Errors)...)
	case errors.Is(err, batching.ErrNotOpen):
		return newProblem(http.StatusConflict, "not-open", "Batch is not open", err.Error())
	case errors.Is(err, db.ErrNotFound):
		// The detail names what was not found, as the client wrote it:
		// clipped, so a path of a megabyte is not sent back whole.
		return &Problem{Type: errNotFound.Type, Title: errNotFound.Title, Status: http.StatusNotFound, Detail: clip(err.Error(), maxDetailBytes)}
	case db.IsUnavailable(err):
		s.Logger.Warn("database unavailable", "path", r.URL.Path, "err", err)
		return errUnavailable
	case errors.Is(err, context.Canceled) && r.Context().Err() != nil:
		// The client hung up mid-request (a timeout on its side, a
		// deploy): nothing failed here, so it is no internal error to
		// alarm anyone. 499, as nginx logs it, keeps logs and metrics
		// honest; nobody is left to read the answer.
		s.Logger.Debug("client went away", "method", r.Method, "path", r.URL.Path)
		return errClientGone
	}
	s.Logger.Error("internal error", "method", r.Method, "path", r.URL.Path, "err", err)
	return newProblem(http.StatusInternalServerError, "internal", "Internal error", "")
}

// writeJSON sends v with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

// writeEncoded writes JSON encoded already, as writeJSON would: the
// encoder would scan it once more to check it.
func writeEncoded(w http.ResponseWriter, status int, b []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}
