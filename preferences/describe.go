package preferences

import (
	"strings"
	"time"

	"github.com/lull-dev/lull/i18n"
)

// Describe says in English what will happen under policy p and schedule
// s; DescribeIn says it in a recipient's language. The operator console
// and the tests read the English:
//
//	Nothing by email.
//	An email for each one, as it happens.
//	You'll get one email 5 minutes after the last one, at most 1 hour after the first.
//	One email a day at 08:00 (Europe/Berlin).
//	One email every Monday at 08:00 (UTC).
func Describe(p Policy, s Schedule) string { return DescribeIn(i18n.Locale{}, p, s) }

// DescribeIn words p and s in l's language for the settings page, so a
// recipient sees the consequence of a choice and not only its
// parameters. The sentences are whole catalog entries (describe_*), so
// each language orders its own words.
//
// It is built from the same rules as CloseTime, so it cannot promise what
// the engine does not do: a cooldown whose max wait is no longer than its
// window is described as the fixed window it is, Lead as "the first one at
// once", and quiet hours as the time things actually go out. It returns
// "" for a mode it does not know.
func DescribeIn(l i18n.Locale, p Policy, s Schedule) string {
	zone := s.location().String()
	switch p.Mode {
	case Never:
		return l.T("describe_never", nil)
	case Immediate:
		return l.T("describe_immediate", nil) + quietNote(l, s)
	case Cooldown:
		return describeCooldown(l, p) + quietNote(l, s)
	case Daily:
		at, _ := quietShift(s.DailyAt, s.Quiet)
		return l.T("describe_daily"+quietSuffix(s.DailyAt, s.Quiet), map[string]any{"Time": at.String(), "Zone": zone})
	case Weekly:
		at, nextDay := quietShift(s.WeeklyAt, s.Quiet)
		days := s.WeeklyDaySet()
		if nextDay {
			// Rotate the set a day on, keeping the week's order.
			days = (days<<1 | days>>6) & allDays
		}
		var names []string
		for _, d := range days.Days() {
			names = append(names, l.Weekday(d))
		}
		return l.T("describe_weekly"+quietSuffix(s.WeeklyAt, s.Quiet),
			map[string]any{"Days": l.List(names, 0), "Time": at.String(), "Zone": zone})
	case Hourly:
		return describeHourly(l, s) + quietNote(l, s)
	case Monthly:
		at, nextDay := quietShift(s.MonthlyAt, s.Quiet)
		// Quiet hours past midnight move it to the next day (the 1st
		// after day 31), which the weekly days say by naming it.
		key := "describe_month_day"
		if nextDay {
			key = "describe_month_day_after"
		}
		if s.MonthlyDay >= 29 {
			key += "_short"
		}
		day := l.T(key, map[string]any{"Day": l.Number(min(max(s.MonthlyDay, 1), 31))})
		return l.T("describe_monthly"+quietSuffix(s.MonthlyAt, s.Quiet), map[string]any{"Day": day, "Time": at.String(), "Zone": zone})
	}
	return ""
}

// describeHourly counts the emails a day as they go out: the slots inside
// the quiet hours all leave together when those end, so they are one. A
// grid of every hour names its minute rather than 24 times.
func describeHourly(l i18n.Locale, s Schedule) string {
	slots := s.HourlyTimes()
	sent := map[TimeOfDay]bool{}
	var times []string
	for _, t := range slots {
		at, _ := quietShift(t, s.Quiet)
		sent[at] = true
		times = append(times, t.String())
	}
	data := map[string]any{"Zone": s.location().String()}
	switch {
	case len(slots) == 24 && slots[0] == 0:
		return l.N("describe_hourly_on_the_hour", len(sent), data)
	case len(slots) == 24:
		data["Minutes"] = l.N("describe_minutes", slots[0].minutes(), nil)
		return l.N("describe_hourly_past", len(sent), data)
	}
	data["Period"] = HumanDuration(l, time.Duration(24/len(slots))*time.Hour)
	data["Times"] = l.List(times, 0)
	return l.N("describe_hourly", len(sent), data)
}

// describeCooldown words CooldownCloses: with a cap no longer than the
// window the cap always decides, so the batch is a fixed window counted
// from the first notification.
func describeCooldown(l i18n.Locale, p Policy) string {
	key, data := "describe_cooldown", map[string]any{"Window": HumanDuration(l, p.Window)}
	switch {
	case p.MaxWait > 0 && p.MaxWait <= p.Window:
		key, data["Window"] = "describe_cooldown_fixed", HumanDuration(l, p.MaxWait)
	case p.MaxWait > 0:
		key, data["MaxWait"] = "describe_cooldown_capped", HumanDuration(l, p.MaxWait)
	}
	if p.Lead {
		key = strings.Replace(key, "cooldown", "lead", 1)
	}
	return l.T(key, data)
}

// quietNote tells a recipient whose email can go out at any time that
// their quiet hours hold it back. It starts with its own separator, as
// the language puts one between sentences.
func quietNote(l i18n.Locale, s Schedule) string {
	if !s.Quiet.active() {
		return ""
	}
	return l.T("describe_quiet_note", map[string]any{"Start": s.Quiet.Start.String(), "End": s.Quiet.End.String()})
}

// quietShift is the local time a digest set for tod really goes out, and
// whether that is on the next day: tod itself, or the end of the quiet
// hours when tod falls inside them (as AfterQuiet moves it).
func quietShift(tod TimeOfDay, q QuietHours) (TimeOfDay, bool) {
	inside, tomorrow := q.holds(tod)
	if !inside {
		return TimeOfDay(tod.minutes()), false
	}
	return TimeOfDay(q.End.minutes()), tomorrow
}

// quietSuffix picks the sentence for a digest time that is not the one
// the recipient chose, because quiet hours hold it until they end.
func quietSuffix(tod TimeOfDay, q QuietHours) string {
	if inside, _ := q.holds(tod); inside {
		return "_quiet"
	}
	return ""
}

// HumanDuration writes d in the largest whole unit ("5 minutes", "1 hour",
// "90 seconds"), which covers every preset and reads better than "1h30m";
// the settings page words its choices of a wait with it.
func HumanDuration(l i18n.Locale, d time.Duration) string {
	switch {
	case d >= time.Hour && d%time.Hour == 0:
		return l.N("describe_hours", int(d/time.Hour), nil)
	case d >= time.Minute && d%time.Minute == 0:
		return l.N("describe_minutes", int(d/time.Minute), nil)
	case d%time.Second == 0:
		return l.N("describe_seconds", int(d/time.Second), nil)
	}
	return d.String()
}
