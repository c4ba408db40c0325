package preferences

import (
	"strings"
	"testing"
	"time"
)

// The daylight-saving switches these tests walk through, 2026:
//
//	Europe/Berlin     spring 29 Mar 01:00 UTC (02:00 CET -> 03:00 CEST)
//	                  fall   25 Oct 01:00 UTC (03:00 CEST -> 02:00 CET)
//	America/New_York  spring  8 Mar 07:00 UTC (02:00 EST -> 03:00 EDT)
//	                  fall    1 Nov 06:00 UTC (02:00 EDT -> 01:00 EST)
//	Asia/Kolkata      none; UTC+5:30 all year.

// localFormat shows the wall clock and the zone abbreviation, so a result
// on the right clock time but the wrong side of a switch is visible.
const localFormat = "Mon 2006-01-02 15:04 MST"

func zone(tb testing.TB, name string) *time.Location {
	tb.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		tb.Fatal(err)
	}
	return loc
}

func utc(y int, m time.Month, d, h, mi int) time.Time {
	return time.Date(y, m, d, h, mi, 0, 0, time.UTC)
}

func tod(tb testing.TB, s string) TimeOfDay {
	tb.Helper()
	t, err := ParseTimeOfDay(s)
	if err != nil {
		tb.Fatal(err)
	}
	return t
}

