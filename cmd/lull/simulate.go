package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/preferences"
	"github.com/lull-dev/lull/preferences/batching"
	"github.com/lull-dev/lull/preferences/simulate"
)

const simulateUsage = `usage: lull simulate --from TIME --to TIME [--policy FILE] [--json]
       lull simulate --events FILE.jsonl [--policy FILE] [--json]

Replays stored events accepted between --from and --to (RFC 3339 or a UTC
date such as 2026-11-16; a month at most), or the events of a JSON-lines
file, under the current settings and the proposals in the policy file, and
prints the emails each would send beside those actually sent. Nothing is
sent or stored.

The policy file holds one proposal, a list of them, or {"policies": [...]}:

  {"name": "comments 10m", "types": {"comment.created": {"mode": "cooldown", "window": "10m"}}}
  {"name": "all daily", "everyone": {"mode": "daily", "daily_at": "08:00"}}

flags:
`

// simulateCmd handles "lull simulate".
func simulateCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("simulate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, simulateUsage); fs.PrintDefaults() }
	from := fs.String("from", "", "start of the range of stored events (inclusive)")
	to := fs.String("to", "", "end of the range of stored events (exclusive)")
	events := fs.String("events", "", "a JSON-lines file of events to replay instead of stored ones")
	policy := fs.String("policy", "", "a JSON file of proposals to compare with the current settings")
	asJSON := fs.Bool("json", false, "print the report as JSON, as the API returns it")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return errUsage
	}
	req := batching.SimulationRequest{PolicyField: func(i int, f string) string { return fmt.Sprintf("%s: policies[%d].%s", *policy, i, f) }}
	// As serve reads it; a value serve would refuse replays as no limit.
	req.DefaultBudget, _ = strconv.Atoi(getenv("LULL_DAILY_EMAIL_BUDGET"))
	var errs []preferences.FieldError
	if *policy != "" {
		specs, err := readPolicies(*policy)
		if err != nil {
			return err
		}
		req.Specs = specs
	}
	switch {
	case *events != "" && (*from != "" || *to != ""):
		fmt.Fprintln(stderr, "lull simulate: give --from and --to, or --events, not both")
		return errUsage
	case *events != "":
		f, err := os.Open(*events)
		if err != nil {
			return err
		}
		var ferrs []preferences.FieldError
		req.Upload, ferrs = simulate.ReadEventLines(f, *events, batching.MaxUploadEvents)
		f.Close()
		errs = append(errs, ferrs...)
	case *from == "" || *to == "":
		fs.Usage()
		return errUsage
	default:
		var err error
		if req.From, err = simulate.ParseTime(*from); err != nil {
			errs = append(errs, preferences.FieldError{Field: "--from", Message: err.Error()})
		}
		if req.To, err = simulate.ParseTime(*to); err != nil {
			errs = append(errs, preferences.FieldError{Field: "--to", Message: err.Error()})
		}
		if len(errs) == 0 {
			for _, e := range batching.CheckSimulationRange(req.From, req.To) {
				errs = append(errs, preferences.FieldError{Field: "--" + e.Field, Message: e.Message})
			}
		}
	}
	if len(errs) > 0 {
		return fieldErrorList(errs)
	}
	return withDB(ctx, getenv, stderr, func(d *db.DB) error {
		rep, ferrs, err := batching.Simulate(ctx, d, req)
		if err != nil {
			return err
		}
		if len(ferrs) > 0 {
			return fieldErrorList(ferrs)
		}
		if *asJSON {
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(rep)
		}
		printReport(stdout, rep)
		return nil
	})
}

// readPolicies reads a policy file: one proposal, a list, or an object
// with "policies". Unknown fields are refused, so a misspelt setting is
// not silently ignored.
func readPolicies(path string) ([]simulate.PolicySpec, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	b = bytes.TrimSpace(b)
	decode := func(v any) error {
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(v); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		return nil
	}
	switch {
	case len(b) > 0 && b[0] == '[':
		var specs []simulate.PolicySpec
		return specs, decode(&specs)
	case bytes.Contains(b, []byte(`"policies"`)):
		var wrap struct {
			Policies []simulate.PolicySpec `json:"policies"`
		}
		return wrap.Policies, decode(&wrap)
	}
	var spec simulate.PolicySpec
	return []simulate.PolicySpec{spec}, decode(&spec)
}

