// Package preferences holds the batching rules as pure functions of a
// recipient's preferences and the time: which mode applies, and when a
// batch closes. The engine, the API and the simulator all call these, so
// there is one answer to "when does this batch close?".
package preferences

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Mode is how a recipient gets one notification type.
type Mode string

// The delivery modes of DESIGN.md.
const (
	Never     Mode = "never"
	Immediate Mode = "immediate"
	Cooldown  Mode = "cooldown"
	Daily     Mode = "daily"
	Weekly    Mode = "weekly"
)

// ParseMode checks s is a mode.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case Never, Immediate, Cooldown, Daily, Weekly:
		return m, nil
	}
	return "", fmt.Errorf("unknown mode %q: use never, immediate, cooldown, daily or weekly", s)
}

// TimeOfDay is minutes after local midnight (0..1439).
type TimeOfDay int

// ParseTimeOfDay reads "HH:MM" on a 24-hour clock.
func ParseTimeOfDay(s string) (TimeOfDay, error) {
	h, m, ok := strings.Cut(s, ":")
	hh, err1 := strconv.Atoi(h)
	mm, err2 := strconv.Atoi(m)
	if !ok || err1 != nil || err2 != nil || len(m) != 2 || len(h) < 1 || len(h) > 2 || hh < 0 || hh > 23 || mm < 0 || mm > 59 {
		return 0, fmt.Errorf("%q is not a time of day: use HH:MM, such as 08:00", s)
	}
	return TimeOfDay(hh*60 + mm), nil
}

// String formats t as "HH:MM".
func (t TimeOfDay) String() string { return fmt.Sprintf("%02d:%02d", int(t)/60, int(t)%60) }

var weekdays = []string{"sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday"}

// ParseWeekday reads a weekday name, full or three letters, any case.
func ParseWeekday(s string) (time.Weekday, error) {
	l := strings.ToLower(strings.TrimSpace(s))
	for i, d := range weekdays {
		if l == d || (len(l) == 3 && strings.HasPrefix(d, l)) {
			return time.Weekday(i), nil
		}
	}
	return 0, fmt.Errorf("%q is not a weekday: use monday ... sunday", s)
}

// WeekdayName is the lowercase English name of d.
func WeekdayName(d time.Weekday) string { return weekdays[d%7] }

// ParseWindow reads a cooldown window: a Go duration of at least 1 s.
func ParseWindow(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration: use Go durations such as 90s, 5m or 1h", s)
	}
	if d < time.Second {
		return 0, fmt.Errorf("must be at least 1s, got %s", s)
	}
	return d, nil
}

// ParseMaxWait reads a cooldown cap: 0 (no cap) or at least 1 s.
func ParseMaxWait(s string) (time.Duration, error) {
	if s == "0" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%q is not a duration: use Go durations such as 30m or 1h, or 0 for no cap", s)
	}
	if d != 0 && d < time.Second {
		return 0, fmt.Errorf("must be 0 (no cap) or at least 1s, got %s", s)
	}
	return d, nil
}

