package preferences

import (
	"fmt"
	"strings"
	"time"
)

// minutesPerDay bounds a TimeOfDay.
const minutesPerDay = 24 * 60

// TimeOfDay is a local wall-clock time as minutes after midnight, 0..1439.
// It is stored as a smallint: an integer keeps comparisons and quiet-hour
// arithmetic trivial and carries no date or zone to get wrong. A value
// outside 0..1439 (which ParseTimeOfDay never produces) is read modulo one
// day everywhere in this package, so it cannot index out of range or push
// a digest onto another day.
type TimeOfDay int

// minutes is t folded into 0..1439.
func (t TimeOfDay) minutes() int {
	return (int(t)%minutesPerDay + minutesPerDay) % minutesPerDay
}

// ParseTimeOfDay reads a 24-hour "H:MM" or "HH:MM" ("8:05", "08:00",
// "23:59"). It refuses anything else, including "24:00" (that is the next
// day's 00:00), a bare hour ("7"), one-digit minutes ("8:5") and signs or
// spaces ("+8:00"), so what is stored is exactly what the settings page
// shows back.
func ParseTimeOfDay(s string) (TimeOfDay, error) {
	h, m, ok := strings.Cut(s, ":")
	if !ok || len(h) < 1 || len(h) > 2 || len(m) != 2 || !digits(h) || !digits(m) {
		return 0, fmt.Errorf("%q is not a time of day: use HH:MM on a 24-hour clock, such as 08:00", s)
	}
	hh := atoi(h)
	mm := atoi(m)
	if hh > 23 || mm > 59 {
		return 0, fmt.Errorf("%q is not a time of day: hours go from 00 to 23 and minutes from 00 to 59", s)
	}
	return TimeOfDay(hh*60 + mm), nil
}

// digits reports whether s is made only of ASCII digits. strconv.Atoi
// alone would accept "+8".
func digits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// atoi reads at most two ASCII digits already checked by digits.
func atoi(s string) int {
	n := 0
	for i := 0; i < len(s); i++ {
		n = n*10 + int(s[i]-'0')
	}
	return n
}

// String formats t as "HH:MM", the form ParseTimeOfDay reads and the API
// returns.
func (t TimeOfDay) String() string {
	m := t.minutes()
	return fmt.Sprintf("%02d:%02d", m/60, m%60)
}

var weekdayNames = [7]string{"sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday"}

// ParseWeekday reads an English weekday name, full ("monday") or three
// letters ("mon"), in any case and with surrounding spaces ignored: the
// result is a time.Weekday, so how it was spelled is never stored.
func ParseWeekday(s string) (time.Weekday, error) {
	l := strings.ToLower(strings.TrimSpace(s))
	for i, name := range weekdayNames {
		if l == name || (len(l) == 3 && strings.HasPrefix(name, l)) {
			return time.Weekday(i), nil
		}
	}
	return 0, fmt.Errorf("%q is not a weekday: use monday, tuesday, ... sunday", s)
}

// WeekdayName is the lowercase English name of d ("monday"), the spelling
// the API and the settings form use. Out-of-range values are read modulo a
// week, like NextWeekly reads them, so the name shown matches the digest.
func WeekdayName(d time.Weekday) string { return weekdayNames[weekday(d)] }

// weekday folds d into Sunday..Saturday.
func weekday(d time.Weekday) time.Weekday { return (d%7 + 7) % 7 }

// QuietHours is a recipient's local time range [Start, End) in which no
// batch closes; one that would is held until End. The range may wrap
// midnight (22:00-07:00). Start == End is an empty range, not a whole day,
// so a recipient cannot accidentally hold every email forever.
type QuietHours struct {
	Start, End TimeOfDay
	Enabled    bool
}

// active reports whether the quiet hours can hold anything.
func (q QuietHours) active() bool {
	return q.Enabled && q.Start.minutes() != q.End.minutes()
}

// holds reports whether local wall-clock time tod is inside the quiet
// hours, and if so whether they end on the next calendar day.
func (q QuietHours) holds(tod TimeOfDay) (inside, endsTomorrow bool) {
	if !q.active() {
		return false, false
	}
	start, end, now := q.Start.minutes(), q.End.minutes(), tod.minutes()
	if start < end {
		return now >= start && now < end, false
	}
	// Wrapping midnight: from start until midnight, then until end.
	if now >= start {
		return true, true
	}
	return now < end, false
}

// Schedule is a recipient's calendar: where they are, when their digests
// go out and when they do not want email.
type Schedule struct {
	// Location is the recipient's IANA zone; nil means UTC.
	Location *time.Location
	// DailyAt is the local time of the daily digest.
	DailyAt TimeOfDay
	// WeeklyOn and WeeklyAt are the local day and time of the weekly digest.
	WeeklyOn time.Weekday
	WeeklyAt TimeOfDay
	// Quiet are the recipient's quiet hours, if any.
	Quiet QuietHours
}

func (s Schedule) location() *time.Location {
	if s.Location == nil {
		return time.UTC
	}
	return s.Location
}

