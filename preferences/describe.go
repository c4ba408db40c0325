package preferences

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Describe says in words what will happen under policy p and schedule s,
// for the settings page, so a recipient sees the consequence of a choice
// and not only its parameters:
//
//	Nothing by email.
//	An email for each one, as it happens.
//	You'll get one email 5 minutes after the last one, at most 1 hour after the first.
//	One email a day at 08:00 (Europe/Berlin).
//	One email every Monday at 08:00 (UTC).
//
// It is built from the same rules as CloseTime, so it cannot promise what
// the engine does not do: a cooldown whose max wait is no longer than its
// window is described as the fixed window it is, Lead as "the first one at
// once", and quiet hours as the time things actually go out. Describe
// returns "" for a mode it does not know.
func Describe(p Policy, s Schedule) string {
	switch p.Mode {
	case Never:
		return "Nothing by email."
	case Immediate:
		return "An email for each one, as it happens." + quietNote(s)
	case Cooldown:
		return describeCooldown(p) + quietNote(s)
	case Daily:
		at, _ := quietShift(s.DailyAt, s.Quiet)
		return fmt.Sprintf("One email a day at %s (%s)%s.", at, s.location(), whenQuietEnds(s.DailyAt, s.Quiet))
	case Weekly:
		at, nextDay := quietShift(s.WeeklyAt, s.Quiet)
		days := s.WeeklyDaySet()
		if nextDay {
			// Rotate the set a day on, keeping the week's order.
			days = (days<<1 | days>>6) & allDays
		}
		var names []string
		for _, d := range days.Days() {
			names = append(names, capitalize(WeekdayName(d)))
		}
		return fmt.Sprintf("One email every %s at %s (%s)%s.", joinAnd(names), at, s.location(), whenQuietEnds(s.WeeklyAt, s.Quiet))
	case Hourly:
		return describeHourly(s) + quietNote(s)
	case Monthly:
		at, nextDay := quietShift(s.MonthlyAt, s.Quiet)
		day := fmt.Sprintf("on day %d", min(max(s.MonthlyDay, 1), 31))
		if nextDay {
			// Quiet hours past midnight move it to the next day (the 1st
			// after day 31), which the weekly days say by naming it.
			day = "the day after day" + strings.TrimPrefix(day, "on day")
		}
		if s.MonthlyDay >= 29 {
			day += " (the last day in shorter months)"
		}
		return fmt.Sprintf("One email a month, %s at %s (%s)%s.", day, at, s.location(), whenQuietEnds(s.MonthlyAt, s.Quiet))
	}
	return ""
}

// describeHourly counts the emails a day as they go out: the slots inside
// the quiet hours all leave together when those end, so they are one. A
// grid of every hour names its minute rather than 24 times.
func describeHourly(s Schedule) string {
	slots := s.HourlyTimes()
	sent := map[TimeOfDay]bool{}
	var times []string
	for _, t := range slots {
		at, _ := quietShift(t, s.Quiet)
		sent[at] = true
		times = append(times, t.String())
	}
	when := "every " + humanDuration(time.Duration(24/len(slots))*time.Hour) + " at " + joinAnd(times)
	if len(slots) == 24 {
		when = "every hour at " + plural(int64(slots[0].minutes()), "minute") + " past"
		if slots[0] == 0 {
			when = "every hour on the hour"
		}
	}
	return fmt.Sprintf("Up to %s a day, %s (%s).", plural(int64(len(sent)), "email"), when, s.location())
}

// joinAnd lists words the English way: "a", "a and b", "a, b and c".
func joinAnd(words []string) string {
	if len(words) < 2 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " and " + words[len(words)-1]
}

// describeCooldown words CooldownCloses: with a cap no longer than the
// window the cap always decides, so the batch is a fixed window counted
// from the first notification.
func describeCooldown(p Policy) string {
	var what string
	switch {
	case p.MaxWait > 0 && p.MaxWait <= p.Window:
		what = "one email " + humanDuration(p.MaxWait) + " after the first one"
	case p.MaxWait > 0:
		what = "one email " + humanDuration(p.Window) + " after the last one, at most " + humanDuration(p.MaxWait) + " after the first"
	default:
		what = "one email " + humanDuration(p.Window) + " after the last one"
	}
	if p.Lead {
		return "The first one at once; after that, " + what + "."
	}
	return "You'll get " + what + "."
}

// quietNote tells a recipient whose email can go out at any time that
// their quiet hours hold it back.
func quietNote(s Schedule) string {
	if !s.Quiet.active() {
		return ""
	}
	return fmt.Sprintf(" During your quiet hours (%s to %s) it waits until %s.", s.Quiet.Start, s.Quiet.End, s.Quiet.End)
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

// whenQuietEnds explains a digest time that is not the one the recipient
// chose.
func whenQuietEnds(tod TimeOfDay, q QuietHours) string {
	if inside, _ := q.holds(tod); inside {
		return ", when your quiet hours end"
	}
	return ""
}

// humanDuration writes d in the largest whole unit ("5 minutes", "1 hour",
// "90 seconds"), which covers every preset and reads better than "1h30m".
func humanDuration(d time.Duration) string {
	switch {
	case d >= time.Hour && d%time.Hour == 0:
		return plural(int64(d/time.Hour), "hour")
	case d >= time.Minute && d%time.Minute == 0:
		return plural(int64(d/time.Minute), "minute")
	case d%time.Second == 0:
		return plural(int64(d/time.Second), "second")
	}
	return d.String()
}

func plural(n int64, unit string) string {
	if n == 1 {
		return "1 " + unit
	}
	return strconv.FormatInt(n, 10) + " " + unit + "s"
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
