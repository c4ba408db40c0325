package web

import (
	"context"
	"net/http"
	"sort"
	"time"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/preferences"
)

// PreferencesBody is a recipient's preferences as the API shows and takes
// them. Types not listed follow the type's defaults.
type PreferencesBody struct {
	Timezone     string              `json:"timezone"`
	Digest       DigestBody          `json:"digest"`
	QuietHours   *QuietHoursBody     `json:"quiet_hours"`
	Unsubscribed bool                `json:"unsubscribed"`
	Types        map[string]TypePref `json:"types"`
}

// DigestBody is when digests go out, in the recipient's zone.
type DigestBody struct {
	DailyAt  string `json:"daily_at"`
	WeeklyOn string `json:"weekly_on"`
	WeeklyAt string `json:"weekly_at"`
}

// QuietHoursBody is a local time range with no emails; it may wrap midnight.
type QuietHoursBody struct {
	Start string `json:"start"`
	End   string `json:"end"`
}

// TypePref is one type's mode and parameters; empty ones follow the type.
type TypePref struct {
	Mode    string `json:"mode"`
	Window  string `json:"window,omitempty"`
	MaxWait string `json:"max_wait,omitempty"`
	Lead    *bool  `json:"lead,omitempty"`
}

func preferencesBody(r *db.Recipient, prefs map[string]db.TypePreference) PreferencesBody {
	b := PreferencesBody{
		Timezone: r.Timezone,
		Digest: DigestBody{
			DailyAt:  preferences.TimeOfDay(r.DailyAt).String(),
			WeeklyOn: preferences.WeekdayName(time.Weekday(r.WeeklyOn)),
			WeeklyAt: preferences.TimeOfDay(r.WeeklyAt).String(),
		},
		Unsubscribed: r.Unsubscribed,
		Types:        map[string]TypePref{},
	}
	if r.QuietStart != nil && r.QuietEnd != nil {
		b.QuietHours = &QuietHoursBody{preferences.TimeOfDay(*r.QuietStart).String(), preferences.TimeOfDay(*r.QuietEnd).String()}
	}
	for k, p := range prefs {
		tp := TypePref{Mode: p.Mode, Lead: p.Lead}
		if p.WindowMS != nil {
			tp.Window = preferences.FormatDuration(time.Duration(*p.WindowMS) * time.Millisecond)
		}
		if p.MaxWaitMS != nil {
			tp.MaxWait = preferences.FormatDuration(time.Duration(*p.MaxWaitMS) * time.Millisecond)
		}
		b.Types[k] = tp
	}
	return b
}

// applyPreferences validates b and writes it onto r, returning the per-type
// rows to store. knownTypes lists the registered type keys.
func applyPreferences(r *db.Recipient, b PreferencesBody, knownTypes map[string]bool) ([]db.TypePreference, []FieldError) {
	var errs []FieldError
	add := func(f, m string) { errs = append(errs, FieldError{f, m}) }
	if b.Timezone != "" {
		if msg := checkZone(b.Timezone); msg != "" {
			add("timezone", msg)
		} else {
			r.Timezone = b.Timezone
		}
	}
	tod := func(field, v string, dst *int) {
		if v == "" {
			return
		}
		t, err := preferences.ParseTimeOfDay(v)
		if err != nil {
			add(field, err.Error())
			return
		}
		*dst = int(t)
	}
	tod("digest.daily_at", b.Digest.DailyAt, &r.DailyAt)
	tod("digest.weekly_at", b.Digest.WeeklyAt, &r.WeeklyAt)
	if b.Digest.WeeklyOn != "" {
		if d, err := preferences.ParseWeekday(b.Digest.WeeklyOn); err != nil {
			add("digest.weekly_on", err.Error())
		} else {
			r.WeeklyOn = int(d)
		}
	}
	r.QuietStart, r.QuietEnd = nil, nil
	if q := b.QuietHours; q != nil && (q.Start != "" || q.End != "") {
		var start, end int
		tod("quiet_hours.start", q.Start, &start)
		tod("quiet_hours.end", q.End, &end)
		if q.Start == "" || q.End == "" {
			add("quiet_hours", "needs both start and end")
		}
		r.QuietStart, r.QuietEnd = &start, &end
	}
	r.Unsubscribed = b.Unsubscribed

	keys := make([]string, 0, len(b.Types))
	for k := range b.Types {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var rows []db.TypePreference
	for _, k := range keys {
		tp := b.Types[k]
		field := "types." + k
		if !knownTypes[k] {
			add(field, "unknown notification type")
			continue
		}
		row := db.TypePreference{RecipientID: r.ID, TypeKey: k, Mode: tp.Mode, Lead: tp.Lead}
		if _, err := preferences.ParseMode(tp.Mode); err != nil {
			add(field+".mode", err.Error())
		}
		if tp.Window != "" {
			if d, err := preferences.ParseWindow(tp.Window); err != nil {
				add(field+".window", err.Error())
			} else {
				ms := d.Milliseconds()
				row.WindowMS = &ms
			}
		}
		if tp.MaxWait != "" {
			if d, err := preferences.ParseMaxWait(tp.MaxWait); err != nil {
				add(field+".max_wait", err.Error())
			} else {
				ms := d.Milliseconds()
				row.MaxWaitMS = &ms
			}
		}
		rows = append(rows, row)
	}
	return rows, errs
}

func (s *Server) getPreferences(w http.ResponseWriter, r *http.Request) {
	rec, prefs, err := s.loadPreferences(r.Context(), r.PathValue("id"))
	if err != nil {
		s.problem(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, preferencesBody(rec, prefs))
}

func (s *Server) loadPreferences(ctx context.Context, id string) (*db.Recipient, map[string]db.TypePreference, error) {
	rec, err := db.GetRecipient(ctx, s.DB.Bun, id)
	if err != nil {
		return nil, nil, err
	}
	prefs, err := db.TypePreferences(ctx, s.DB.Bun, id)
	return rec, prefs, err
}

func (s *Server) putPreferences(w http.ResponseWriter, r *http.Request) {
	var b PreferencesBody
	if err := decodeJSON(w, r, &b); err != nil {
		s.problem(w, r, err)
		return
	}
	ctx := r.Context()
	rec, err := db.GetRecipient(ctx, s.DB.Bun, r.PathValue("id"))
	if err != nil {
		s.problem(w, r, err)
		return
	}
	known, err := s.typeKeys(ctx)
	if err != nil {
		s.problem(w, r, err)
		return
	}
	rows, errs := applyPreferences(rec, b, known)
	if len(errs) > 0 {
		s.problem(w, r, Invalid(errs...))
		return
	}
	if err := db.SavePreferences(ctx, s.DB.Bun, rec, rows); err != nil {
		s.problem(w, r, err)
		return
	}
	rec, prefs, err := s.loadPreferences(ctx, rec.ID)
	if err != nil {
		s.problem(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, preferencesBody(rec, prefs))
}

func (s *Server) typeKeys(ctx context.Context) (map[string]bool, error) {
	ts, err := db.ListTypes(ctx, s.DB.Bun)
	if err != nil {
		return nil, err
	}
	m := make(map[string]bool, len(ts))
	for _, t := range ts {
		m[t.Key] = true
	}
	return m, nil
}
