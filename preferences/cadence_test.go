package preferences

import (
	"slices"
	"testing"
	"time"
)

// walk lists the digests from start (exclusive) to end (inclusive) as
// local readings, by asking next again and again from the last answer.
func walk(t *testing.T, next func(time.Time, Schedule) time.Time, s Schedule, start, end time.Time) []time.Time {
	t.Helper()
	var out []time.Time
	for at := next(start, s); !at.After(end); at = next(at, s) {
		if len(out) > 0 && !at.After(out[len(out)-1]) {
			t.Fatalf("%s does not follow %s", at, out[len(out)-1])
		}
		out = append(out, at.In(s.location()))
	}
	return out
}

func TestNextMonthlyTakesTheLastDayOfShortMonths(t *testing.T) {
	t.Parallel()
	berlin := zone(t, "Europe/Berlin")
	s := Schedule{Location: berlin, MonthlyDay: 31, MonthlyAt: tod(t, "08:00")}
	got := walk(t, NextMonthly, s, utc(2026, 1, 1, 0, 0), utc(2028, 3, 31, 12, 0))
	want := map[string]bool{"Sat 2026-01-31 08:00 CET": true, "Sat 2026-02-28 08:00 CET": true,
		"Tue 2026-03-31 08:00 CEST": true, "Thu 2026-04-30 08:00 CEST": true, "Sat 2026-10-31 08:00 CET": true,
		"Tue 2028-02-29 08:00 CET": true}
	if len(got) != 27 {
		t.Fatalf("%d monthly digests from January 2026 to March 2028, want 27", len(got))
	}
	for _, at := range got {
		if at.Format("15:04") != "08:00" {
			t.Errorf("%s is not at 08:00 local", at.Format(localFormat))
		}
		if last := time.Date(at.Year(), at.Month()+1, 0, 0, 0, 0, 0, time.UTC).Day(); at.Day() != last {
			t.Errorf("%s is not the last day of its month", at.Format(localFormat))
		}
		delete(want, at.Format(localFormat))
	}
	if len(want) != 0 {
		t.Errorf("missing %v", want)
	}
	s.MonthlyDay = 30
	if at := NextMonthly(utc(2026, 2, 1, 0, 0), s); at.In(berlin).Format(localFormat) != "Sat 2026-02-28 08:00 CET" {
		t.Errorf("day 30 in February: %s", at.In(berlin).Format(localFormat))
	}
	s.MonthlyDay = 15
	first := NextMonthly(utc(2026, 5, 15, 6, 0), s) // exactly 08:00 CEST: strictly after
	if first.In(berlin).Format(localFormat) != "Mon 2026-06-15 08:00 CEST" {
		t.Errorf("a digest at exactly the time is the next month's: %s", first.In(berlin).Format(localFormat))
	}
}

func TestNextMonthlyAcrossSwitchesInNewYork(t *testing.T) {
	t.Parallel()
	ny := zone(t, "America/New_York")
	// 02:30 does not exist on 8 March: it moves forward by the gap.
	s := Schedule{Location: ny, MonthlyDay: 8, MonthlyAt: tod(t, "02:30")}
	if at := NextMonthly(utc(2026, 3, 1, 0, 0), s).In(ny).Format(localFormat); at != "Sun 2026-03-08 03:30 EDT" {
		t.Errorf("spring forward: %s", at)
	}
	// 01:30 happens twice on 1 November: the first one.
	s = Schedule{Location: ny, MonthlyDay: 1, MonthlyAt: tod(t, "01:30")}
	at := NextMonthly(utc(2026, 10, 15, 0, 0), s)
	if at.In(ny).Format(localFormat) != "Sun 2026-11-01 01:30 EDT" || NextMonthly(at, s).Month() != time.December {
		t.Errorf("fall back: %s, then %s", at.In(ny).Format(localFormat), NextMonthly(at, s).In(ny).Format(localFormat))
	}
}

