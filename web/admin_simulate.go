package web

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/i18n"
	"github.com/lull-dev/lull/preferences"
	"github.com/lull-dev/lull/preferences/batching"
	"github.com/lull-dev/lull/preferences/simulate"
	"github.com/lull-dev/lull/views"
)

// maxUploadBytes bounds the console's events file: about a million small
// events.
const maxUploadBytes = 256 << 20

// simulateProposals are the form's proposals and the names their fields
// start with; two side by side answer most questions.
var simulateProposals = []struct{ prefix, label string }{{"a", "Proposal A"}, {"b", "Proposal B"}}

// simulatePage shows the simulator's form: the last seven days, and the
// types as they are now.
func (s *Server) simulatePage(w http.ResponseWriter, r *http.Request) {
	types, err := db.ListTypes(r.Context(), s.DB.Bun)
	if err != nil {
		s.pageError(w, r, err)
		return
	}
	to := s.now().UTC().Truncate(time.Hour).Add(time.Hour)
	v := s.simulateView(r, types, nil, map[string]string{})
	v.From, v.To = to.Add(-7*24*time.Hour).Format(localLayout), to.Format(localLayout)
	s.render(w, r, http.StatusOK, views.Simulate(v))
}

// localLayout is how a datetime-local field writes a time.
const localLayout = "2006-01-02T15:04"

// simulateRun reads the form, replays, and shows the form again with the
// results below it, or with each problem next to its field.
func (s *Server) simulateRun(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxUploadBytes)
	var err error
	if strings.HasPrefix(r.Header.Get("Content-Type"), "multipart/") {
		err = r.ParseMultipartForm(8 << 20)
	} else {
		err = r.ParseForm()
	}
	if err != nil {
		msg := "The form could not be read."
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			msg = fmt.Sprintf("The file is too large: at most %d MiB.", maxUploadBytes>>20)
		}
		s.message(w, r, http.StatusBadRequest, "Cannot simulate", msg)
		return
	}
	ctx := r.Context()
	types, err := db.ListTypes(ctx, s.DB.Bun)
	if err != nil {
		s.pageError(w, r, err)
		return
	}
	f := func(n string) string { return strings.TrimSpace(r.FormValue(n)) }
	var sim batching.SimulationRequest
	specs, errs := proposalSpecs(r, types)
	locale, err := i18n.Parse(f("locale"))
	if err != nil {
		errs = append(errs, FieldError{"locale", err.Error()})
	}
	source := f("source")
	if source == "upload" {
		file, _, ferr := r.FormFile("events")
		if ferr != nil {
			errs = append(errs, FieldError{"events", "choose a file of events, one JSON event per line"})
		} else {
			var ferrs []preferences.FieldError
			sim.Upload, ferrs = simulate.ReadEventLines(file, "events", batching.MaxUploadEvents)
			file.Close()
			errs = append(errs, fieldErrors(ferrs)...)
		}
	} else {
		errs = append(errs, parseRange(f("from"), f("to"), &sim)...)
	}
	// Proposals left empty are not run, but keep their place so their
	// fields are named after the form's.
	var used []int
	for i, spec := range specs {
		if spec != nil {
			sim.Specs = append(sim.Specs, *spec)
			used = append(used, i)
		}
	}
	sim.PolicyField = func(i int, field string) string { return simulateProposals[used[i]].prefix + "." + field }
	sim.DefaultBudget = s.DailyBudget
	var rep *simulate.Report
	if len(errs) == 0 {
		var more []preferences.FieldError
		rep, more, err = batching.Simulate(ctx, s.DB, sim)
		if err != nil {
			s.pageError(w, r, err)
			return
		}
		errs = append(errs, fieldErrors(more)...)
	}
	msgs := map[string]string{}
	for _, e := range errs {
		if _, ok := msgs[e.Field]; !ok {
			msgs[e.Field] = e.Message
		}
	}
	v := s.simulateView(r, types, r, msgs)
	v.Source, v.From, v.To = source, f("from"), f("to")
	status := http.StatusOK
	if len(errs) > 0 {
		status = http.StatusUnprocessableEntity
	} else {
		v.Result = simulationResult(rep)
		typeHeadings(v.Result, rep, types, i18n.Resolve(locale, "", s.DefaultLocale), s.now())
	}
	s.render(w, r, status, views.Simulate(v))
}

