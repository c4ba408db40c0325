package preferences

import (
	"testing"
	"time"
)

func zone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func TestCooldownCloses(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	cases := []struct {
		name         string
		last         time.Duration
		window, wait time.Duration
		want         time.Duration
	}{
		{"FirstEvent", 0, 5 * time.Minute, time.Hour, 5 * time.Minute},
		{"SlidesWithEachEvent", 20 * time.Minute, 5 * time.Minute, time.Hour, 25 * time.Minute},
		{"CappedByMaxWait", 58 * time.Minute, 5 * time.Minute, time.Hour, time.Hour},
		{"FixedWindow", 7 * time.Minute, 10 * time.Minute, 10 * time.Minute, 10 * time.Minute},
		{"NoCap", 5 * time.Hour, 5 * time.Minute, 0, 5*time.Hour + 5*time.Minute},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := CooldownCloses(t0, t0.Add(tc.last), tc.window, tc.wait)
			if !got.Equal(t0.Add(tc.want)) {
				t.Fatalf("closes +%v, want +%v", got.Sub(t0), tc.want)
			}
		})
	}
}

func TestNextDailyKeepsLocalTimeAcrossDST(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, zone string
		after      time.Time // UTC
		at         string
		wantLocal  string
		wantUTC    string
	}{
		// Europe/Berlin springs forward on 2026-03-29 (UTC+1 -> UTC+2).
		{"BerlinBeforeSpring", "Europe/Berlin", utc(2026, 3, 28, 8, 0), "08:00", "2026-03-29 08:00", "2026-03-29 06:00"},
		{"BerlinAfterSpring", "Europe/Berlin", utc(2026, 3, 29, 7, 0), "08:00", "2026-03-30 08:00", "2026-03-30 06:00"},
		// ... and falls back on 2026-10-25 (UTC+2 -> UTC+1).
		{"BerlinFall", "Europe/Berlin", utc(2026, 10, 24, 7, 0), "08:00", "2026-10-25 08:00", "2026-10-25 07:00"},
		// A time that does not exist on the spring-forward day.
		{"BerlinMissingHour", "Europe/Berlin", utc(2026, 3, 28, 12, 0), "02:30", "2026-03-29 03:30", "2026-03-29 01:30"},
		// America/New_York: 2026-03-08 spring, 2026-11-01 fall.
		{"NewYorkSpring", "America/New_York", utc(2026, 3, 7, 14, 0), "08:00", "2026-03-08 08:00", "2026-03-08 12:00"},
		{"NewYorkFall", "America/New_York", utc(2026, 10, 31, 14, 0), "08:00", "2026-11-01 08:00", "2026-11-01 13:00"},
		// Asia/Kolkata is UTC+5:30 all year.
		{"Kolkata", "Asia/Kolkata", utc(2026, 11, 22, 2, 0), "08:00", "2026-11-22 08:00", "2026-11-22 02:30"},
		{"KolkataPassed", "Asia/Kolkata", utc(2026, 11, 22, 3, 0), "07:00", "2026-11-23 07:00", "2026-11-23 01:30"},
		// Exactly at the digest time: the next one, not this one.
		{"ExactlyAtTime", "UTC", utc(2026, 11, 22, 8, 0), "08:00", "2026-11-23 08:00", "2026-11-23 08:00"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			at, err := ParseTimeOfDay(tc.at)
			if err != nil {
				t.Fatal(err)
			}
			loc := zone(t, tc.zone)
			got := NextDaily(tc.after, Schedule{Location: loc, DailyAt: at})
			if l := got.In(loc).Format("2006-01-02 15:04"); l != tc.wantLocal {
				t.Errorf("local %s, want %s", l, tc.wantLocal)
			}
			if u := got.UTC().Format("2006-01-02 15:04"); u != tc.wantUTC {
				t.Errorf("UTC %s, want %s", u, tc.wantUTC)
			}
		})
	}
}