// TestNextHourlyKeepsLocalTimes walks every-N-hours digests over both
// switches in two zones: each digest falls on the local grid, no local
// time repeats, and each day has its slots (a slot in the spring gap
// lands on the next one, so that day has one fewer with a one-hour grid).
func TestNextHourlyKeepsLocalTimes(t *testing.T) {
	t.Parallel()
	cases := []struct {
		zone       string
		every      int
		from       string
		day        time.Time // local midnight of the switch day, as UTC
		wantOnDay  int
		wantOther  int
		switchName string
	}{
		{"Europe/Berlin", 4, "08:00", utc(2026, 3, 28, 23, 0), 6, 6, "spring"},
		{"Europe/Berlin", 4, "08:00", utc(2026, 10, 24, 22, 0), 6, 6, "fall"},
		{"Europe/Berlin", 1, "08:30", utc(2026, 3, 28, 23, 0), 23, 24, "spring"},
		{"Europe/Berlin", 1, "08:30", utc(2026, 10, 24, 22, 0), 24, 24, "fall"},
		{"America/New_York", 2, "07:00", utc(2026, 3, 8, 5, 0), 12, 12, "spring"},
		{"America/New_York", 1, "00:00", utc(2026, 11, 1, 4, 0), 24, 24, "fall"},
		{"America/New_York", 12, "09:15", utc(2026, 11, 1, 4, 0), 2, 2, "fall"},
		{"Asia/Kolkata", 6, "08:00", utc(2026, 3, 28, 18, 30), 4, 4, "none"},
	}
	for _, c := range cases {
		loc := zone(t, c.zone)
		s := Schedule{Location: loc, DailyAt: tod(t, c.from), EveryHours: c.every}
		grid := s.HourlyTimes()
		got := walk(t, NextHourly, s, c.day.Add(-48*time.Hour), c.day.Add(72*time.Hour))
		perDay := map[string][]string{}
		for _, at := range got {
			clock := at.Format("15:04")
			tod, _ := ParseTimeOfDay(clock)
			switchDay := at.Format("2006-01-02") == c.day.In(loc).Format("2006-01-02")
			if !slices.Contains(grid, tod) && !(switchDay && c.switchName == "spring") {
				t.Errorf("%s every %d from %s: %s is off the grid %v", c.zone, c.every, c.from, at.Format(localFormat), grid)
			}
			day := at.Format("2006-01-02")
			if slices.Contains(perDay[day], clock) {
				t.Errorf("%s every %d: %s twice on %s", c.zone, c.every, clock, day)
			}
			perDay[day] = append(perDay[day], clock)
		}
		for day, clocks := range perDay {
			want := c.wantOther
			if day == c.day.In(loc).Format("2006-01-02") {
				want = c.wantOnDay
			}
			first := day == c.day.Add(-48*time.Hour).In(loc).Format("2006-01-02") || day == c.day.Add(72*time.Hour).In(loc).Format("2006-01-02")
			if !first && len(clocks) != want {
				t.Errorf("%s every %d from %s (%s): %s has %d digests %v, want %d", c.zone, c.every, c.from, c.switchName, day, len(clocks), clocks, want)
			}
		}
	}
}

func TestNextWeeklyOnSeveralDays(t *testing.T) {
	t.Parallel()
	berlin := zone(t, "Europe/Berlin")
	days, err := ParseWeekdays([]string{"monday", "Thu", "monday"})
	if err != nil || !slices.Equal(days.Days(), []time.Weekday{time.Monday, time.Thursday}) {
		t.Fatalf("ParseWeekdays: %v %v", days.Days(), err)
	}
	s := Schedule{Location: berlin, WeeklyOn: time.Sunday, WeeklyDays: days, WeeklyAt: tod(t, "08:00")}
	got := walk(t, NextWeekly, s, utc(2026, 3, 20, 0, 0), utc(2026, 11, 1, 0, 0))
	for i, at := range got {
		if wd := at.Weekday(); (wd != time.Monday && wd != time.Thursday) || at.Format("15:04") != "08:00" {
			t.Errorf("%s is not Monday or Thursday at 08:00 local", at.Format(localFormat))
		}
		if i > 0 && at.Sub(got[i-1]) > 4*24*time.Hour+time.Hour {
			t.Errorf("gap before %s", at.Format(localFormat))
		}
	}
	if len(got) != 64 {
		t.Errorf("%d digests from 20 March to 1 November, want 64", len(got))
	}
	if _, err := ParseWeekdays(nil); err == nil {
		t.Error("an empty list of days was accepted")
	}
	// Without days, WeeklyOn alone decides, as before.
	s.WeeklyDays = 0
	if at := NextWeekly(utc(2026, 3, 20, 0, 0), s); at.Weekday() != time.Sunday {
		t.Errorf("WeeklyOn alone: %s", at.In(berlin).Format(localFormat))
	}
}

