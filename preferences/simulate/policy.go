package simulate

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/lull-dev/lull/preferences"
)

// Policy is a proposed change to the stored settings, replayed next to
// them. The zero Policy changes nothing: it replays the current settings.
type Policy struct {
	Name string
	// Types changes notification types by key.
	Types map[string]TypeChange
	// Everyone, when set, puts every recipient on one mode for every type,
	// whatever they chose ("everyone on daily at 08:00 local").
	Everyone *Everyone
	// Budget, when set, replaces the installation's daily email budget
	// (LULL_DAILY_EMAIL_BUDGET): what recipients who set none get.
	Budget *int
}

// Current is the policy that changes nothing, named for reports: the
// baseline a proposal is read against.
func Current() Policy { return Policy{Name: "Current settings"} }

// TypeChange changes one type's settings; nil and empty fields keep the
// stored value.
type TypeChange struct {
	Mode            preferences.Mode
	Window, MaxWait *time.Duration
	Lead            *bool
	MaxItems        *int
	DisplayLimit    *int
	BurstLimit      *int
	// IgnoreChoices applies the type's settings to every recipient,
	// including those who chose something else for it. Otherwise, as when
	// a type is saved, recipients' own choices still win.
	IgnoreChoices bool
}

// Everyone is a mode imposed on every recipient and type. Required types
// stay deliverable and unsubscribed recipients stay unsubscribed: Effective
// still applies.
type Everyone struct {
	Mode            preferences.Mode
	Window, MaxWait *time.Duration
	Lead            *bool
	// DailyAt, WeeklyOn and WeeklyAt replace each recipient's digest time,
	// read in the recipient's own time zone.
	DailyAt  *preferences.TimeOfDay
	WeeklyOn *time.Weekday
	WeeklyAt *preferences.TimeOfDay
	// WeeklyDays, EveryHours, MonthlyDay and MonthlyAt replace the other
	// cadences' settings the same way.
	WeeklyDays *preferences.WeekdaySet
	EveryHours *int
	MonthlyDay *int
	MonthlyAt  *preferences.TimeOfDay
}

// MaxPolicies bounds how many proposals one simulation compares.
const MaxPolicies = 5

// PolicySpec is a policy as the API, the CLI's policy file and the
// console's form give it. Durations are Go durations ("90s", "10m"), times
// of day "HH:MM", as everywhere else in lull.
type PolicySpec struct {
	Name     string              `json:"name"`
	Types    map[string]TypeSpec `json:"types,omitempty"`
	Everyone *EveryoneSpec       `json:"everyone,omitempty"`
	// Budget is a daily email budget for recipients who set none, as
	// LULL_DAILY_EMAIL_BUDGET would be; 0 is no limit.
	Budget *int `json:"budget,omitempty"`
}

// TypeSpec is a TypeChange as given; empty or absent fields keep the
// stored value.
type TypeSpec struct {
	Mode         string `json:"mode,omitempty"`
	Window       string `json:"window,omitempty"`
	MaxWait      string `json:"max_wait,omitempty"`
	Lead         *bool  `json:"lead,omitempty"`
	MaxItems     *int   `json:"max_items,omitempty"`
	DisplayLimit *int   `json:"display_limit,omitempty"`
	BurstLimit   *int   `json:"burst_limit,omitempty"`
	// OverrideRecipients also replaces recipients' own choices.
	OverrideRecipients bool `json:"override_recipients,omitempty"`
}

// EveryoneSpec is an Everyone as given, such as
// {"mode": "daily", "daily_at": "08:00"}.
type EveryoneSpec struct {
	Mode       string   `json:"mode"`
	Window     string   `json:"window,omitempty"`
	MaxWait    string   `json:"max_wait,omitempty"`
	Lead       *bool    `json:"lead,omitempty"`
	DailyAt    string   `json:"daily_at,omitempty"`
	WeeklyOn   string   `json:"weekly_on,omitempty"`
	WeeklyAt   string   `json:"weekly_at,omitempty"`
	WeeklyDays []string `json:"weekly_days,omitempty"`
	// EveryHours and MonthlyDay are pointers so that a 0 given is told
	// from one left out, and refused.
	EveryHours *int   `json:"every_hours,omitempty"`
	MonthlyDay *int   `json:"monthly_day,omitempty"`
	MonthlyAt  string `json:"monthly_at,omitempty"`
}