// fieldErrorList turns field errors into one error, a line each.
func fieldErrorList(errs []preferences.FieldError) error {
	lines := make([]string, len(errs))
	for i, e := range errs {
		lines[i] = e.Field + ": " + e.Message
	}
	return errors.New("cannot simulate:\n  " + strings.Join(lines, "\n  "))
}

// printReport writes the report as a table: a column per result.
func printReport(w io.Writer, rep *simulate.Report) {
	span := "uploaded events"
	if rep.From != nil && rep.To != nil {
		span = fmt.Sprintf("events accepted %s – %s UTC", rep.From.UTC().Format("2006-01-02 15:04"), rep.To.UTC().Format("2006-01-02 15:04"))
	}
	fmt.Fprintf(w, "%d %s: %d notifications for %d recipients\n\n", rep.Events, span, rep.Notifications, rep.Recipients)
	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
	row := func(label string, cell func(r *simulate.Result, m *simulate.Metrics) string) {
		cells := []string{label}
		for i := range rep.Results {
			cells = append(cells, cell(&rep.Results[i], &rep.Results[i].Overall))
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	// The first replay is of the current settings: the base of changes.
	baseAt, base := -1, 0
	for i, r := range rep.Results {
		if r.Kind == simulate.KindPolicy {
			baseAt, base = i, r.Overall.Emails
			break
		}
	}
	row("", func(r *simulate.Result, _ *simulate.Metrics) string { return r.Name })
	row("emails", func(r *simulate.Result, m *simulate.Metrics) string {
		if r.Kind == simulate.KindActual || base == 0 || r == &rep.Results[baseAt] {
			return fmt.Sprint(m.Emails)
		}
		return fmt.Sprintf("%d (%+.0f%%)", m.Emails, 100*float64(m.Emails-base)/float64(base))
	})
	row("per recipient (median/p90/max)", func(_ *simulate.Result, m *simulate.Metrics) string {
		e := m.EmailsPerRecipient
		return fmt.Sprintf("%d / %d / %d", e.Median, e.P90, e.Max)
	})
	row("worst hour (noisiest recipient)", func(_ *simulate.Result, m *simulate.Metrics) string {
		if m.WorstHour == nil {
			return "-"
		}
		return fmt.Sprintf("%d to %s at %s", m.WorstHour.Emails, m.WorstHour.Recipient, m.WorstHour.Start.UTC().Format("01-02 15:04"))
	})
	row("added delay (median/p90)", func(_ *simulate.Result, m *simulate.Metrics) string { return delayText(m.Delay) })
	row("items not shown", func(_ *simulate.Result, m *simulate.Metrics) string { return fmt.Sprint(m.HiddenItems) })
	if len(rep.Results) > 0 {
		for ti, t := range rep.Results[0].Types {
			cells := []string{"  " + t.Type}
			for _, r := range rep.Results {
				m := r.Types[ti]
				n := fmt.Sprintf("%d emails", m.Emails)
				if m.Emails == 1 {
					n = "1 email"
				}
				cells = append(cells, n+", "+delayText(m.Delay))
			}
			fmt.Fprintln(tw, strings.Join(cells, "\t"))
		}
	}
	tw.Flush()
	for _, r := range rep.Results {
		fmt.Fprintf(w, "\n%s: %s", r.Name, r.Description)
	}
	fmt.Fprintln(w)
	for _, n := range rep.Notes {
		fmt.Fprintln(w, "note:", n)
	}
}

func delayText(d simulate.Delay) string {
	return preferences.FormatDuration(d.Median.Round(time.Second)) + " / " + preferences.FormatDuration(d.P90.Round(time.Second))
}