func TestNextDaily(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		zone      string
		after     time.Time
		at        string
		wantLocal string
		wantUTC   time.Time
	}{
		{"BerlinSameDay", "Europe/Berlin", utc(2026, 3, 28, 5, 0), "08:00", "Sat 2026-03-28 08:00 CET", utc(2026, 3, 28, 7, 0)},
		{"BerlinIntoSpringForward", "Europe/Berlin", utc(2026, 3, 28, 9, 0), "08:00", "Sun 2026-03-29 08:00 CEST", utc(2026, 3, 29, 6, 0)},
		{"BerlinAfterSpringForward", "Europe/Berlin", utc(2026, 3, 29, 7, 0), "08:00", "Mon 2026-03-30 08:00 CEST", utc(2026, 3, 30, 6, 0)},
		{"BerlinIntoFallBack", "Europe/Berlin", utc(2026, 10, 24, 7, 0), "08:00", "Sun 2026-10-25 08:00 CET", utc(2026, 10, 25, 7, 0)},
		{"BerlinAfterFallBack", "Europe/Berlin", utc(2026, 10, 25, 8, 0), "08:00", "Mon 2026-10-26 08:00 CET", utc(2026, 10, 26, 7, 0)},
		// 02:30 does not exist on 29 Mar in Berlin: it moves forward by the
		// gap to 03:30.
		{"BerlinMissingTime", "Europe/Berlin", utc(2026, 3, 28, 12, 0), "02:30", "Sun 2026-03-29 03:30 CEST", utc(2026, 3, 29, 1, 30)},
		// 02:30 happens twice on 25 Oct in Berlin: the first one counts
		// (time.Date alone would give the second).
		{"BerlinRepeatedTime", "Europe/Berlin", utc(2026, 10, 24, 12, 0), "02:30", "Sun 2026-10-25 02:30 CEST", utc(2026, 10, 25, 0, 30)},
		// Between the two 02:30s that day's digest has gone: the next day.
		{"BerlinBetweenRepeats", "Europe/Berlin", utc(2026, 10, 25, 1, 0), "02:30", "Mon 2026-10-26 02:30 CET", utc(2026, 10, 26, 1, 30)},
		{"NewYorkIntoSpringForward", "America/New_York", utc(2026, 3, 7, 14, 0), "08:00", "Sun 2026-03-08 08:00 EDT", utc(2026, 3, 8, 12, 0)},
		{"NewYorkIntoFallBack", "America/New_York", utc(2026, 10, 31, 14, 0), "08:00", "Sun 2026-11-01 08:00 EST", utc(2026, 11, 1, 13, 0)},
		// In New York time.Date puts a missing 02:30 at 01:30; the rule is
		// forward, the same in every zone.
		{"NewYorkMissingTime", "America/New_York", utc(2026, 3, 7, 14, 0), "02:30", "Sun 2026-03-08 03:30 EDT", utc(2026, 3, 8, 7, 30)},
		{"NewYorkRepeatedTime", "America/New_York", utc(2026, 10, 31, 14, 0), "01:30", "Sun 2026-11-01 01:30 EDT", utc(2026, 11, 1, 5, 30)},
		// 22:00 on 22 Nov in New York is already 23 Nov in UTC: the local
		// date decides.
		{"NewYorkLocalDateBehindUTC", "America/New_York", utc(2026, 11, 23, 3, 0), "23:00", "Sun 2026-11-22 23:00 EST", utc(2026, 11, 23, 4, 0)},
		{"Kolkata", "Asia/Kolkata", utc(2026, 11, 22, 2, 0), "08:00", "Sun 2026-11-22 08:00 IST", utc(2026, 11, 22, 2, 30)},
		{"KolkataPassed", "Asia/Kolkata", utc(2026, 11, 22, 3, 0), "08:00", "Mon 2026-11-23 08:00 IST", utc(2026, 11, 23, 2, 30)},
		{"KolkataExactlyAtMidnight", "Asia/Kolkata", utc(2026, 11, 22, 18, 30), "00:00", "Tue 2026-11-24 00:00 IST", utc(2026, 11, 23, 18, 30)},
		{"ExactlyAtDigestTime", "Europe/Berlin", utc(2026, 11, 23, 7, 0), "08:00", "Tue 2026-11-24 08:00 CET", utc(2026, 11, 24, 7, 0)},
		{"JustBeforeDigestTime", "Europe/Berlin", utc(2026, 11, 23, 7, 0).Add(-time.Nanosecond), "08:00", "Mon 2026-11-23 08:00 CET", utc(2026, 11, 23, 7, 0)},
		{"LastMinuteOfDay", "UTC", utc(2026, 12, 31, 23, 59), "23:59", "Fri 2027-01-01 23:59 UTC", utc(2027, 1, 1, 23, 59)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			loc := zone(t, tc.zone)
			got := NextDaily(tc.after, Schedule{Location: loc, DailyAt: tod(t, tc.at)})
			if l := got.In(loc).Format(localFormat); l != tc.wantLocal {
				t.Errorf("local %s, want %s", l, tc.wantLocal)
			}
			if !got.Equal(tc.wantUTC) {
				t.Errorf("UTC %s, want %s", got.UTC().Format(localFormat), tc.wantUTC.Format(localFormat))
			}
		})
	}
}

func TestNextDailyNilLocationIsUTC(t *testing.T) {
	t.Parallel()
	got := NextDaily(utc(2026, 11, 22, 9, 0), Schedule{DailyAt: 8 * 60})
	if !got.Equal(utc(2026, 11, 23, 8, 0)) {
		t.Fatalf("got %v, want 2026-11-23 08:00 UTC", got)
	}
}