// wallClock is the reading of t's clock in its own location, as a UTC
// time, so wall-clock readings can be compared and shifted with ordinary
// time arithmetic.
func wallClock(t time.Time) time.Time {
	_, off := t.Zone()
	return t.UTC().Add(time.Duration(off) * time.Second)
}

// localTime is the instant at which the clock in loc reads tod on the
// calendar day y-m-d (d may overflow the month; it is normalised like
// time.Date does).
//
// Digests are built this way, date by date with the zone's rules, and never
// by adding 24 h, so a daily 08:00 stays 08:00 local across a
// daylight-saving switch. Two wall-clock readings need a rule, and
// time.Date does not give a stable one (its answer depends on the sign of
// the zone's offset), so this function fixes it:
//
//   - a time that does not exist that day (02:30 in Europe/Berlin or
//     America/New_York on the spring-forward day) moves forward by the
//     length of the gap, to 03:30: the same as time.Date gives in Berlin,
//     and never earlier than asked;
//   - a time that occurs twice (02:30 in Berlin, 01:30 in New York on the
//     fall-back day) is its first occurrence, so a digest goes out once, at
//     the first moment the clock shows its time.
func localTime(loc *time.Location, y int, m time.Month, d int, tod TimeOfDay) time.Time {
	mins := tod.minutes()
	want := time.Date(y, m, d, mins/60, mins%60, 0, 0, time.UTC)
	y, m, d = want.Date()
	t := time.Date(y, m, d, mins/60, mins%60, 0, 0, loc)

	if wallClock(t).Equal(want) {
		// The time exists; if the offset just before t's zone period was
		// larger (a fall-back), the same reading also occurred in it.
		start, _ := t.ZoneBounds()
		if start.IsZero() {
			return t
		}
		_, off := t.Zone()
		_, prev := start.Add(-time.Nanosecond).Zone()
		if prev > off {
			if first := want.Add(-time.Duration(prev) * time.Second); first.Before(start) {
				return first.In(loc)
			}
		}
		return t
	}

	// The time falls into a gap. time.Date resolved it with one of the two
	// offsets around the gap; find the transition next to t and apply the
	// offset from before it, which reads the time as if the clock had not
	// yet been put forward, landing the gap's length later.
	start, end := t.ZoneBounds()
	transition := end
	if wallClock(t).After(want) {
		transition = start
	}
	_, before := transition.Add(-time.Nanosecond).Zone()
	return want.Add(-time.Duration(before) * time.Second).In(loc)
}

// NextDaily is the first daily digest strictly after after: the day's
// s.DailyAt in s.Location, resolved as localTime describes. "Strictly"
// matters: a digest batch opened at exactly 08:00 belongs to tomorrow's
// digest, not to the one that has just been sent. On a fall-back day the
// digest time is its first occurrence, so an after between the two
// occurrences gets the next day's digest, and no day has two.
func NextDaily(after time.Time, s Schedule) time.Time {
	loc := s.location()
	y, m, d := after.In(loc).Date()
	// Today's digest or tomorrow's is the answer; the loop only guards
	// against zones that skip a whole calendar day.
	for i := 0; ; i++ {
		if at := localTime(loc, y, m, d+i, s.DailyAt); at.After(after) {
			return at
		}
	}
}

// NextWeekly is the first weekly digest strictly after after: the next
// s.WeeklyOn at s.WeeklyAt in s.Location, by the same rules as NextDaily.
// Days are counted on the local calendar, so the weekday is the
// recipient's, not UTC's.
func NextWeekly(after time.Time, s Schedule) time.Time {
	loc := s.location()
	local := after.In(loc)
	y, m, d := local.Date()
	days := int(weekday(s.WeeklyOn)-local.Weekday()+7) % 7
	for ; ; days += 7 {
		if at := localTime(loc, y, m, d+days, s.WeeklyAt); at.After(after) {
			return at
		}
	}
}

// AfterQuiet is t when t falls outside the recipient's quiet hours, and the
// instant they end otherwise (their local End, on the next day when they
// wrap midnight and t is before it). Quiet hours are read on the local wall
// clock to the minute: 06:59:30 is inside 22:00-07:00, 07:00 is outside.
// The end is resolved like a digest time (localTime), except that on a
// fall-back night when t is already past End's first occurrence, the end
// is its second occurrence. The result is never earlier than t.
func AfterQuiet(t time.Time, s Schedule) time.Time {
	if !s.Quiet.active() {
		return t
	}
	loc := s.location()
	local := t.In(loc)
	inside, tomorrow := s.Quiet.holds(TimeOfDay(local.Hour()*60 + local.Minute()))
	if !inside {
		return t
	}
	y, m, d := local.Date()
	if tomorrow {
		d++
	}
	end := localTime(loc, y, m, d, s.Quiet.End)
	if end.After(t) {
		return end
	}
	// t is in the repeated hour of a fall-back night, after the first
	// occurrence of End: the quiet hours end at its second occurrence,
	// which has t's offset.
	_, off := local.Zone()
	mins := s.Quiet.End.minutes()
	want := time.Date(y, m, d, mins/60, mins%60, 0, 0, time.UTC)
	second := want.Add(-time.Duration(off) * time.Second).In(loc)
	if second.After(t) && wallClock(second).Equal(want) {
		return second
	}
	return t
}
