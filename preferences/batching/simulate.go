package batching

import (
	"context"
	"fmt"
	"time"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/preferences"
	"github.com/lull-dev/lull/preferences/simulate"
)

// MaxSimulationRange bounds a replay of stored events: a month of history
// answers the questions the simulator is for, and keeps one request from
// reading the database for minutes.
const MaxSimulationRange = 31 * 24 * time.Hour

// MaxUploadEvents bounds an uploaded file of events.
const MaxUploadEvents = 1_000_000

// CheckSimulationRange checks a range of stored events to replay, naming
// the fields "from" and "to".
func CheckSimulationRange(from, to time.Time) []preferences.FieldError {
	var errs []preferences.FieldError
	switch {
	case from.IsZero():
		errs = append(errs, preferences.FieldError{Field: "from", Message: "is required"})
	case to.IsZero():
		errs = append(errs, preferences.FieldError{Field: "to", Message: "is required"})
	case !to.After(from):
		errs = append(errs, preferences.FieldError{Field: "to", Message: "must be after from"})
	case to.Sub(from) > MaxSimulationRange:
		errs = append(errs, preferences.FieldError{Field: "to", Message: "is more than 31 days after from: replay a month at most"})
	}
	return errs
}

// SimulationSettings loads what a replay needs from storage, through the
// same conversions the engine uses: every type, and the recipients of the
// events accepted in [from, to) with their choices. With an upload, the
// recipients are those its events name, stored or not, and what the file
// says about them.
func SimulationSettings(ctx context.Context, d *db.DB, from, to time.Time, upload *simulate.Upload) (*simulate.Settings, error) {
	types, err := db.ListTypes(ctx, d.Bun)
	if err != nil {
		return nil, err
	}
	s := &simulate.Settings{Types: make(map[string]simulate.Type, len(types)), Recipients: map[string]*simulate.Recipient{}}
	for i := range types {
		t := &types[i]
		s.Types[t.Key] = simulate.Type{Key: t.Key, Name: t.Name, Defaults: TypeDefaults(t), MaxItems: t.MaxItems,
			DisplayLimit: t.DisplayLimit, BurstLimit: t.BurstLimit, Budget: t.DailyBudget}
		if t.CatchUpDays != nil {
			st := s.Types[t.Key]
			st.CatchUpDays = *t.CatchUpDays
			s.Types[t.Key] = st
		}
	}
	var recs []db.SimulationRecipient
	if upload != nil {
		recs, err = db.SimulationRecipientsByID(ctx, d.Pool, upload.RecipientIDs())
	} else {
		recs, err = db.SimulationRecipients(ctx, d.Pool, from, to)
	}
	if err != nil {
		return nil, err
	}
	for i := range recs {
		r := &recs[i]
		rc := &simulate.Recipient{ID: r.ID, Active: r.Active, HasEmail: r.Email != "", Unsubscribed: r.Unsubscribed, Schedule: Schedule(&r.Recipient),
			Budget: r.DailyBudget}
		for j := range r.Prefs {
			if rc.Overrides == nil {
				rc.Overrides = map[string]*preferences.Override{}
			}
			rc.Overrides[r.Prefs[j].TypeKey] = Override(&r.Prefs[j])
		}
		s.Recipients[r.ID] = rc
	}
	if err := simulationMutes(ctx, d, s); err != nil {
		return nil, err
	}
	if err := simulationSeen(ctx, d, s); err != nil {
		return nil, err
	}
	if upload != nil {
		upload.Apply(s)
	}
	return s, nil
}

// simulationMutes gives the recipients the conversations they muted.
func simulationMutes(ctx context.Context, d *db.DB, s *simulate.Settings) error {
	ids := make([]string, 0, len(s.Recipients))
	for id := range s.Recipients {
		ids = append(ids, id)
	}
	mutes, err := db.LiveMutes(ctx, d.Pool, ids)
	for id, m := range mutes {
		s.Recipients[id].Muted = m
	}
	return err
}

// KnownTypes reports whether a policy may name a type: it is registered,
// or an uploaded event uses it.
func KnownTypes(s *simulate.Settings, upload *simulate.Upload) func(string) bool {
	extra := map[string]bool{}
	if upload != nil {
		for _, k := range upload.TypeKeys() {
			extra[k] = true
		}
	}
	return func(k string) bool {
		_, ok := s.Types[k]
		return ok || extra[k]
	}
}