func TestNewCadencesCloseAndDescribe(t *testing.T) {
	t.Parallel()
	for _, m := range []Mode{Hourly, Monthly} {
		if _, err := ParseMode(string(m)); err != nil {
			t.Fatal(err)
		}
	}
	s := Schedule{Location: time.UTC, DailyAt: tod(t, "08:00"), EveryHours: 6, MonthlyDay: 31, MonthlyAt: tod(t, "09:00"),
		WeeklyDays: WeekdaySet(0).With(time.Monday).With(time.Thursday), WeeklyAt: tod(t, "07:00")}
	opened := utc(2026, 4, 10, 13, 0)
	if got := CloseTime(Policy{Mode: Hourly}, s, opened, opened); !got.Equal(utc(2026, 4, 10, 14, 0)) {
		t.Errorf("hourly closes %s", got)
	}
	if got := CloseTime(Policy{Mode: Monthly}, s, opened, opened); !got.Equal(utc(2026, 4, 30, 9, 0)) {
		t.Errorf("monthly closes %s", got)
	}
	if BatchKey(Hourly, "c", "k") != "digest:hourly" || BatchKey(Monthly, "c", "") != "digest:monthly" {
		t.Error("hourly and monthly digests gather every type under one key")
	}
	for m, want := range map[Mode]string{
		Hourly:  "Up to 4 emails a day, every 6 hours at 02:00, 08:00, 14:00 and 20:00 (UTC).",
		Monthly: "One email a month, on day 31 (the last day in shorter months) at 09:00 (UTC).",
		Weekly:  "One email every Monday and Thursday at 07:00 (UTC).",
	} {
		if got := Describe(Policy{Mode: m}, s); got != want {
			t.Errorf("Describe(%s) = %q, want %q", m, got, want)
		}
	}
}

// TestMonthlyInQuietHoursSaysTheDayAfter: a monthly digest at 23:00 inside
// quiet hours from 22:00 to 07:00 goes out at 07:00 the next day, the 1st
// for day 31; the description says so rather than naming day 31.
func TestMonthlyInQuietHoursSaysTheDayAfter(t *testing.T) {
	t.Parallel()
	s := Schedule{Location: time.UTC, MonthlyDay: 31, MonthlyAt: tod(t, "23:00"),
		Quiet: QuietHours{Start: tod(t, "22:00"), End: tod(t, "07:00"), Enabled: true}}
	opened := utc(2026, 4, 10, 13, 0)
	if got := CloseTime(Policy{Mode: Monthly}, s, opened, opened); !got.Equal(utc(2026, 5, 1, 7, 0)) {
		t.Fatalf("monthly closes %s, want 2026-05-01 07:00", got)
	}
	want := "One email a month, the day after day 31 (the last day in shorter months) at 07:00 (UTC), when your quiet hours end."
	if got := Describe(Policy{Mode: Monthly}, s); got != want {
		t.Errorf("Describe = %q, want %q", got, want)
	}
}