func TestNextWeeklyAcrossDST(t *testing.T) {
	t.Parallel()
	berlin := zone(t, "Europe/Berlin")
	s := Schedule{Location: berlin, WeeklyOn: time.Monday, WeeklyAt: 8 * 60}
	// Friday 23 Oct 2026 (summer time) -> Monday 26 Oct (winter time).
	got := NextWeekly(utc(2026, 10, 23, 12, 0), s)
	if got.In(berlin).Format("Mon 2006-01-02 15:04") != "Mon 2026-10-26 08:00" || got.UTC().Hour() != 7 {
		t.Fatalf("got %v (%v UTC)", got.In(berlin), got.UTC())
	}
	// Monday at 08:00 exactly -> the Monday after.
	got = NextWeekly(got, s)
	if got.In(berlin).Format("2006-01-02 15:04") != "2026-11-02 08:00" {
		t.Fatalf("at the digest time: got %v, want a week later", got.In(berlin))
	}
	ny := zone(t, "America/New_York")
	got = NextWeekly(utc(2026, 3, 6, 12, 0), Schedule{Location: ny, WeeklyOn: time.Sunday, WeeklyAt: 9 * 60})
	if got.In(ny).Format("Mon 15:04") != "Sun 09:00" || got.UTC().Hour() != 13 {
		t.Fatalf("New York spring: got %v (%v UTC)", got.In(ny), got.UTC())
	}
}

func TestAfterQuiet(t *testing.T) {
	t.Parallel()
	tokyo := zone(t, "Asia/Tokyo")
	night := Schedule{Location: tokyo, Quiet: QuietHours{Start: 22 * 60, End: 7 * 60, Enabled: true}}
	lunch := Schedule{Location: tokyo, Quiet: QuietHours{Start: 12 * 60, End: 13 * 60, Enabled: true}}
	local := func(d, h, m int) time.Time { return time.Date(2026, 11, d, h, m, 0, 0, tokyo) }
	cases := []struct {
		name     string
		s        Schedule
		in, want time.Time
	}{
		{"BeforeMidnight", night, local(22, 23, 30), local(23, 7, 0)},
		{"AfterMidnight", night, local(23, 3, 0), local(23, 7, 0)},
		{"AtStart", night, local(22, 22, 0), local(23, 7, 0)},
		{"AtEndIsOutside", night, local(23, 7, 0), local(23, 7, 0)},
		{"Daytime", night, local(22, 15, 0), local(22, 15, 0)},
		{"NotWrapping", lunch, local(22, 12, 30), local(22, 13, 0)},
		{"Disabled", Schedule{Location: tokyo}, local(22, 23, 30), local(22, 23, 30)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := AfterQuiet(tc.in, tc.s); !got.Equal(tc.want) {
				t.Fatalf("got %v, want %v", got.In(tokyo), tc.want)
			}
		})
	}
}

