package web

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/lull-dev/lull/preferences"
	"github.com/lull-dev/lull/preferences/batching"
	"github.com/lull-dev/lull/preferences/simulate"
)

// SimulationBody is a POST /api/v1/simulations request: a range of stored
// events (from, to) or the events themselves, and the policies to compare
// with the current settings.
type SimulationBody struct {
	From     string                `json:"from,omitempty"`
	To       string                `json:"to,omitempty"`
	Events   []json.RawMessage     `json:"events,omitempty"`
	Policies []simulate.PolicySpec `json:"policies"`
}

// createSimulation replays events under proposed policies: 200 with the
// report, nothing sent or stored.
func (s *Server) createSimulation(w http.ResponseWriter, r *http.Request) {
	var b SimulationBody
	if err := decodeJSONLimit(w, r, &b, MaxEventBodyBytes, errEventTooLarge); err != nil {
		s.problem(w, r, err)
		return
	}
	sim := batching.SimulationRequest{Specs: b.Policies, PolicyField: func(i int, f string) string { return fmt.Sprintf("policies[%d].%s", i, f) },
		DefaultBudget: s.DailyBudget}
	var errs []FieldError
	switch {
	case len(b.Events) > 0 && (b.From != "" || b.To != ""):
		errs = append(errs, FieldError{"events", "give either from and to (stored events) or events, not both"})
	case len(b.Events) > 0:
		if len(b.Events) > batching.MaxUploadEvents {
			errs = append(errs, FieldError{"events", fmt.Sprintf("has %d events; at most %d", len(b.Events), batching.MaxUploadEvents)})
			break
		}
		var ferrs []preferences.FieldError
		sim.Upload, ferrs = simulate.DecodeEvents(b.Events, "events")
		errs = append(errs, fieldErrors(ferrs)...)
	default:
		errs = append(errs, parseRange(b.From, b.To, &sim)...)
	}
	if len(errs) > 0 {
		s.problem(w, r, Invalid(errs...))
		return
	}
	rep, ferrs, err := batching.Simulate(r.Context(), s.DB, sim)
	switch {
	case err != nil:
		s.problem(w, r, err)
	case len(ferrs) > 0:
		s.problem(w, r, Invalid(fieldErrors(ferrs)...))
	default:
		writeJSON(w, http.StatusOK, rep)
	}
}

// parseRange reads the bounds of a range of stored events into sim.
func parseRange(from, to string, sim *batching.SimulationRequest) []FieldError {
	var errs []FieldError
	for _, f := range []struct {
		name, value string
		into        *time.Time
	}{{"from", from, &sim.From}, {"to", to, &sim.To}} {
		if f.value == "" {
			errs = append(errs, FieldError{f.name, "is required (or give events instead)"})
			continue
		}
		t, err := simulate.ParseTime(f.value)
		if err != nil {
			errs = append(errs, FieldError{f.name, err.Error()})
		}
		*f.into = t
	}
	if len(errs) == 0 {
		errs = append(errs, fieldErrors(batching.CheckSimulationRange(sim.From, sim.To))...)
	}
	return errs
}
