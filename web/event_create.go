package web

import (
	"errors"
	"net/http"

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
	if err != nil {
		s.problem(w, r, validationProblem(err))
		return
	}
	writeJSON(w, http.StatusAccepted, res)
}

// retractEvent takes an event's notifications out of unsent batches.
func (s *Server) retractEvent(w http.ResponseWriter, r *http.Request) {
	res, err := s.Engine.Retract(r.Context(), apiKeyID(r), r.PathValue("id"))
	if err != nil {
		s.problem(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// conflictIfNotOpen maps an action on a closed batch to 409.
func conflictIfNotOpen(err error) error {
	if errors.Is(err, batching.ErrNotOpen) {
		return newProblem(http.StatusConflict, "not-open", "Batch is not open", err.Error())
	}
	return err
}
