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
	// WeeklyDays, when not empty, are all the days of the weekly digest
	// ("Monday and Thursday"), and WeeklyOn is ignored.
	WeeklyDays WeekdaySet
	// EveryHours is the hourly digest's period: 1, 2, 4, 6 or 12 hours,
	// on the grid through DailyAt (every 4 hours from 08:00: 00:00, 04:00,
	// 08:00, ...). Anything else is read as DefaultEveryHours.
	EveryHours int
	// MonthlyDay and MonthlyAt are the local day (1-31; a day the month
	// lacks means its last day) and time of the monthly digest.
	MonthlyDay int
	MonthlyAt  TimeOfDay
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

// NextWeekly is the first weekly digest strictly after after: the next of
// the weekly days (s.WeeklyDays, or s.WeeklyOn alone) at s.WeeklyAt in
// s.Location, by the same rules as NextDaily. Days are counted on the
// local calendar, so the weekday is the recipient's, not UTC's.
func NextWeekly(after time.Time, s Schedule) time.Time {
	loc := s.location()
	local := after.In(loc)
	y, m, d := local.Date()
	days := s.WeeklyDaySet()
	for i := 0; ; i++ {
		if !days.Has(local.Weekday() + time.Weekday(i)) {
			continue
		}
		if at := localTime(loc, y, m, d+i, s.WeeklyAt); at.After(after) {
			return at
		}
	}
}

// WeeklyDaySet is the set of weekly digest days, never empty.
func (s Schedule) WeeklyDaySet() WeekdaySet {
	if s.WeeklyDays&allDays != 0 {
		return s.WeeklyDays & allDays
	}
	return WeekdaySet(0).With(s.WeeklyOn)
}

// DefaultEveryHours is the hourly digest's period when none is chosen.
const DefaultEveryHours = 4

// EveryHoursChoices are the periods an hourly digest may have: those that
// divide a day, so every day has the same local times.
var EveryHoursChoices = [...]int{1, 2, 4, 6, 12}

// ValidEveryHours reports whether n is one of EveryHoursChoices.
func ValidEveryHours(n int) bool {
	for _, c := range EveryHoursChoices {
		if n == c {
			return true
		}
	}
	return false
}

// HourlyTimes are the local times of the hourly digest, earliest first:
// s.DailyAt and every s.EveryHours hours from it around the clock.
func (s Schedule) HourlyTimes() []TimeOfDay {
	n := s.EveryHours
	if !ValidEveryHours(n) {
		n = DefaultEveryHours
	}
	first := s.DailyAt.minutes() % (n * 60)
	times := make([]TimeOfDay, 0, 24/n)
	for m := first; m < minutesPerDay; m += n * 60 {
		times = append(times, TimeOfDay(m))
	}
	return times
}

// NextHourly is the first hourly digest strictly after after. Its times
// are local wall-clock times (HourlyTimes), each resolved like a daily
// digest's, so "every 4 hours from 08:00" stays at 00, 04, 08, ... local
// across a daylight-saving switch: the spring-forward day skips no slot
// (one lands an hour late, when the clock has jumped), and on the
// fall-back day the repeated hour has no second digest.
func NextHourly(after time.Time, s Schedule) time.Time {
	loc := s.location()
	y, m, d := after.In(loc).Date()
	times := s.HourlyTimes()
	for i := 0; ; i++ {
		for _, tod := range times {
			if at := localTime(loc, y, m, d+i, tod); at.After(after) {
				return at
			}
		}
	}
}

// NextMonthly is the first monthly digest strictly after after: day
// s.MonthlyDay of the month at s.MonthlyAt in s.Location, or the month's
// last day when it has fewer days (31 means "the last day", 30 is the
// 28th or 29th in February), resolved like a daily digest's time.
func NextMonthly(after time.Time, s Schedule) time.Time {
	loc := s.location()
	y, m, _ := after.In(loc).Date()
	day := min(max(s.MonthlyDay, 1), 31)
	for i := 0; ; i++ {
		last := time.Date(y, m+time.Month(i)+1, 0, 12, 0, 0, 0, time.UTC).Day()
		if at := localTime(loc, y, m+time.Month(i), min(day, last), s.MonthlyAt); at.After(after) {
			return at
		}
	}
}

// WeekdaySet is a set of weekdays, bit d for time.Weekday d.
type WeekdaySet uint8

const allDays WeekdaySet = 1<<7 - 1

// With is the set with d added.
func (w WeekdaySet) With(d time.Weekday) WeekdaySet { return w | 1<<weekday(d) }

// Has reports whether d, read modulo a week, is in the set.
func (w WeekdaySet) Has(d time.Weekday) bool { return w&(1<<weekday(d)) != 0 }

// Days are the set's days, Sunday first.
func (w WeekdaySet) Days() []time.Weekday {
	var days []time.Weekday
	for d := time.Sunday; d <= time.Saturday; d++ {
		if w.Has(d) {
			days = append(days, d)
		}
	}
	return days
}

// ParseWeekdays reads a list of weekday names (see ParseWeekday) into a
// set; a day named twice is one day, and an empty list is an error.
func ParseWeekdays(names []string) (WeekdaySet, error) {
	if len(names) == 0 {
		return 0, fmt.Errorf("is empty: name at least one weekday, such as [\"monday\", \"thursday\"]")
	}
	var w WeekdaySet
	for _, n := range names {
		d, err := ParseWeekday(n)
		if err != nil {
			return 0, err
		}
		w = w.With(d)
	}
	return w, nil
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
