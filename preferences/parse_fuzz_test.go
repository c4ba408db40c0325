package preferences

import (
	"testing"
	"time"
	_ "time/tzdata" // the zones below, whatever the machine has installed
)

// FuzzDuration feeds arbitrary strings to the window and maximum-wait
// parsers. What they accept obeys the rules the API promises (a window is
// at least 1s; a maximum wait is 0 or at least 1s), is a whole number of
// milliseconds (the unit it is stored in, so nothing accepted is silently
// cut), and reads back to the same duration from FormatDuration, which is
// how the API and the settings page show it again.
func FuzzDuration(f *testing.F) {
	for _, s := range []string{"90s", "5m", "1h30m", "0", "0s", "1s", "999ms", "1.5s", "1.0000001s", "-1s", "2562047h",
		"9223372036854775807ns", "1e3s", "+5m", " 5m", "5M", "", ".5m", "1h-1m"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if d, err := ParseWindow(s); err == nil {
			if d < time.Second {
				t.Fatalf("ParseWindow(%q) = %v, under a second", s, d)
			}
			checkStoredForm(t, "ParseWindow", s, d, ParseWindow)
		}
		if d, err := ParseMaxWait(s); err == nil {
			if d < 0 || (d > 0 && d < time.Second) {
				t.Fatalf("ParseMaxWait(%q) = %v, neither 0 nor at least a second", s, d)
			}
			checkStoredForm(t, "ParseMaxWait", s, d, ParseMaxWait)
		}
	})
}

func checkStoredForm(t *testing.T, name, s string, d time.Duration, parse func(string) (time.Duration, error)) {
	t.Helper()
	if d%time.Millisecond != 0 {
		t.Fatalf("%s(%q) = %v, finer than the milliseconds it is stored in", name, s, d)
	}
	back, err := parse(FormatDuration(d))
	if err != nil || back != d {
		t.Fatalf("%s(%q) = %v, shown as %q, which reads back as %v (%v)", name, s, d, FormatDuration(d), back, err)
	}
}

// fuzzZones are zones with the awkward cases: no daylight saving, the
// usual switches, half-hour switches (Lord Howe), a skipped calendar day
// (Apia), a switch at midnight (Santiago), odd offsets (Kathmandu, Chatham,
// St John's), and a two-hour switch (Troll).
var fuzzZones = []string{"UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Pacific/Apia",
	"America/Santiago", "Asia/Kathmandu", "Pacific/Chatham", "America/St_Johns", "Antarctica/Troll", "Africa/Casablanca"}

// FuzzDigestTime feeds arbitrary strings to the digest time and weekday
// parsers, and what they accept to NextDaily and NextWeekly in zones with
// awkward daylight-saving rules. A parsed time is in 00:00..23:59 and
// reads back from its String; a parsed weekday reads back from its name;
// the next digest is strictly after the given instant, no more than two
// days (daily) or eight days (weekly) later, and shows the chosen time on
// the local clock unless that time did not exist that day, in which case
// it is at most two hours later.
func FuzzDigestTime(f *testing.F) {
	f.Add("08:00", "monday", uint8(1), int64(1_774_400_000))
	f.Add("02:30", "sun", uint8(1), int64(1_774_747_800))
	f.Add("00:00", "Saturday ", uint8(5), int64(1_662_854_400))
	f.Add("23:59", "FRI", uint8(4), int64(1_325_239_200))
	f.Add("24:00", "mon", uint8(0), int64(0))
	f.Add("8:5", "", uint8(2), int64(-1))
	f.Add("+8:00", "tues", uint8(3), int64(4_102_444_800))
	f.Add("０８:00", "mondays", uint8(9), int64(1_700_000_000))
	f.Fuzz(func(t *testing.T, tod, day string, zone uint8, unix int64) {
		at, err := ParseTimeOfDay(tod)
		if err == nil {
			if at < 0 || at >= minutesPerDay {
				t.Fatalf("ParseTimeOfDay(%q) = %d, outside a day", tod, at)
			}
			if back, err := ParseTimeOfDay(at.String()); err != nil || back != at {
				t.Fatalf("ParseTimeOfDay(%q) = %d, shown as %q, reads back as %d (%v)", tod, at, at.String(), back, err)
			}
		}
		wd, werr := ParseWeekday(day)
		if werr == nil {
			if back, err := ParseWeekday(WeekdayName(wd)); err != nil || back != wd {
				t.Fatalf("ParseWeekday(%q) = %v, named %q, reads back as %v (%v)", day, wd, WeekdayName(wd), back, err)
			}
		}
		if err != nil || werr != nil {
			return
		}
		loc, lerr := time.LoadLocation(fuzzZones[int(zone)%len(fuzzZones)])
		if lerr != nil {
			t.Fatal(lerr)
		}
		// Callers pass the clock's time: keep after between 1970 and 2200.
		after := time.Unix(1+(unix%7_258_000_000+7_258_000_000)%7_258_000_000, 0)
		s := Schedule{Location: loc, DailyAt: at, WeeklyOn: wd, WeeklyAt: at}
		checkDigest(t, "NextDaily", after, NextDaily(after, s), at, 49*time.Hour)
		weekly := NextWeekly(after, s)
		checkDigest(t, "NextWeekly", after, weekly, at, 8*24*time.Hour+time.Hour)
		if l := weekly.In(loc); l.Weekday() != wd && !skipped(loc, l, at) {
			t.Fatalf("NextWeekly(%v) = %v, a %v, want a %v", after, l, l.Weekday(), wd)
		}
	})
}

// skipped reports whether the local clock never showed at on the calendar
// day before got's, as on the day Apia skipped (Friday 2011-12-30): a
// weekly digest due that day goes out when the gap ends, a day later.
func skipped(loc *time.Location, got time.Time, at TimeOfDay) bool {
	y, m, d := time.Date(got.Year(), got.Month(), got.Day()-1, 0, 0, 0, 0, time.UTC).Date()
	t := time.Date(y, m, d, at.minutes()/60, at.minutes()%60, 0, 0, loc)
	return t.Day() != d || t.Hour()*60+t.Minute() != at.minutes()
}

func checkDigest(t *testing.T, name string, after, got time.Time, at TimeOfDay, within time.Duration) {
	t.Helper()
	if !got.After(after) || got.Sub(after) > within {
		t.Fatalf("%s(%v) = %v: not strictly after it, or more than %v later", name, after, got, within)
	}
	l := got.In(got.Location())
	shown := TimeOfDay(l.Hour()*60 + l.Minute())
	if late := (shown.minutes() - at.minutes() + minutesPerDay) % minutesPerDay; late > 120 || l.Second() != 0 {
		t.Fatalf("%s(%v) = %v: the clock shows %s, want %s or at most two hours later", name, after, l, shown, at)
	}
}

// TestDurationsFinerThanAMillisecondAreRefused is FuzzDuration's first
// finding: "1.0000001s" was accepted as a window and then stored as 1000
// ms, so the API answered with a different value than it had accepted.
func TestDurationsFinerThanAMillisecondAreRefused(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"1.0000001s", "9223372036854775807ns", "1m1us"} {
		if d, err := ParseWindow(s); err == nil {
			t.Errorf("ParseWindow(%q) = %v, want an error", s, d)
		}
		if d, err := ParseMaxWait(s); err == nil {
			t.Errorf("ParseMaxWait(%q) = %v, want an error", s, d)
		}
	}
	if d, err := ParseWindow("1.5s"); err != nil || d != 1500*time.Millisecond {
		t.Errorf("ParseWindow(1.5s) = %v, %v", d, err)
	}
}