// proposalSpecs reads each proposal of the form; nil for one left empty.
// Numbers that are not numbers are refused here; everything else is
// checked by PolicySpec.Parse, as for the API.
func proposalSpecs(r *http.Request, types []db.Type) ([]*simulate.PolicySpec, []FieldError) {
	out := make([]*simulate.PolicySpec, len(simulateProposals))
	var errs []FieldError
	for i, p := range simulateProposals {
		f := func(n string) string { return strings.TrimSpace(r.FormValue(p.prefix + "." + n)) }
		spec := simulate.PolicySpec{Name: f("name")}
		budget, bad := formInt(f("budget"))
		if bad {
			errs = append(errs, FieldError{p.prefix + ".budget", "must be a whole number"})
		}
		spec.Budget = budget
		used := budget != nil
		if m := f("everyone.mode"); m != "" {
			spec.Everyone = &simulate.EveryoneSpec{Mode: m}
			if m == string(preferences.Daily) {
				spec.Everyone.DailyAt = f("everyone.daily_at")
			}
			if m == string(preferences.Weekly) {
				spec.Everyone.WeeklyOn, spec.Everyone.WeeklyAt = f("everyone.weekly_on"), f("everyone.weekly_at")
			}
			used = true
		}
		for _, t := range types {
			tf := func(n string) string { return f("types." + t.Key + "." + n) }
			ts := simulate.TypeSpec{Mode: tf("mode"), Window: tf("window"), MaxWait: tf("max_wait"), OverrideRecipients: tf("override_recipients") == "on"}
			for _, n := range []struct {
				name string
				into **int
			}{{"max_items", &ts.MaxItems}, {"display_limit", &ts.DisplayLimit}} {
				v, bad := formInt(tf(n.name))
				if bad {
					errs = append(errs, FieldError{p.prefix + ".types." + t.Key + "." + n.name, "must be a whole number"})
				}
				*n.into = v
			}
			if ts == (simulate.TypeSpec{}) {
				continue
			}
			if spec.Types == nil {
				spec.Types = map[string]simulate.TypeSpec{}
			}
			spec.Types[t.Key] = ts
			used = true
		}
		if used || spec.Name != "" {
			if spec.Name == "" {
				spec.Name = p.label
			}
			out[i] = &spec
		}
	}
	return out, errs
}

// formInt reads an optional whole number; bad is set for anything else.
func formInt(s string) (n *int, bad bool) {
	if s == "" {
		return nil, false
	}
	v, err := strconv.Atoi(s)
	if err != nil {
		return nil, true
	}
	return &v, false
}

// simulateView builds the form, filled from form when given.
func (s *Server) simulateView(r *http.Request, types []db.Type, form *http.Request, errs map[string]string) views.SimulateView {
	v := views.SimulateView{AdminPage: s.adminPage(r, "Policy simulator", "simulate"), Source: "stored", Errors: errs}
	val := func(n string) string {
		if form == nil {
			return ""
		}
		return strings.TrimSpace(form.FormValue(n))
	}
	v.Locales = localeOptions("Default ("+cmp.Or(s.DefaultLocale, "en")+")", val("locale"))
	for _, p := range simulateProposals {
		pf := views.ProposalForm{Prefix: p.prefix, Label: p.label, Name: val(p.prefix + ".name"),
			DailyAt: val(p.prefix + ".everyone.daily_at"), WeeklyAt: val(p.prefix + ".everyone.weekly_at"), Budget: val(p.prefix + ".budget")}
		if pf.DailyAt == "" {
			pf.DailyAt = "08:00"
		}
		if pf.WeeklyAt == "" {
			pf.WeeklyAt = "08:00"
		}
		everyone := val(p.prefix + ".everyone.mode")
		pf.Everyone = []views.Option{{Value: "", Label: "as they chose", Selected: everyone == ""}}
		for _, m := range []string{"immediate", "cooldown", "hourly", "daily", "weekly", "monthly"} {
			pf.Everyone = append(pf.Everyone, views.Option{Value: m, Label: "all on " + m, Selected: everyone == m})
		}
		on := val(p.prefix + ".everyone.weekly_on")
		if on == "" {
			on = "monday"
		}
		for d := time.Sunday; d <= time.Saturday; d++ {
			name := preferences.WeekdayName((d + 1) % 7) // Monday first
			pf.WeeklyOn = append(pf.WeeklyOn, views.Option{Value: name, Label: name, Selected: name == on})
		}
		for _, t := range types {
			field := func(n string) string { return val(pf.TypeField(t.Key, n)) }
			row := views.ProposalTypeRow{Key: t.Key, Name: t.Name, Current: describeType(&t),
				Window: field("window"), MaxWait: field("max_wait"), MaxItems: field("max_items"), DisplayLimit: field("display_limit"),
				Override: field("override_recipients") == "on"}
			mode := field("mode")
			row.Modes = []views.Option{{Value: "", Label: "unchanged", Selected: mode == ""}}
			for _, m := range []string{"immediate", "cooldown", "hourly", "daily", "weekly", "monthly", "never"} {
				row.Modes = append(row.Modes, views.Option{Value: m, Label: m, Selected: mode == m})
			}
			pf.Types = append(pf.Types, row)
		}
		v.Proposals = append(v.Proposals, pf)
	}
	return v
}

// describeType says how a type is set now, in the form's terms.
func describeType(t *db.Type) string {
	d := t.DefaultMode
	if t.DefaultMode == string(preferences.Cooldown) {
		d += " " + preferences.FormatDuration(t.Window()) + ", at most " + preferences.FormatDuration(t.MaxWait())
	}
	if t.MaxItems > 0 {
		d += fmt.Sprintf(", max %d items", t.MaxItems)
	}
	return d + fmt.Sprintf(", shows %d", t.DisplayLimit)
}