// TestCadencesInOddZones walks the hourly, weekly and monthly digests
// through zones with unusual switches: Lord Howe's 30-minute shift,
// Santiago's and Tehran's switches at midnight, and Apia, which skipped
// 30 December 2011. Every local slot of every day is sent exactly once
// (a slot in a gap, later by the gap's length), and a monthly digest on
// day 29, 30 or 31 goes out once a month, on the last day when the month
// is shorter (February 2012 had 29 days).
func TestCadencesInOddZones(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		zone string
		from time.Time
	}{
		{"Australia/Lord_Howe", utc(2011, 3, 1, 0, 0)},
		{"America/Santiago", utc(2011, 3, 1, 0, 0)},
		{"Asia/Tehran", utc(2021, 3, 1, 0, 0)},
		{"Pacific/Apia", utc(2011, 3, 1, 0, 0)},
	} {
		loc := zone(t, c.zone)
		until := c.from.AddDate(1, 0, 0)
		for _, at := range []string{"00:00", "00:30", "02:15", "07:45"} {
			for _, every := range []int{1, 4} {
				s := Schedule{Location: loc, DailyAt: tod(t, at), EveryHours: every}
				sent := map[time.Time]int{}
				for _, d := range walk(t, NextHourly, s, c.from, until) {
					sent[d]++
				}
				for day := c.from.In(loc); day.Before(until.AddDate(0, 0, -1)); day = day.AddDate(0, 0, 1) {
					y, m, d := day.Date()
					for _, slot := range s.HourlyTimes() {
						if want := localTime(loc, y, m, d, slot); want.After(c.from) && sent[want] != 1 {
							t.Errorf("%s every %d h from %s: %s sent %d times", c.zone, every, at, want.In(loc).Format(localFormat), sent[want])
						}
					}
				}
			}
			for day := 29; day <= 31; day++ {
				s := Schedule{Location: loc, MonthlyDay: day, MonthlyAt: tod(t, at)}
				got := walk(t, NextMonthly, s, c.from, until)
				months := map[string]bool{}
				for _, d := range got {
					months[d.Format("2006-01")] = true
					last := time.Date(d.Year(), d.Month()+1, 0, 0, 0, 0, 0, time.UTC).Day()
					if d.Day() != min(day, last) && !(c.zone == "Pacific/Apia" && d.Format("01-02") == "12-31") {
						t.Errorf("%s monthly on %d at %s: %s", c.zone, day, at, d.Format(localFormat))
					}
				}
				if len(got) != 12 || len(months) != 12 {
					t.Errorf("%s monthly on %d at %s: %d digests in %d months, want 12 in 12", c.zone, day, at, len(got), len(months))
				}
			}
			s := Schedule{Location: loc, WeeklyAt: tod(t, at), WeeklyDays: WeekdaySet(0).With(time.Friday)}
			for _, d := range walk(t, NextWeekly, s, c.from, until) {
				if d.Weekday() != time.Friday && d.Format("2006-01-02") != "2011-12-31" {
					t.Errorf("%s weekly on Friday at %s: %s", c.zone, at, d.Format(localFormat))
				}
			}
		}
	}
}

// TestHourlyDescriptionCountsQuietHours: slots inside the quiet hours all
// go out together when they end, so "up to" counts them once; an hourly
// grid names its minute instead of 24 times.
func TestHourlyDescriptionCountsQuietHours(t *testing.T) {
	t.Parallel()
	quiet := QuietHours{Start: tod(t, "22:00"), End: tod(t, "07:00"), Enabled: true}
	for _, c := range []struct {
		every int
		quiet QuietHours
		want  string
	}{
		{1, quiet, "Up to 16 emails a day, every hour at 45 minutes past (UTC). During your quiet hours (22:00 to 07:00) it waits until 07:00."},
		{1, QuietHours{}, "Up to 24 emails a day, every hour at 45 minutes past (UTC)."},
		{4, quiet, "Up to 5 emails a day, every 4 hours at 03:45, 07:45, 11:45, 15:45, 19:45 and 23:45 (UTC). During your quiet hours (22:00 to 07:00) it waits until 07:00."},
		{12, QuietHours{}, "Up to 2 emails a day, every 12 hours at 07:45 and 19:45 (UTC)."},
	} {
		s := Schedule{Location: time.UTC, DailyAt: tod(t, "07:45"), EveryHours: c.every, Quiet: c.quiet}
		if got := Describe(Policy{Mode: Hourly}, s); got != c.want {
			t.Errorf("every %d h:\n got %q\nwant %q", c.every, got, c.want)
		}
	}
}

// TestWeeklyShiftedByQuietHoursListsDaysInOrder: Saturday and Sunday at
// 23:00, held by quiet hours until 07:00, go out on Sunday and Monday,
// named in the week's order.
func TestWeeklyShiftedByQuietHoursListsDaysInOrder(t *testing.T) {
	t.Parallel()
	s := Schedule{Location: time.UTC, WeeklyAt: tod(t, "23:00"), WeeklyDays: WeekdaySet(0).With(time.Saturday).With(time.Sunday),
		Quiet: QuietHours{Start: tod(t, "22:00"), End: tod(t, "07:00"), Enabled: true}}
	want := "One email every Sunday and Monday at 07:00 (UTC), when your quiet hours end."
	if got := Describe(Policy{Mode: Weekly}, s); got != want {
		t.Errorf("Describe = %q, want %q", got, want)
	}
	sat := utc(2026, 11, 28, 12, 0)
	if got := CloseTime(Policy{Mode: Weekly}, s, sat, sat); !got.Equal(utc(2026, 11, 29, 7, 0)) {
		t.Errorf("Saturday's digest closes %s, want Sunday 07:00", got)
	}
}