// Parse checks a spec and builds the policy. known reports whether a type
// key exists, so a misspelt type is an error rather than a proposal that
// silently changes nothing. Every problem is returned, each naming its
// field.
func (s PolicySpec) Parse(known func(string) bool) (Policy, []preferences.FieldError) {
	var errs []preferences.FieldError
	add := func(field, msg string) { errs = append(errs, preferences.FieldError{Field: field, Message: msg}) }
	p := Policy{Name: strings.TrimSpace(s.Name)}
	if len(p.Name) > 100 {
		add("name", "is longer than 100 characters")
	}
	keys := make([]string, 0, len(s.Types))
	for k := range s.Types {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, key := range keys {
		ts := s.Types[key]
		field := "types." + key + "."
		if known != nil && !known(key) {
			add("types."+key, fmt.Sprintf("unknown notification type %q", key))
			continue
		}
		c := TypeChange{Lead: ts.Lead, IgnoreChoices: ts.OverrideRecipients}
		if ts.Mode != "" {
			m, err := preferences.ParseMode(ts.Mode)
			if err != nil {
				add(field+"mode", err.Error())
			}
			c.Mode = m
		}
		if ts.Window != "" {
			d, err := preferences.ParseWindow(ts.Window)
			if err != nil {
				add(field+"window", err.Error())
			}
			c.Window = storedDuration(d)
		}
		if ts.MaxWait != "" {
			d, err := preferences.ParseMaxWait(ts.MaxWait)
			if err != nil {
				add(field+"max_wait", err.Error())
			}
			c.MaxWait = storedDuration(d)
		}
		if ts.MaxItems != nil && *ts.MaxItems < 0 {
			add(field+"max_items", "must be 0 (no limit) or more")
		}
		if ts.DisplayLimit != nil && (*ts.DisplayLimit < 1 || *ts.DisplayLimit > 100) {
			add(field+"display_limit", "must be from 1 to 100")
		}
		if ts.BurstLimit != nil && *ts.BurstLimit < 0 {
			add(field+"burst_limit", "must be 0 (off) or more")
		}
		c.MaxItems, c.DisplayLimit, c.BurstLimit = ts.MaxItems, ts.DisplayLimit, ts.BurstLimit
		if p.Types == nil {
			p.Types = map[string]TypeChange{}
		}
		p.Types[key] = c
	}
	if e := s.Everyone; e != nil {
		ev := &Everyone{Lead: e.Lead}
		m, err := preferences.ParseMode(e.Mode)
		if err != nil {
			add("everyone.mode", err.Error())
		}
		ev.Mode = m
		if e.Window != "" {
			d, err := preferences.ParseWindow(e.Window)
			if err != nil {
				add("everyone.window", err.Error())
			}
			ev.Window = storedDuration(d)
		}
		if e.MaxWait != "" {
			d, err := preferences.ParseMaxWait(e.MaxWait)
			if err != nil {
				add("everyone.max_wait", err.Error())
			}
			ev.MaxWait = storedDuration(d)
		}
		if e.DailyAt != "" {
			t, err := preferences.ParseTimeOfDay(e.DailyAt)
			if err != nil {
				add("everyone.daily_at", err.Error())
			}
			ev.DailyAt = &t
		}
		if e.WeeklyOn != "" {
			d, err := preferences.ParseWeekday(e.WeeklyOn)
			if err != nil {
				add("everyone.weekly_on", err.Error())
			}
			ev.WeeklyOn = &d
		}
		if e.WeeklyAt != "" {
			t, err := preferences.ParseTimeOfDay(e.WeeklyAt)
			if err != nil {
				add("everyone.weekly_at", err.Error())
			}
			ev.WeeklyAt = &t
		}
		parseCadences(e, ev, add)
		p.Everyone = ev
	}
	if b := s.Budget; b != nil {
		if *b < 0 || *b > preferences.MaxDailyBudget {
			add("budget", fmt.Sprintf("must be a whole number of emails a day from 0 (no limit) to %d", preferences.MaxDailyBudget))
		}
		p.Budget = b
	}
	return p, errs
}

// parseCadences reads the settings of the hourly, several-day weekly and
// monthly digests, with the API's rules.
func parseCadences(e *EveryoneSpec, ev *Everyone, add func(field, msg string)) {
	if e.WeeklyDays != nil {
		w, err := preferences.ParseWeekdays(e.WeeklyDays)
		if err != nil {
			add("everyone.weekly_days", err.Error())
		}
		ev.WeeklyDays = &w
	}
	if e.EveryHours != nil {
		if !preferences.ValidEveryHours(*e.EveryHours) {
			add("everyone.every_hours", "must be 1, 2, 4, 6 or 12 (hours that divide a day)")
		}
		ev.EveryHours = e.EveryHours
	}
	if e.MonthlyDay != nil {
		if *e.MonthlyDay < 1 || *e.MonthlyDay > 31 {
			add("everyone.monthly_day", "must be a day of the month from 1 to 31; 31 means the last day of every month")
		}
		ev.MonthlyDay = e.MonthlyDay
	}
	if e.MonthlyAt != "" {
		t, err := preferences.ParseTimeOfDay(e.MonthlyAt)
		if err != nil {
			add("everyone.monthly_at", err.Error())
		}
		ev.MonthlyAt = &t
	}
}

// storedDuration rounds d down to the millisecond, the precision batches
// store windows in, so a replay uses the window the engine would.
func storedDuration(d time.Duration) *time.Duration {
	d = d.Truncate(time.Millisecond)
	return &d
}

// Describe says in a few words what a policy changes, for reports:
// "comment.created: cooldown 10m", "everyone: daily at 08:00".
func (p Policy) Describe() string {
	var parts []string
	if p.Budget != nil {
		parts = append(parts, fmt.Sprintf("budget: %d emails a day", *p.Budget))
	}
	if e := p.Everyone; e != nil {
		s := "everyone: " + string(e.Mode)
		if e.Mode == preferences.Daily && e.DailyAt != nil {
			s += " at " + e.DailyAt.String()
		}
		if e.Mode == preferences.Weekly && e.WeeklyOn != nil {
			s += " on " + preferences.WeekdayName(*e.WeeklyOn)
		}
		if e.Mode == preferences.Weekly && e.WeeklyAt != nil {
			s += " at " + e.WeeklyAt.String()
		}
		if e.Window != nil {
			s += " " + preferences.FormatDuration(*e.Window)
		}
		parts = append(parts, s)
	}
	keys := make([]string, 0, len(p.Types))
	for k := range p.Types {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		c := p.Types[k]
		var what []string
		if c.Mode != "" {
			what = append(what, string(c.Mode))
		}
		if c.Window != nil {
			what = append(what, "window "+preferences.FormatDuration(*c.Window))
		}
		if c.MaxWait != nil {
			what = append(what, "max wait "+preferences.FormatDuration(*c.MaxWait))
		}
		if c.Lead != nil {
			what = append(what, fmt.Sprintf("lead %v", *c.Lead))
		}
		if c.MaxItems != nil {
			what = append(what, fmt.Sprintf("max items %d", *c.MaxItems))
		}
		if c.DisplayLimit != nil {
			what = append(what, fmt.Sprintf("shows %d", *c.DisplayLimit))
		}
		if c.BurstLimit != nil {
			what = append(what, fmt.Sprintf("burst limit %d", *c.BurstLimit))
		}
		if c.IgnoreChoices {
			what = append(what, "for everyone")
		}
		if len(what) == 0 {
			what = append(what, "unchanged")
		}
		parts = append(parts, k+": "+strings.Join(what, ", "))
	}
	if len(parts) == 0 {
		return "the stored settings"
	}
	return strings.Join(parts, "; ")
}

// ParseTime reads a bound of a range to replay: an RFC 3339 time
// ("2026-11-16T00:00:00Z"), or a UTC date and time as a browser's
// datetime-local field sends it ("2026-11-16T08:30"), or a UTC date
// ("2026-11-16", its midnight).
func ParseTime(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not a time: use RFC 3339 (2026-11-16T00:00:00Z) or a UTC date (2026-11-16)", s)
}