// simulationResult lays a report out for the page: a column per result,
// a row per figure, and a bar per result in the chart.
func simulationResult(rep *simulate.Report) *views.SimulationResult {
	out := &views.SimulationResult{Notes: rep.Notes}
	span := "uploaded events"
	if rep.From != nil && rep.To != nil {
		span = "events accepted " + rep.From.UTC().Format("2006-01-02 15:04") + " – " + rep.To.UTC().Format("2006-01-02 15:04") + " UTC"
	}
	out.Summary = fmt.Sprintf("%d %s: %d notifications for %d recipients.", rep.Events, span, rep.Notifications, rep.Recipients)
	var base *simulate.Metrics
	for i := range rep.Results {
		if rep.Results[i].Kind == simulate.KindPolicy {
			base = &rep.Results[i].Overall
			break
		}
	}
	row := func(label, note string, value func(r *simulate.Result) string) {
		mr := views.MetricRow{Label: label, Note: note}
		for i := range rep.Results {
			mr.Values = append(mr.Values, value(&rep.Results[i]))
		}
		out.Rows = append(out.Rows, mr)
	}
	policyOnly := func(v func(m *simulate.Metrics) string) func(r *simulate.Result) string {
		return func(r *simulate.Result) string {
			if r.Kind == simulate.KindActual {
				return "–"
			}
			return v(&r.Overall)
		}
	}
	top := 0
	for _, r := range rep.Results {
		out.Columns = append(out.Columns, views.SimulationColumn{Name: r.Name, Description: r.Description, Actual: r.Kind == simulate.KindActual})
		top = max(top, r.Overall.Emails)
	}
	row("Emails", "would be sent; actually sent for what lull sent", func(r *simulate.Result) string { return strconv.Itoa(r.Overall.Emails) })
	row("Change", "against the current settings", func(r *simulate.Result) string {
		if base == nil || r.Kind == simulate.KindActual || &r.Overall == base {
			return "–"
		}
		return change(r.Overall.Emails, base.Emails)
	})
	row("Notifications", "batched; suppressed by a preference", policyOnly(func(m *simulate.Metrics) string {
		return fmt.Sprintf("%d; %d suppressed", m.Notifications, m.Suppressed)
	}))
	row("Emails per recipient", "median / p90 / max", func(r *simulate.Result) string {
		e := r.Overall.EmailsPerRecipient
		return fmt.Sprintf("%d / %d / %d", e.Median, e.P90, e.Max)
	})
	row("Worst hour", "of the recipient with the most emails", func(r *simulate.Result) string { return worstHour(r.Overall.WorstHour) })
	row("Added delay", "first notification to email, median / p90", func(r *simulate.Result) string { return delay(r.Overall.Delay) })
	row("Items not shown", "past the display limit, counted in \"and N more\"", func(r *simulate.Result) string {
		return strconv.Itoa(r.Overall.HiddenItems)
	})
	row("Held by the budget", "over a daily email budget, sent in the next day's held digest", policyOnly(func(m *simulate.Metrics) string {
		return strconv.Itoa(m.Held)
	}))
	if rep.Results != nil {
		for ti := range rep.Results[0].Types {
			mr := views.MetricRow{Label: rep.Results[0].Types[ti].Type}
			for _, r := range rep.Results {
				t := r.Types[ti]
				mr.Values = append(mr.Values, emailCount(t.Emails)+" · "+delay(t.Delay))
			}
			out.Types = append(out.Types, mr)
		}
		sort.SliceStable(out.Types, func(i, j int) bool { return out.Types[i].Label < out.Types[j].Label })
	}
	for i, r := range rep.Results {
		w := 0.0
		if top > 0 {
			w = 500 * float64(r.Overall.Emails) / float64(top)
		}
		out.Chart = append(out.Chart, views.ChartBar{Label: r.Name, Value: strconv.Itoa(r.Overall.Emails), Y: float64(i)*28 + 4, W: w,
			Actual: r.Kind == simulate.KindActual})
	}
	return out
}

func emailCount(n int) string {
	if n == 1 {
		return "1 email"
	}
	return strconv.Itoa(n) + " emails"
}

func change(n, base int) string {
	if base == 0 {
		return fmt.Sprintf("%+d", n-base)
	}
	return fmt.Sprintf("%+d (%+.0f%%)", n-base, 100*float64(n-base)/float64(base))
}

func delay(d simulate.Delay) string {
	f := func(x time.Duration) string { return preferences.FormatDuration(x.Round(time.Second)) }
	return f(d.Median) + " / " + f(d.P90)
}

func worstHour(w *simulate.WorstHour) string {
	if w == nil {
		return "–"
	}
	return fmt.Sprintf("%d emails to %s, %s UTC (of %d)", w.Emails, w.Recipient, w.Start.UTC().Format("Jan 2 15:04"), w.Total)
}
