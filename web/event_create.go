package web

import (
	"errors"
	"net/http"
	"time"

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
		s.problem(w, r, validationProblem(err))
		return
	}
	writeJSON(w, http.StatusAccepted, res)
}

// retractEvent takes an event's notifications out of unsent batches.
func (s *Server) retractEvent(w http.ResponseWriter, r *http.Request) {
	res, err := s.Engine.Retract(r.Context(), apiKeyID(r), r.PathValue("id"))
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

// conflictIfNotOpen maps an action on a closed batch to 409.
func conflictIfNotOpen(err error) error {
	if errors.Is(err, batching.ErrNotOpen) {
		return newProblem(http.StatusConflict, "not-open", "Batch is not open", err.Error())
	}
	return err
}