// Walking a whole year digest by digest must give one digest per local
// calendar day, each at the chosen wall-clock time; adding 24 h instead of
// building each date in the zone fails this on the day after each switch.
func TestNextDailyWalksAYear(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, zone, at string
		// shifted is the one local date, if any, on which the time does
		// not exist and the digest goes out at shiftedTo instead.
		shifted, shiftedTo string
	}{
		{name: "Berlin", zone: "Europe/Berlin", at: "08:00"},
		{name: "NewYork", zone: "America/New_York", at: "08:00"},
		{name: "Kolkata", zone: "Asia/Kolkata", at: "08:00"},
		{name: "BerlinAtMissingTime", zone: "Europe/Berlin", at: "02:30", shifted: "2026-03-29", shiftedTo: "03:30"},
		{name: "NewYorkAtMissingTime", zone: "America/New_York", at: "02:30", shifted: "2026-03-08", shiftedTo: "03:30"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			loc := zone(t, tc.zone)
			s := Schedule{Location: loc, DailyAt: tod(t, tc.at)}
			prev := time.Date(2025, 12, 31, 12, 0, 0, 0, loc)
			for day := 1; day <= 365; day++ {
				got := NextDaily(prev, s)
				wantDate := time.Date(2026, 1, day, 0, 0, 0, 0, time.UTC).Format("2006-01-02")
				wantClock := tc.at
				if wantDate == tc.shifted {
					wantClock = tc.shiftedTo
				}
				local := got.In(loc)
				if local.Format("2006-01-02") != wantDate || local.Format("15:04") != wantClock {
					t.Fatalf("digest %d after %s: got %s, want %s %s", day, prev.In(loc).Format(localFormat), local.Format(localFormat), wantDate, wantClock)
				}
				prev = got
			}
		})
	}
}

func TestNextWeekly(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		zone      string
		after     time.Time
		on        time.Weekday
		at        string
		wantLocal string
		wantUTC   time.Time
	}{
		{"BerlinAcrossSpringForward", "Europe/Berlin", utc(2026, 3, 27, 12, 0), time.Monday, "08:00", "Mon 2026-03-30 08:00 CEST", utc(2026, 3, 30, 6, 0)},
		{"BerlinAcrossFallBack", "Europe/Berlin", utc(2026, 10, 23, 12, 0), time.Monday, "08:00", "Mon 2026-10-26 08:00 CET", utc(2026, 10, 26, 7, 0)},
		{"BerlinOnSpringForwardDay", "Europe/Berlin", utc(2026, 3, 28, 12, 0), time.Sunday, "08:00", "Sun 2026-03-29 08:00 CEST", utc(2026, 3, 29, 6, 0)},
		{"BerlinOnFallBackDay", "Europe/Berlin", utc(2026, 10, 24, 12, 0), time.Sunday, "08:00", "Sun 2026-10-25 08:00 CET", utc(2026, 10, 25, 7, 0)},
		{"NewYorkOnSpringForwardDay", "America/New_York", utc(2026, 3, 6, 12, 0), time.Sunday, "09:00", "Sun 2026-03-08 09:00 EDT", utc(2026, 3, 8, 13, 0)},
		{"NewYorkOnFallBackDay", "America/New_York", utc(2026, 10, 30, 12, 0), time.Sunday, "09:00", "Sun 2026-11-01 09:00 EST", utc(2026, 11, 1, 14, 0)},
		{"NewYorkMissingTime", "America/New_York", utc(2026, 3, 6, 12, 0), time.Sunday, "02:30", "Sun 2026-03-08 03:30 EDT", utc(2026, 3, 8, 7, 30)},
		// Sunday 22:00 in New York is Monday in UTC: the local weekday decides.
		{"NewYorkLocalWeekdayBehindUTC", "America/New_York", utc(2026, 11, 23, 3, 0), time.Sunday, "23:00", "Sun 2026-11-22 23:00 EST", utc(2026, 11, 23, 4, 0)},
		{"Kolkata", "Asia/Kolkata", utc(2026, 11, 20, 12, 0), time.Monday, "08:00", "Mon 2026-11-23 08:00 IST", utc(2026, 11, 23, 2, 30)},
		{"SameDayBeforeTime", "Europe/Berlin", utc(2026, 11, 23, 5, 0), time.Monday, "08:00", "Mon 2026-11-23 08:00 CET", utc(2026, 11, 23, 7, 0)},
		{"SameDayAfterTime", "Europe/Berlin", utc(2026, 11, 23, 8, 0), time.Monday, "08:00", "Mon 2026-11-30 08:00 CET", utc(2026, 11, 30, 7, 0)},
		{"ExactlyAtDigestTime", "Europe/Berlin", utc(2026, 10, 26, 7, 0), time.Monday, "08:00", "Mon 2026-11-02 08:00 CET", utc(2026, 11, 2, 7, 0)},
		{"Saturday", "UTC", utc(2026, 11, 22, 12, 0), time.Saturday, "18:00", "Sat 2026-11-28 18:00 UTC", utc(2026, 11, 28, 18, 0)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			loc := zone(t, tc.zone)
			got := NextWeekly(tc.after, Schedule{Location: loc, WeeklyOn: tc.on, WeeklyAt: tod(t, tc.at)})
			if l := got.In(loc).Format(localFormat); l != tc.wantLocal {
				t.Errorf("local %s, want %s", l, tc.wantLocal)
			}
			if !got.Equal(tc.wantUTC) {
				t.Errorf("UTC %s, want %s", got.UTC().Format(localFormat), tc.wantUTC.Format(localFormat))
			}
		})
	}
}

