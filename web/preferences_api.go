package web

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/preferences"
	"github.com/lull-dev/lull/preferences/batching"
)

// PreferencesBody is a recipient's preferences as the API shows and takes
// them. Types not listed follow the type's defaults.
type PreferencesBody struct {
	// Muted are the conversations muted now, by batch key; only the API
	// reads and writes them (see mute_api.go).
	Muted        map[string]MuteBody `json:"muted"`
	Timezone     string              `json:"timezone"`
	Digest       DigestBody          `json:"digest"`
	QuietHours   *QuietHoursBody     `json:"quiet_hours"`
	Unsubscribed bool                `json:"unsubscribed"`
	Types        map[string]TypePref `json:"types"`
	// Budget is the recipient's own daily email budget: at most this many
	// emails a local day, what goes over it held for one digest at the
	// next day's digest time. null follows the type's and the
	// installation's defaults; 0 is no limit.
	Budget *int `json:"budget"`
}

// DigestBody is when digests go out, in the recipient's zone.
type DigestBody struct {
	DailyAt  string `json:"daily_at"`
	WeeklyOn string `json:"weekly_on"`
	WeeklyAt string `json:"weekly_at"`
	// WeeklyDays are all the weekly digest's days; WeeklyOn is the first
	// of them, and setting WeeklyOn alone makes it the only one.
	WeeklyDays []string `json:"weekly_days"`
	// EveryHours is the hourly digest's period (1, 2, 4, 6 or 12), on the
	// grid through DailyAt.
	EveryHours int    `json:"every_hours"`
	MonthlyDay int    `json:"monthly_day"`
	MonthlyAt  string `json:"monthly_at"`
}

// QuietHoursBody is a local time range with no emails; it may wrap midnight.
type QuietHoursBody struct {
	Start string `json:"start"`
	End   string `json:"end"`
}

// PreferencesPatch is the body of PUT /api/v1/recipients/{id}/preferences,
// merged onto what is stored: a field left out keeps its stored value,
// also inside digest, quiet_hours and each type. Types merge one by one:
// a type not listed keeps its choice. null clears what has a default to
// fall back to: quiet_hours (none), types (every type follows its
// defaults), one type, and a type's window, max_wait and lead (the
// type's own). null elsewhere is refused, unsubscribed included: an
// unsubscribe is only ever undone by an explicit false.
type PreferencesPatch struct {
	Muted        Optional[mutePatches]     `json:"muted"`
	Timezone     Optional[string]          `json:"timezone"`
	Digest       Optional[DigestPatch]     `json:"digest"`
	QuietHours   Optional[QuietHoursPatch] `json:"quiet_hours"`
	Unsubscribed Optional[bool]            `json:"unsubscribed"`
	Types        Optional[typePatches]     `json:"types"`
	Budget       Optional[int]             `json:"budget"`
}

// typePatches are the changes to several types' choices. Each is decoded
// on its own, so that an error inside one names its type, which
// encoding/json leaves out of its error paths ("types.comment.lead", not
// "types.lead").
type typePatches map[string]Optional[TypePrefPatch]

func (m *typePatches) UnmarshalJSON(b []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	*m = typePatches{}
	for _, k := range slices.Sorted(maps.Keys(raw)) {
		var o Optional[TypePrefPatch]
		if err := o.UnmarshalJSON(raw[k]); err != nil {
			var typ *json.UnmarshalTypeError
			if errors.As(err, &typ) {
				typ.Field = strings.TrimSuffix(k+"."+typ.Field, ".")
			}
			return err
		}
		(*m)[k] = o
	}
	return nil
}

// DigestPatch changes some of the digest times.
type DigestPatch struct {
	DailyAt    Optional[string]   `json:"daily_at"`
	WeeklyOn   Optional[string]   `json:"weekly_on"`
	WeeklyAt   Optional[string]   `json:"weekly_at"`
	WeeklyDays Optional[[]string] `json:"weekly_days"`
	EveryHours Optional[int]      `json:"every_hours"`
	MonthlyDay Optional[int]      `json:"monthly_day"`
	MonthlyAt  Optional[string]   `json:"monthly_at"`
}

// QuietHoursPatch changes one end of the quiet hours or both.
type QuietHoursPatch struct {
	Start Optional[string] `json:"start"`
	End   Optional[string] `json:"end"`
}

// TypePrefPatch changes some of one type's choice.
type TypePrefPatch struct {
	Mode    Optional[string] `json:"mode"`
	Window  Optional[string] `json:"window"`
	MaxWait Optional[string] `json:"max_wait"`
	Lead    Optional[*bool]  `json:"lead"`
}

