package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

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

// simulation is a checked request, whichever page or API it came from.
type simulation struct {
	from, to time.Time
	upload   *simulate.Upload
	specs    []simulate.PolicySpec
	// policyField names field f of policy i for error messages.
	policyField func(i int, f string) string
}

// createSimulation replays events under proposed policies: 200 with the
// report, nothing sent or stored.
func (s *Server) createSimulation(w http.ResponseWriter, r *http.Request) {
	var b SimulationBody
	if err := decodeJSONLimit(w, r, &b, MaxEventBodyBytes, errEventTooLarge); err != nil {
		s.problem(w, r, err)
		return
	}
	sim := simulation{specs: b.Policies, policyField: func(i int, f string) string { return fmt.Sprintf("policies[%d].%s", i, f) }}
	var errs []FieldError
	switch {
	case len(b.Events) > 0 && (b.From != "" || b.To != ""):
		errs = append(errs, FieldError{"events", "give either from and to (stored events) or events, not both"})
	case len(b.Events) > 0:
		if len(b.Events) > batching.MaxUploadEvents {
			errs = append(errs, FieldError{"events", fmt.Sprintf("has %d events; at most %d", len(b.Events), batching.MaxUploadEvents)})
			break
		}
		var ferrs []simulate.FieldError
		sim.upload, ferrs = simulate.DecodeEvents(b.Events, "events")
		errs = append(errs, fieldErrors(ferrs)...)
	default:
		errs = append(errs, parseRange(b.From, b.To, &sim)...)
	}
	if len(errs) > 0 {
		s.problem(w, r, Invalid(errs...))
		return
	}
	rep, errs, err := s.simulate(r.Context(), sim)
	switch {
	case err != nil:
		s.problem(w, r, err)
	case len(errs) > 0:
		s.problem(w, r, Invalid(errs...))
	default:
		writeJSON(w, http.StatusOK, rep)
	}
}

// parseRange reads the bounds of a range of stored events into sim.
func parseRange(from, to string, sim *simulation) []FieldError {
	var errs []FieldError
	for _, f := range []struct {
		name, value string
		into        *time.Time
	}{{"from", from, &sim.from}, {"to", to, &sim.to}} {
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
		errs = append(errs, fieldErrors(batching.CheckSimulationRange(sim.from, sim.to))...)
	}
	return errs
}

// simulate checks the policies against the types there are and replays.
// The current settings always come first; stored replays also set what
// was actually sent beside them.
func (s *Server) simulate(ctx context.Context, sim simulation) (*simulate.Report, []FieldError, error) {
	if len(sim.specs) > simulate.MaxPolicies {
		return nil, []FieldError{{"policies", fmt.Sprintf("has %d policies; compare at most %d at once", len(sim.specs), simulate.MaxPolicies)}}, nil
	}
	settings, err := batching.SimulationSettings(ctx, s.DB, sim.from, sim.to, sim.upload)
	if err != nil {
		return nil, nil, err
	}
	known := batching.KnownTypes(settings, sim.upload)
	policies := []simulate.Policy{simulate.Current()}
	var errs []FieldError
	for i, spec := range sim.specs {
		p, ferrs := spec.Parse(known)
		for _, e := range ferrs {
			errs = append(errs, FieldError{sim.policyField(i, e.Field), e.Message})
		}
		if p.Name == "" {
			p.Name = fmt.Sprintf("Proposal %d", i+1)
		}
		policies = append(policies, p)
	}
	if len(errs) > 0 {
		return nil, errs, nil
	}
	if sim.upload != nil {
		rep, err := batching.SimulateUpload(settings, policies, sim.upload)
		return rep, nil, err
	}
	rep, err := batching.SimulateStored(ctx, s.DB, settings, policies, sim.from, sim.to)
	return rep, nil, err
}

func fieldErrors(errs []simulate.FieldError) []FieldError {
	out := make([]FieldError, len(errs))
	for i, e := range errs {
		out[i] = FieldError{e.Field, e.Message}
	}
	return out
}
