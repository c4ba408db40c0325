package web

import (
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/lull-dev/lull/preferences/batching"
)

// createEvent ingests one event: 202 with where each notification went.
func (s *Server) createEvent(w http.ResponseWriter, r *http.Request) {
	var ev batching.Event
	if err := decodeJSONLimit(w, r, &ev, MaxEventBodyBytes, errEventTooLarge); err != nil {
		s.problem(w, r, err)
		return
	}
	res, err := s.Engine.Ingest(r.Context(), apiKeyID(r), &ev)
	answerWhenDone(w, r)
	if err != nil {
		s.problem(w, r, err)
		return
	}
	answer, err := res.JSON()
	if err != nil {
		s.problem(w, r, err)
		return
	}
	writeEncoded(w, http.StatusAccepted, answer)
}

// retractEvent takes an event's notifications out of unsent batches:
// DELETE /api/v1/events/{id} names the event by its id only, written as
// lull answered it: "007" or "+7" may be a key sent where the id goes,
// and must not retract event 7.
func (s *Server) retractEvent(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 || strconv.FormatInt(id, 10) != r.PathValue("id") {
		s.problem(w, r, Invalid(FieldError{"id", "must be an event id (a positive number); " +
			"to retract by idempotency key, use DELETE /api/v1/events?key=..."}))
		return
	}
	s.retract(w, r, batching.EventRef{ID: id})
}

// retractEventByKey is DELETE /api/v1/events?key=K: the event posted with
// idempotency key K by the same API key. A key in the query (URL-encoded)
// may hold any character, "/" included.
func (s *Server) retractEventByKey(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	for name := range q {
		if name != "key" {
			s.problem(w, r, Invalid(FieldError{name, "is not a known parameter: use ?key=... or DELETE /api/v1/events/{id}"}))
			return
		}
	}
	keys := q["key"]
	if len(keys) != 1 || keys[0] == "" {
		s.problem(w, r, Invalid(FieldError{"key", "is needed, once: the idempotency key the event was posted with"}))
		return
	}
	if !utf8.ValidString(keys[0]) || strings.ContainsRune(keys[0], 0) {
		s.problem(w, r, Invalid(FieldError{"key", "must be UTF-8 text without NUL characters"}))
		return
	}
	s.retract(w, r, batching.EventRef{Key: keys[0]})
}

func (s *Server) retract(w http.ResponseWriter, r *http.Request, ref batching.EventRef) {
	res, err := s.Engine.Retract(r.Context(), apiKeyID(r), ref)
	answerWhenDone(w, r)
	if err != nil {
		s.problem(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// answerWhenDone gives the answer to r a write deadline counted from now,
// when its work is done, rather than from when the request came in: an
// event to 100,000 recipients can take longer to store than the server's
// write timeout, and an event that was stored must be answered. A client
// that stops reading is still cut off, one write timeout later.
func answerWhenDone(w http.ResponseWriter, r *http.Request) {
	hs, ok := r.Context().Value(http.ServerContextKey).(*http.Server)
	if ok && hs.WriteTimeout > 0 {
		http.NewResponseController(w).SetWriteDeadline(time.Now().Add(hs.WriteTimeout))
	}
}