// mergeOnto returns the stored preferences b with the patch applied, and
// the nulls it refuses. The result is checked by applyPreferences like a
// whole body, so a merged field is named in errors as if it had been sent.
func (p PreferencesPatch) mergeOnto(b PreferencesBody) (PreferencesBody, []FieldError) {
	var errs []FieldError
	mergeValue(&errs, "timezone", p.Timezone, &b.Timezone)
	mergeValue(&errs, "unsubscribed", p.Unsubscribed, &b.Unsubscribed)
	switch {
	case p.Budget.Null:
		b.Budget = nil
	case p.Budget.Set:
		b.Budget = &p.Budget.Value
	}
	if p.Digest.Null {
		errs = append(errs, FieldError{"digest", nullRefused})
	}
	d := p.Digest.Value
	mergeValue(&errs, "digest.daily_at", d.DailyAt, &b.Digest.DailyAt)
	mergeValue(&errs, "digest.weekly_on", d.WeeklyOn, &b.Digest.WeeklyOn)
	mergeValue(&errs, "digest.weekly_at", d.WeeklyAt, &b.Digest.WeeklyAt)
	mergeValue(&errs, "digest.weekly_days", d.WeeklyDays, &b.Digest.WeeklyDays)
	if d.WeeklyOn.Set && !d.WeeklyDays.Set {
		// weekly_on alone is the one-day form: it replaces the days.
		b.Digest.WeeklyDays = nil
	} else if d.WeeklyDays.Set && !d.WeeklyOn.Set {
		b.Digest.WeeklyOn = ""
	}
	mergeValue(&errs, "digest.every_hours", d.EveryHours, &b.Digest.EveryHours)
	mergeValue(&errs, "digest.monthly_day", d.MonthlyDay, &b.Digest.MonthlyDay)
	mergeValue(&errs, "digest.monthly_at", d.MonthlyAt, &b.Digest.MonthlyAt)
	// applyPreferences reads 0 as "not given" (the settings form has no
	// such field); a client that sends 0 gets the range, not silence.
	if d.EveryHours.Set && !d.EveryHours.Null && d.EveryHours.Value == 0 {
		errs = append(errs, FieldError{"digest.every_hours", everyHoursRange})
	}
	if d.MonthlyDay.Set && !d.MonthlyDay.Null && d.MonthlyDay.Value == 0 {
		errs = append(errs, FieldError{"digest.monthly_day", monthlyDayRange})
	}
	switch q := p.QuietHours; {
	case q.Null:
		b.QuietHours = nil
	case q.Set:
		merged := QuietHoursBody{}
		if b.QuietHours != nil {
			merged = *b.QuietHours
		}
		mergeValue(&errs, "quiet_hours.start", q.Value.Start, &merged.Start)
		mergeValue(&errs, "quiet_hours.end", q.Value.End, &merged.End)
		b.QuietHours = &merged
	}
	if p.Types.Null {
		b.Types = map[string]TypePref{}
	}
	for _, k := range slices.Sorted(maps.Keys(p.Types.Value)) {
		o := p.Types.Value[k]
		if o.Null {
			delete(b.Types, k)
			continue
		}
		tp := b.Types[k]
		mergeValue(&errs, "types."+k+".mode", o.Value.Mode, &tp.Mode)
		mergeClearable(o.Value.Window, &tp.Window)
		mergeClearable(o.Value.MaxWait, &tp.MaxWait)
		mergeClearable(o.Value.Lead, &tp.Lead)
		b.Types[k] = tp
	}
	return b, errs
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
			DailyAt:    preferences.TimeOfDay(r.DailyAt).String(),
			WeeklyOn:   preferences.WeekdayName(time.Weekday(r.WeeklyOn)),
			WeeklyAt:   preferences.TimeOfDay(r.WeeklyAt).String(),
			WeeklyDays: weekdayNames(batching.Schedule(r).WeeklyDaySet()),
			// As the engine reads them: a recipient built in code (never
			// stored) has zeros, which mean the defaults.
			EveryHours: cmp.Or(r.EveryHours, preferences.DefaultEveryHours),
			MonthlyDay: min(max(r.MonthlyDay, 1), 31),
			MonthlyAt:  preferences.TimeOfDay(r.MonthlyAt).String(),
		},
		Unsubscribed: r.Unsubscribed,
		Types:        map[string]TypePref{},
		Budget:       r.DailyBudget,
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

// checkBudget says what is wrong with a daily email budget, or "".
func checkBudget(n int) string {
	if n < 0 || n > preferences.MaxDailyBudget {
		return fmt.Sprintf("must be a whole number of emails a day from 0 (no limit) to %d, or null for the default", preferences.MaxDailyBudget)
	}
	return ""
}

const (
	everyHoursRange = "must be 1, 2, 4, 6 or 12 (hours that divide a day)"
	monthlyDayRange = "must be a day of the month from 1 to 31; 31 means the last day of every month"
)