func TestEffective(t *testing.T) {
	t.Parallel()
	five, never := 5*time.Minute, Never
	def := TypeDefaults{Mode: Daily, Window: time.Minute, MaxWait: time.Hour}
	req := TypeDefaults{Mode: Immediate, Required: true}
	cases := []struct {
		name  string
		t     TypeDefaults
		o     *Override
		unsub bool
		want  Policy
	}{
		{"Defaults", def, nil, false, Policy{Mode: Daily, Window: time.Minute, MaxWait: time.Hour}},
		{"OverrideKeepsTypeParameters", def, &Override{Mode: Cooldown}, false, Policy{Mode: Cooldown, Window: time.Minute, MaxWait: time.Hour}},
		{"OverrideWindow", def, &Override{Mode: Cooldown, Window: &five}, false, Policy{Mode: Cooldown, Window: five, MaxWait: time.Hour}},
		{"Unsubscribed", def, &Override{Mode: Cooldown}, true, Policy{Mode: Never, Window: time.Minute, MaxWait: time.Hour}},
		{"RequiredIgnoresNever", req, &Override{Mode: never}, false, Policy{Mode: Immediate, Window: time.Minute}},
		{"RequiredIgnoresUnsubscribe", req, nil, true, Policy{Mode: Immediate, Window: 0}},
		{"RequiredNeverDefault", TypeDefaults{Mode: Never, Required: true}, nil, false, Policy{Mode: Immediate}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Effective(tc.t, tc.o, tc.unsub); got.Mode != tc.want.Mode || (got.Mode == Cooldown && (got.Window != tc.want.Window || got.MaxWait != tc.want.MaxWait)) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestParsers(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"08:00", "8:05", "23:59", "00:00"} {
		if _, err := ParseTimeOfDay(s); err != nil {
			t.Errorf("ParseTimeOfDay(%q): %v", s, err)
		}
	}
	for _, s := range []string{"24:00", "7", "08:60", "", "8:5", "ab:cd", "-1:00"} {
		if _, err := ParseTimeOfDay(s); err == nil {
			t.Errorf("ParseTimeOfDay(%q) accepted", s)
		}
	}
	if d, err := ParseWeekday("Mon"); err != nil || d != time.Monday {
		t.Errorf("ParseWeekday(Mon) = %v, %v", d, err)
	}
	if _, err := ParseWeekday("someday"); err == nil {
		t.Error("ParseWeekday(someday) accepted")
	}
	for _, s := range []string{"1s", "90s", "5m", "1h30m"} {
		d, err := ParseWindow(s)
		if err != nil {
			t.Errorf("ParseWindow(%q): %v", s, err)
		}
		if back, _ := ParseWindow(FormatDuration(d)); back != d {
			t.Errorf("FormatDuration(%v) = %q does not round-trip", d, FormatDuration(d))
		}
	}
	for _, s := range []string{"0s", "999ms", "-5m", "soon", ""} {
		if _, err := ParseWindow(s); err == nil {
			t.Errorf("ParseWindow(%q) accepted", s)
		}
	}
	for _, s := range []string{"0", "0s", "1s", "2h"} {
		if _, err := ParseMaxWait(s); err != nil {
			t.Errorf("ParseMaxWait(%q): %v", s, err)
		}
	}
	for _, s := range []string{"500ms", "-1s", "x"} {
		if _, err := ParseMaxWait(s); err == nil {
			t.Errorf("ParseMaxWait(%q) accepted", s)
		}
	}
	if got := FormatDuration(5 * time.Minute); got != "5m" {
		t.Errorf("FormatDuration(5m) = %q", got)
	}
}

func TestBatchKeyAndLead(t *testing.T) {
	t.Parallel()
	if got := BatchKey(Cooldown, "comment.created", "document:7"); got != "comment.created+document:7" {
		t.Errorf("cooldown key %q", got)
	}
	if got := BatchKey(Weekly, "comment.created", "document:7"); got != "digest:weekly" {
		t.Errorf("weekly key %q", got)
	}
	now := utc(2026, 11, 22, 10, 0)
	p := Policy{Mode: Cooldown, Window: 5 * time.Minute, Lead: true}
	if !LeadsNow(p, false, time.Time{}, now) || !LeadsNow(p, false, now.Add(-5*time.Minute), now) {
		t.Error("first item of a quiet period does not lead")
	}
	if LeadsNow(p, false, now.Add(-time.Minute), now) || LeadsNow(p, true, time.Time{}, now) {
		t.Error("an item within the window, or with a batch open, leads")
	}
}

func TestDescribe(t *testing.T) {
	t.Parallel()
	berlin := zone(t, "Europe/Berlin")
	s := Schedule{Location: berlin, DailyAt: 8 * 60, WeeklyOn: time.Monday, WeeklyAt: 9 * 60}
	cases := map[Policy]string{
		{Mode: Never}:     "Nothing by email.",
		{Mode: Immediate}: "An email for each one, as it happens.",
		{Mode: Cooldown, Window: 5 * time.Minute, MaxWait: time.Hour}: "One email 5 minutes after the last one, at most 1 hour after the first.",
		{Mode: Daily}:  "One email a day at 08:00 (Europe/Berlin).",
		{Mode: Weekly}: "One email every Monday at 09:00 (Europe/Berlin).",
	}
	for p, want := range cases {
		if got := Describe(p, s); got != want {
			t.Errorf("Describe(%v) = %q, want %q", p.Mode, got, want)
		}
	}
}

func BenchmarkCloseTime(b *testing.B) {
	berlin, _ := time.LoadLocation("Europe/Berlin")
	s := Schedule{Location: berlin, DailyAt: 8 * 60, Quiet: QuietHours{Start: 22 * 60, End: 7 * 60, Enabled: true}}
	now := utc(2026, 11, 22, 10, 0)
	b.Run("Daily", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			CloseTime(Policy{Mode: Daily}, s, now, now)
		}
	})
	b.Run("Cooldown", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			CloseTime(Policy{Mode: Cooldown, Window: 5 * time.Minute, MaxWait: time.Hour}, s, now, now.Add(time.Minute))
		}
	})
}

func utc(y int, m time.Month, d, h, min int) time.Time {
	return time.Date(y, m, d, h, min, 0, 0, time.UTC)
}