// SimulationRequest is a checked request to simulate, from the API, the
// console or the command line.
type SimulationRequest struct {
	// From and To bound the stored events to replay, unless Upload is set.
	From, To time.Time
	Upload   *simulate.Upload
	// Specs are the proposals to compare with the current settings.
	Specs []simulate.PolicySpec
	// PolicyField names field f of proposal i in error messages
	// ("policies[0].types.comment.window").
	PolicyField func(i int, f string) string
	// DefaultBudget is the installation's daily email budget
	// (LULL_DAILY_EMAIL_BUDGET).
	DefaultBudget int
}

// Simulate checks the proposals against the types there are and replays:
// the current settings first, then each proposal (named "Proposal N" if
// it has no name). A replay of stored events also sets what was actually
// sent beside them. Problems with the proposals come back as field errors.
func Simulate(ctx context.Context, d *db.DB, req SimulationRequest) (*simulate.Report, []preferences.FieldError, error) {
	if len(req.Specs) > simulate.MaxPolicies {
		return nil, []preferences.FieldError{{Field: "policies", Message: fmt.Sprintf("has %d policies; compare at most %d at once", len(req.Specs), simulate.MaxPolicies)}}, nil
	}
	settings, err := SimulationSettings(ctx, d, req.From, req.To, req.Upload)
	if err != nil {
		return nil, nil, err
	}
	settings.DefaultBudget = req.DefaultBudget
	known := KnownTypes(settings, req.Upload)
	policies := []simulate.Policy{simulate.Current()}
	var errs []preferences.FieldError
	for i, spec := range req.Specs {
		p, ferrs := spec.Parse(known)
		for _, e := range ferrs {
			errs = append(errs, preferences.FieldError{Field: req.PolicyField(i, e.Field), Message: e.Message})
		}
		if p.Name == "" {
			p.Name = fmt.Sprintf("Proposal %d", i+1)
		}
		policies = append(policies, p)
	}
	if len(errs) > 0 {
		return nil, errs, nil
	}
	if req.Upload != nil {
		rep, err := SimulateUpload(settings, policies, req.Upload)
		return rep, nil, err
	}
	rep, err := SimulateStored(ctx, d, settings, policies, req.From, req.To)
	return rep, nil, err
}

// SimulateStored replays the events accepted in [from, to) under policies
// and sets the emails actually sent for them beside the results. Nothing
// is written. The events stream from the database; one pass serves every
// policy.
func SimulateStored(ctx context.Context, d *db.DB, s *simulate.Settings, policies []simulate.Policy, from, to time.Time) (*simulate.Report, error) {
	r := simulate.New(s, policies)
	r.ExpectSent()
	err := db.StreamSimulationEvents(ctx, d.Pool, from, to, func(ev *db.SimulationEvent) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		return r.Add(simulate.Event{At: ev.At, Type: ev.TypeKey, BatchKey: ev.BatchKey, Recipients: ev.Recipients})
	})
	if err != nil {
		r.Report()
		return nil, fmt.Errorf("simulate: %w", err)
	}
	err = db.StreamSentBatches(ctx, d.Pool, from, to, func(b *db.SentBatch) error {
		e := simulate.SentEmail{Recipient: b.RecipientID, SentAt: b.SentAt}
		for _, p := range b.Parts {
			e.Parts = append(e.Parts, simulate.SentPart{Type: p.TypeKey, Items: p.Items, First: p.First})
		}
		r.AddSent(e)
		return nil
	})
	rep := r.Report()
	if err != nil {
		return nil, fmt.Errorf("simulate: %w", err)
	}
	rep.Source, rep.From, rep.To = simulate.SourceStored, &from, &to
	return rep, nil
}

// SimulateUpload replays uploaded events under policies.
func SimulateUpload(s *simulate.Settings, policies []simulate.Policy, upload *simulate.Upload) (*simulate.Report, error) {
	r := simulate.New(s, policies)
	for _, ev := range upload.Events {
		if err := r.Add(ev); err != nil {
			r.Report()
			return nil, fmt.Errorf("simulate: %w", err)
		}
	}
	rep := r.Report()
	rep.Source = simulate.SourceUpload
	return rep, nil
}

// simulationSeen gives the recipients their last visit, for catch-up.
func simulationSeen(ctx context.Context, d *db.DB, s *simulate.Settings) error {
	ids := make([]string, 0, len(s.Recipients))
	for id := range s.Recipients {
		ids = append(ids, id)
	}
	// Absent since before the end of time: every stored visit.
	seen, err := db.AbsentSince(ctx, d.Pool, ids, time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC))
	for id, at := range seen {
		s.Recipients[id].SeenAt = at
	}
	return err
}