// applyWeeklyDays sets the weekly digest's days from weekly_days, or from
// weekly_on alone; weekly_on, when both are given, must be one of the
// days. The first day (Sunday first) is stored as weekly_on too, so a
// reader that knows only weekly_on still sees a digest day.
func applyWeeklyDays(r *db.Recipient, d DigestBody, add func(field, msg string)) {
	var on *time.Weekday
	if d.WeeklyOn != "" {
		day, err := preferences.ParseWeekday(d.WeeklyOn)
		if err != nil {
			add("digest.weekly_on", err.Error())
			return
		}
		on = &day
	}
	var days preferences.WeekdaySet
	switch {
	case d.WeeklyDays != nil:
		var err error
		if days, err = preferences.ParseWeekdays(d.WeeklyDays); err != nil {
			add("digest.weekly_days", err.Error())
			return
		}
		if on != nil && !days.Has(*on) {
			add("digest.weekly_on", "is not one of weekly_days; leave it out to send on weekly_days")
			return
		}
	case on != nil:
		days = days.With(*on)
	default:
		return
	}
	r.WeeklyDays, r.WeeklyOn = int(days), int(days.Days()[0])
	if len(days.Days()) == 1 {
		// One day is stored as weekly_on alone, as a recipient who never
		// chose is: the same schedule reads back as the same row.
		r.WeeklyDays = 0
	}
}

func weekdayNames(w preferences.WeekdaySet) []string {
	var names []string
	for _, d := range w.Days() {
		names = append(names, preferences.WeekdayName(d))
	}
	return names
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
	tod("digest.monthly_at", b.Digest.MonthlyAt, &r.MonthlyAt)
	applyWeeklyDays(r, b.Digest, add)
	if n := b.Digest.EveryHours; n != 0 {
		if !preferences.ValidEveryHours(n) {
			add("digest.every_hours", everyHoursRange)
		} else {
			r.EveryHours = n
		}
	}
	if n := b.Digest.MonthlyDay; n != 0 {
		if n < 1 || n > 31 {
			add("digest.monthly_day", monthlyDayRange)
		} else {
			r.MonthlyDay = n
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
	r.DailyBudget = nil
	if b.Budget != nil {
		if msg := checkBudget(*b.Budget); msg != "" {
			add("budget", msg)
		}
		n := *b.Budget
		r.DailyBudget = &n
	}

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
		if tp.Mode == "" {
			add(field+".mode", "is needed: there is no stored choice for this type to keep the mode of")
		} else if _, err := preferences.ParseMode(tp.Mode); err != nil {
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
	s.writePreferences(w, r, rec, prefs)
}

// writePreferences answers with the stored preferences and the muted
// conversations.
func (s *Server) writePreferences(w http.ResponseWriter, r *http.Request, rec *db.Recipient, prefs map[string]db.TypePreference) {
	b := preferencesBody(rec, prefs)
	var err error
	if b.Muted, err = s.mutedBody(r.Context(), rec.ID); err != nil {
		s.problem(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, b)
}

func (s *Server) loadPreferences(ctx context.Context, id string) (*db.Recipient, map[string]db.TypePreference, error) {
	rec, err := db.GetRecipient(ctx, s.DB.Bun, id)
	if err != nil {
		return nil, nil, err
	}
	prefs, err := db.TypePreferences(ctx, s.DB.Pool, id)
	return rec, prefs, err
}

// putPreferences merges the body onto the stored preferences, reading
// and writing them under the recipient's row lock, so that a one-click
// unsubscribe arriving meanwhile is not written over with what was read
// before it.
func (s *Server) putPreferences(w http.ResponseWriter, r *http.Request) {
	var p PreferencesPatch
	if err := decodeJSON(w, r, &p); err != nil {
		s.problem(w, r, err)
		return
	}
	ctx := r.Context()
	known, err := s.typeKeys(ctx)
	if err != nil {
		s.problem(w, r, err)
		return
	}
	var muteErrs []FieldError
	if p.Muted.Set {
		types, err := db.ListTypes(ctx, s.DB.Bun)
		if err != nil {
			s.problem(w, r, err)
			return
		}
		muteErrs = checkMutes(p.Muted, types, s.now())
	}
	id := r.PathValue("id")
	err = s.DB.InTx(ctx, func(tx pgx.Tx) error {
		rec, err := db.LockRecipient(ctx, tx, id)
		if err != nil {
			return err
		}
		stored, err := db.TypePreferences(ctx, tx, id)
		if err != nil {
			return err
		}
		body, errs := p.mergeOnto(preferencesBody(rec, stored))
		rows, more := applyPreferences(rec, body, known)
		if errs = append(append(errs, more...), muteErrs...); len(errs) > 0 {
			return Invalid(errs...)
		}
		if err := db.SavePreferences(ctx, tx, rec, rows); err != nil {
			return err
		}
		return applyMutes(ctx, tx, id, p.Muted)
	})
	if err != nil {
		s.problem(w, r, err)
		return
	}
	rec, prefs, err := s.loadPreferences(ctx, id)
	if err != nil {
		s.problem(w, r, err)
		return
	}
	s.writePreferences(w, r, rec, prefs)
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