// FormatDuration writes d short ("5m", "90s", "1h30m", "0") so that it
// reads back through ParseWindow and ParseMaxWait unchanged.
func FormatDuration(d time.Duration) string {
	if d == 0 {
		return "0"
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

// QuietHours is a local time range, [Start, End), in which no batch closes;
// it may wrap midnight (22:00-07:00). Start == End means none.
type QuietHours struct {
	Start, End TimeOfDay
	Enabled    bool
}

// Schedule is a recipient's calendar.
type Schedule struct {
	Location *time.Location // nil means UTC
	DailyAt  TimeOfDay
	WeeklyOn time.Weekday
	WeeklyAt TimeOfDay
	Quiet    QuietHours
}

func (s Schedule) loc() *time.Location {
	if s.Location == nil {
		return time.UTC
	}
	return s.Location
}

// Policy is the effective choice for one recipient and one type.
type Policy struct {
	Mode    Mode
	Window  time.Duration
	MaxWait time.Duration
	Lead    bool
}

// TypeDefaults are a notification type's own settings.
type TypeDefaults struct {
	Required bool
	Mode     Mode
	Window   time.Duration
	MaxWait  time.Duration
	Lead     bool
}

// Override is a recipient's stored choice; nil pointers follow the type.
type Override struct {
	Mode    Mode
	Window  *time.Duration
	MaxWait *time.Duration
	Lead    *bool
}

// Effective resolves the policy: the recipient's override over the type's
// defaults; unsubscribing makes every type Never except required ones, and
// a required type never resolves to Never (it falls back to the type's
// default mode, or Immediate when that is Never too).
func Effective(t TypeDefaults, o *Override, unsubscribed bool) Policy {
	p := Policy{Mode: t.Mode, Window: t.Window, MaxWait: t.MaxWait, Lead: t.Lead}
	if o != nil {
		if o.Mode != "" {
			p.Mode = o.Mode
		}
		if o.Window != nil && *o.Window > 0 {
			p.Window = *o.Window
		}
		if o.MaxWait != nil {
			p.MaxWait = *o.MaxWait
		}
		if o.Lead != nil {
			p.Lead = *o.Lead
		}
	}
	if unsubscribed && !t.Required {
		p.Mode = Never
	}
	if t.Required && p.Mode == Never {
		p.Mode = t.Mode
		if p.Mode == Never {
			p.Mode = Immediate
		}
	}
	if p.Mode == Cooldown && p.Window <= 0 {
		p.Window = time.Minute
	}
	return p
}

// CooldownCloses is min(last + window, opened + maxWait); maxWait 0 means
// no cap. Each event moves last, sliding the window; the cap keeps a
// steady trickle from holding a batch forever.
func CooldownCloses(opened, last time.Time, window, maxWait time.Duration) time.Time {
	at := last.Add(window)
	if maxWait > 0 {
		if c := opened.Add(maxWait); c.Before(at) {
			at = c
		}
	}
	return at
}

// atLocal is the instant of local time tod on the calendar day of t in
// loc. Building it with time.Date, rather than adding 24 h, keeps digests
// at the same wall-clock time across daylight-saving switches. A time that
// does not exist that day (02:30 on a spring-forward day) comes out as
// time.Date normalises it (03:30); one that happens twice resolves to the
// first.
func atLocal(t time.Time, loc *time.Location, tod TimeOfDay) time.Time {
	y, m, d := t.In(loc).Date()
	return time.Date(y, m, d, int(tod)/60, int(tod)%60, 0, 0, loc)
}

// NextDaily is the first instant strictly after after that is s.DailyAt
// local time.
func NextDaily(after time.Time, s Schedule) time.Time {
	loc := s.loc()
	for day := 0; day < 3; day++ {
		if at := atLocal(after.In(loc).AddDate(0, 0, day), loc, s.DailyAt); at.After(after) {
			return at
		}
	}
	return atLocal(after.In(loc).AddDate(0, 0, 3), loc, s.DailyAt)
}

// NextWeekly is the first instant strictly after after that is s.WeeklyOn
// at s.WeeklyAt local time.
func NextWeekly(after time.Time, s Schedule) time.Time {
	loc := s.loc()
	local := after.In(loc)
	for day := 0; day <= 8; day++ {
		d := local.AddDate(0, 0, day)
		if d.Weekday() != s.WeeklyOn {
			continue
		}
		if at := atLocal(d, loc, s.WeeklyAt); at.After(after) {
			return at
		}
	}
	return atLocal(local.AddDate(0, 0, 7), loc, s.WeeklyAt)
}

// AfterQuiet moves t to the end of the quiet hours when it falls inside
// them, and returns it unchanged otherwise.
func AfterQuiet(t time.Time, s Schedule) time.Time {
	q := s.Quiet
	if !q.Enabled || q.Start == q.End {
		return t
	}
	loc := s.loc()
	local := t.In(loc)
	now := TimeOfDay(local.Hour()*60 + local.Minute())
	switch {
	case q.Start < q.End && now >= q.Start && now < q.End:
		return atLocal(local, loc, q.End)
	case q.Start > q.End && now >= q.Start:
		return atLocal(local.AddDate(0, 0, 1), loc, q.End)
	case q.Start > q.End && now < q.End:
		return atLocal(local, loc, q.End)
	}
	return t
}

// CloseTime is when a batch in policy p, opened at opened and last joined
// at last, closes, with quiet hours applied.
func CloseTime(p Policy, s Schedule, opened, last time.Time) time.Time {
	var at time.Time
	switch p.Mode {
	case Cooldown:
		at = CooldownCloses(opened, last, p.Window, p.MaxWait)
	case Daily:
		at = NextDaily(opened, s)
	case Weekly:
		at = NextWeekly(opened, s)
	default:
		at = last
	}
	return AfterQuiet(at, s)
}

// BatchKey groups notifications: in Immediate and Cooldown by type plus
// the event's own key ("comment.created+document:7"); digests by period.
func BatchKey(m Mode, typeKey, eventKey string) string {
	switch m {
	case Daily:
		return "digest:daily"
	case Weekly:
		return "digest:weekly"
	}
	if eventKey == "" {
		return typeKey
	}
	return typeKey + "+" + eventKey
}

// BurstPolicy is the short cooldown that a flood of immediate emails falls
// into: the rest of the flood arrives as one email within minutes.
var BurstPolicy = Policy{Mode: Cooldown, Window: time.Minute, MaxWait: 5 * time.Minute}

// Bursting reports whether sentLastMinute immediate emails of one type to
// one recipient already reach limit; limit <= 0 turns the guard off.
func Bursting(sentLastMinute, limit int) bool {
	return limit > 0 && sentLastMinute >= limit
}

// LeadsNow reports whether, under a cooldown with Lead, a notification is
// the first of a quiet period and so goes out at once: no batch is open
// and nothing arrived within the window before now.
func LeadsNow(p Policy, hasOpen bool, lastActivity, now time.Time) bool {
	if p.Mode != Cooldown || !p.Lead || hasOpen {
		return false
	}
	return lastActivity.IsZero() || !now.Before(lastActivity.Add(p.Window))
}

// Describe says in words what a policy does, for the settings page.
func Describe(p Policy, s Schedule) string {
	zone := s.loc().String()
	switch p.Mode {
	case Never:
		return "Nothing by email."
	case Immediate:
		return "An email for each one, as it happens."
	case Cooldown:
		msg := "One email " + humanDuration(p.Window) + " after the last one"
		if p.MaxWait > 0 {
			msg += ", at most " + humanDuration(p.MaxWait) + " after the first"
		}
		if p.Lead {
			msg = "The first one at once; then one email " + humanDuration(p.Window) + " after the last one"
		}
		return msg + "."
	case Daily:
		return fmt.Sprintf("One email a day at %s (%s).", s.DailyAt, zone)
	case Weekly:
		name := WeekdayName(s.WeeklyOn)
		return fmt.Sprintf("One email every %s at %s (%s).", strings.ToUpper(name[:1])+name[1:], s.WeeklyAt, zone)
	}
	return ""
}

func humanDuration(d time.Duration) string {
	plural := func(n int, unit string) string {
		if n == 1 {
			return "1 " + unit
		}
		return strconv.Itoa(n) + " " + unit + "s"
	}
	switch {
	case d >= time.Hour && d%time.Hour == 0:
		return plural(int(d/time.Hour), "hour")
	case d >= time.Minute && d%time.Minute == 0:
		return plural(int(d/time.Minute), "minute")
	}
	return plural(int(d/time.Second), "second")
}