func TestNextWeeklyWalksAYear(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"Europe/Berlin", "America/New_York", "Asia/Kolkata"} {
		t.Run(name[strings.LastIndex(name, "/")+1:], func(t *testing.T) {
			t.Parallel()
			loc := zone(t, name)
			s := Schedule{Location: loc, WeeklyOn: time.Monday, WeeklyAt: 8 * 60}
			prev := time.Date(2026, 1, 1, 12, 0, 0, 0, loc) // a Thursday
			for week := 0; week < 53; week++ {
				got := NextWeekly(prev, s)
				want := time.Date(2026, 1, 5+7*week, 8, 0, 0, 0, loc).Format(localFormat)
				if l := got.In(loc).Format(localFormat); l != want {
					t.Fatalf("week %d: got %s, want %s", week, l, want)
				}
				prev = got
			}
		})
	}
}

func TestAfterQuiet(t *testing.T) {
	t.Parallel()
	tokyo := zone(t, "Asia/Tokyo")
	berlin := zone(t, "Europe/Berlin")
	newYork := zone(t, "America/New_York")
	quiet := func(loc *time.Location, start, end TimeOfDay) Schedule {
		return Schedule{Location: loc, Quiet: QuietHours{Start: start, End: end, Enabled: true}}
	}
	night := quiet(tokyo, 22*60, 7*60)
	lunch := quiet(tokyo, 12*60, 13*60)
	at := func(loc *time.Location, mo time.Month, d, h, mi, s int) time.Time {
		return time.Date(2026, mo, d, h, mi, s, 0, loc)
	}
	cases := []struct {
		name      string
		s         Schedule
		in        time.Time
		wantLocal string
		wantUTC   time.Time
	}{
		{"WrappingBeforeMidnight", night, at(tokyo, 11, 22, 23, 30, 0), "Mon 2026-11-23 07:00 JST", utc(2026, 11, 22, 22, 0)},
		{"WrappingAfterMidnight", night, at(tokyo, 11, 23, 3, 0, 0), "Mon 2026-11-23 07:00 JST", utc(2026, 11, 22, 22, 0)},
		{"WrappingAtStart", night, at(tokyo, 11, 22, 22, 0, 0), "Mon 2026-11-23 07:00 JST", utc(2026, 11, 22, 22, 0)},
		{"WrappingLastSecond", night, at(tokyo, 11, 23, 6, 59, 59), "Mon 2026-11-23 07:00 JST", utc(2026, 11, 22, 22, 0)},
		{"WrappingAtEndIsOutside", night, at(tokyo, 11, 23, 7, 0, 0), "Mon 2026-11-23 07:00 JST", utc(2026, 11, 22, 22, 0)},
		{"WrappingJustBeforeStart", night, at(tokyo, 11, 22, 21, 59, 59), "Sun 2026-11-22 21:59 JST", utc(2026, 11, 22, 12, 59).Add(59 * time.Second)},
		{"WrappingDaytime", night, at(tokyo, 11, 22, 15, 0, 0), "Sun 2026-11-22 15:00 JST", utc(2026, 11, 22, 6, 0)},
		{"NotWrappingInside", lunch, at(tokyo, 11, 22, 12, 30, 0), "Sun 2026-11-22 13:00 JST", utc(2026, 11, 22, 4, 0)},
		{"NotWrappingAtStart", lunch, at(tokyo, 11, 22, 12, 0, 0), "Sun 2026-11-22 13:00 JST", utc(2026, 11, 22, 4, 0)},
		{"NotWrappingAtEndIsOutside", lunch, at(tokyo, 11, 22, 13, 0, 0), "Sun 2026-11-22 13:00 JST", utc(2026, 11, 22, 4, 0)},
		{"NotWrappingBefore", lunch, at(tokyo, 11, 22, 11, 59, 0), "Sun 2026-11-22 11:59 JST", utc(2026, 11, 22, 2, 59)},
		{"NotWrappingLateEvening", lunch, at(tokyo, 11, 22, 23, 0, 0), "Sun 2026-11-22 23:00 JST", utc(2026, 11, 22, 14, 0)},
		{"Disabled", Schedule{Location: tokyo, Quiet: QuietHours{Start: 22 * 60, End: 7 * 60}}, at(tokyo, 11, 22, 23, 30, 0), "Sun 2026-11-22 23:30 JST", utc(2026, 11, 22, 14, 30)},
		{"StartEqualsEndIsNone", quiet(tokyo, 22*60, 22*60), at(tokyo, 11, 22, 22, 30, 0), "Sun 2026-11-22 22:30 JST", utc(2026, 11, 22, 13, 30)},
		// The night the clocks go forward is an hour shorter: 07:00 local
		// is 7 h after 23:00, not 8.
		{"BerlinSpringForwardNight", quiet(berlin, 22*60, 7*60), at(berlin, 3, 28, 23, 0, 0), "Sun 2026-03-29 07:00 CEST", utc(2026, 3, 29, 5, 0)},
		{"BerlinFallBackNight", quiet(berlin, 22*60, 7*60), at(berlin, 10, 24, 23, 0, 0), "Sun 2026-10-25 07:00 CET", utc(2026, 10, 25, 6, 0)},
		// Quiet hours ending at a time that does not exist that night end
		// where a digest at that time would go: 03:30.
		{"BerlinEndInMissingHour", quiet(berlin, 22*60, 2*60+30), at(berlin, 3, 28, 23, 0, 0), "Sun 2026-03-29 03:30 CEST", utc(2026, 3, 29, 1, 30)},
		// New York repeats 01:00-02:00 on 1 Nov. Quiet until 01:30: in the
		// first pass they end at the first 01:30, in the second at the
		// second, never before the time asked about.
		{"NewYorkRepeatedHourFirstPass", quiet(newYork, 0, 90), utc(2026, 11, 1, 5, 15), "Sun 2026-11-01 01:30 EDT", utc(2026, 11, 1, 5, 30)},
		{"NewYorkRepeatedHourSecondPass", quiet(newYork, 0, 90), utc(2026, 11, 1, 6, 15), "Sun 2026-11-01 01:30 EST", utc(2026, 11, 1, 6, 30)},
		{"NilLocationIsUTC", Schedule{Quiet: QuietHours{Start: 22 * 60, End: 7 * 60, Enabled: true}}, utc(2026, 11, 22, 23, 0), "Mon 2026-11-23 07:00 UTC", utc(2026, 11, 23, 7, 0)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := AfterQuiet(tc.in, tc.s)
			if l := got.In(tc.s.location()).Format(localFormat); l != tc.wantLocal {
				t.Errorf("local %s, want %s", l, tc.wantLocal)
			}
			if !got.Equal(tc.wantUTC) {
				t.Errorf("UTC %s, want %s", got.UTC().Format(localFormat), tc.wantUTC.Format(localFormat))
			}
			if got.Before(tc.in) {
				t.Errorf("moved %v earlier", tc.in.Sub(got))
			}
		})
	}
}
