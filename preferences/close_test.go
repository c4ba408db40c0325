package preferences

import (
	"testing"
	"time"
)

// TestCooldownCloses feeds a batch events one by one, as ingest does, and
// checks the close time after each.
func TestCooldownCloses(t *testing.T) {
	t.Parallel()
	opened := utc(2026, 11, 22, 10, 0)
	m := time.Minute
	cases := []struct {
		name            string
		window, maxWait time.Duration
		events          []time.Duration // after opened; the first opens the batch
		want            []time.Duration // close time after each event, after opened
	}{
		{"FirstEvent", 5 * m, time.Hour, []time.Duration{0}, []time.Duration{5 * m}},
		{"ResetsWithEachEvent", 5 * m, time.Hour, []time.Duration{0, 3 * m, 6 * m, 10 * m}, []time.Duration{5 * m, 8 * m, 11 * m, 15 * m}},
		{"CappedByMaxWait", 5 * m, 20 * m, []time.Duration{0, 4 * m, 8 * m, 12 * m, 16 * m, 19 * m}, []time.Duration{5 * m, 9 * m, 13 * m, 17 * m, 20 * m, 20 * m}},
		{"MaxWaitEqualsWindowIsFixed", 10 * m, 10 * m, []time.Duration{0, time.Second, 5 * m, 9 * m}, []time.Duration{10 * m, 10 * m, 10 * m, 10 * m}},
		{"MaxWaitBelowWindowIsFixed", 10 * m, 3 * m, []time.Duration{0, 2 * m}, []time.Duration{3 * m, 3 * m}},
		{"ZeroMaxWaitIsNoCap", 5 * m, 0, []time.Duration{0, 4 * m, 59 * m, 3 * time.Hour}, []time.Duration{5 * m, 9 * m, 64 * m, 3*time.Hour + 5*m}},
		{"NegativeMaxWaitIsNoCap", 5 * m, -time.Hour, []time.Duration{0, 4 * m}, []time.Duration{5 * m, 9 * m}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for i, e := range tc.events {
				got := CooldownCloses(opened, opened.Add(e), tc.window, tc.maxWait)
				if !got.Equal(opened.Add(tc.want[i])) {
					t.Fatalf("after event at +%v: closes at +%v, want +%v", e, got.Sub(opened), tc.want[i])
				}
			}
		})
	}
}

func TestCloseTime(t *testing.T) {
	t.Parallel()
	berlin := zone(t, "Europe/Berlin")
	plain := Schedule{Location: berlin, DailyAt: 8 * 60, WeeklyOn: time.Monday, WeeklyAt: 8 * 60}
	night := plain
	night.Quiet = QuietHours{Start: 22 * 60, End: 7 * 60, Enabled: true}
	early := night
	early.DailyAt, early.WeeklyAt = 6*60, 23*60
	local := func(mo time.Month, d, h, mi int) time.Time { return time.Date(2026, mo, d, h, mi, 0, 0, berlin) }
	cooldown := Policy{Mode: Cooldown, Window: 5 * time.Minute, MaxWait: time.Hour}
	cases := []struct {
		name         string
		p            Policy
		s            Schedule
		opened, last time.Time
		want         string // local, in Berlin
	}{
		{"Immediate", Policy{Mode: Immediate}, plain, local(11, 22, 10, 0), local(11, 22, 10, 0), "Sun 2026-11-22 10:00 CET"},
		{"ImmediateInQuietHours", Policy{Mode: Immediate}, night, local(11, 22, 23, 0), local(11, 22, 23, 0), "Mon 2026-11-23 07:00 CET"},
		{"Cooldown", cooldown, plain, local(11, 22, 10, 0), local(11, 22, 10, 20), "Sun 2026-11-22 10:25 CET"},
		{"CooldownCapped", cooldown, plain, local(11, 22, 10, 0), local(11, 22, 10, 58), "Sun 2026-11-22 11:00 CET"},
		// Due at 22:03, inside the quiet hours: moved to their end, 07:00
		// local the next morning.
		{"CooldownIntoQuietHours", cooldown, night, local(11, 22, 21, 40), local(11, 22, 21, 58), "Mon 2026-11-23 07:00 CET"},
		{"CooldownIntoQuietHoursAcrossSpringForward", cooldown, night, local(3, 28, 21, 40), local(3, 28, 21, 58), "Sun 2026-03-29 07:00 CEST"},
		// A digest closes at the first digest time after it opened, however
		// late its last item came.
		{"DailyFromOpened", Policy{Mode: Daily}, plain, local(11, 22, 10, 0), local(11, 22, 20, 0), "Mon 2026-11-23 08:00 CET"},
		// An item joining a digest that is due but not yet flushed must not
		// push it to the next day.
		{"DailyDueKeepsItsTime", Policy{Mode: Daily}, plain, local(11, 22, 10, 0), local(11, 23, 8, 30), "Mon 2026-11-23 08:00 CET"},
		{"WeeklyDueKeepsItsTime", Policy{Mode: Weekly}, plain, local(11, 22, 10, 0), local(11, 23, 8, 30), "Mon 2026-11-23 08:00 CET"},
		{"DailyAcrossFallBack", Policy{Mode: Daily}, plain, local(10, 24, 10, 0), local(10, 24, 10, 0), "Sun 2026-10-25 08:00 CET"},
		{"DailyInQuietHours", Policy{Mode: Daily}, early, local(11, 22, 10, 0), local(11, 22, 10, 0), "Mon 2026-11-23 07:00 CET"},
		{"WeeklyFromOpened", Policy{Mode: Weekly}, plain, local(11, 22, 10, 0), local(11, 22, 20, 0), "Mon 2026-11-23 08:00 CET"},
		// Monday 23:00 is in the quiet hours; they end Tuesday 07:00.
		{"WeeklyInQuietHours", Policy{Mode: Weekly}, early, local(11, 22, 10, 0), local(11, 22, 10, 0), "Tue 2026-11-24 07:00 CET"},
		{"NeverIsLast", Policy{Mode: Never}, night, local(11, 22, 10, 0), local(11, 22, 23, 0), "Sun 2026-11-22 23:00 CET"},
		{"UnknownModeIsImmediate", Policy{Mode: "fortnightly"}, night, local(11, 22, 10, 0), local(11, 22, 23, 0), "Mon 2026-11-23 07:00 CET"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := CloseTime(tc.p, tc.s, tc.opened, tc.last)
			if l := got.In(berlin).Format(localFormat); l != tc.want {
				t.Fatalf("closes %s, want %s", l, tc.want)
			}
		})
	}
}

func TestBatchKey(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name              string
		mode              Mode
		typeKey, eventKey string
		want              string
	}{
		{"ImmediateWithEventKey", Immediate, "comment.created", "document:7", "comment.created+document:7"},
		{"ImmediateWithoutEventKey", Immediate, "comment.created", "", "comment.created"},
		{"CooldownWithEventKey", Cooldown, "comment.created", "document:7", "comment.created+document:7"},
		{"CooldownWithoutEventKey", Cooldown, "task.failed", "", "task.failed"},
		{"DailyIgnoresKeys", Daily, "comment.created", "document:7", "digest:daily"},
		{"WeeklyIgnoresKeys", Weekly, "comment.created", "document:7", "digest:weekly"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := BatchKey(tc.mode, tc.typeKey, tc.eventKey); got != tc.want {
				t.Fatalf("BatchKey = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestBursting(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name        string
		sent, limit int
		want        bool
	}{
		{"BelowLimit", 4, 5, false},
		{"AtLimit", 5, 5, true},
		{"AboveLimit", 9, 5, true},
		{"ZeroLimitDisables", 100, 0, false},
		{"NegativeLimitDisables", 100, -1, false},
		{"NothingSent", 0, 1, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := Bursting(tc.sent, tc.limit); got != tc.want {
				t.Fatalf("Bursting(%d, %d) = %v, want %v", tc.sent, tc.limit, got, tc.want)
			}
		})
	}
	if BurstPolicy != (Policy{Mode: Cooldown, Window: time.Minute, MaxWait: 5 * time.Minute}) {
		t.Errorf("BurstPolicy = %+v, want a 1m cooldown capped at 5m", BurstPolicy)
	}
}

func TestLeadsNow(t *testing.T) {
	t.Parallel()
	now := utc(2026, 11, 22, 10, 0)
	lead := Policy{Mode: Cooldown, Window: 5 * time.Minute, Lead: true}
	cases := []struct {
		name    string
		p       Policy
		hasOpen bool
		last    time.Time
		want    bool
	}{
		{"FirstEver", lead, false, time.Time{}, true},
		{"QuietLongEnough", lead, false, now.Add(-time.Hour), true},
		{"ExactlyOneWindow", lead, false, now.Add(-5 * time.Minute), true},
		{"WithinWindow", lead, false, now.Add(-5*time.Minute + time.Second), false},
		{"BatchOpen", lead, true, time.Time{}, false},
		{"LeadOff", Policy{Mode: Cooldown, Window: 5 * time.Minute}, false, time.Time{}, false},
		{"NotCooldown", Policy{Mode: Daily, Window: 5 * time.Minute, Lead: true}, false, time.Time{}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := LeadsNow(tc.p, tc.hasOpen, tc.last, now); got != tc.want {
				t.Fatalf("LeadsNow = %v, want %v", got, tc.want)
			}
		})
	}
}

func BenchmarkCloseTime(b *testing.B) {
	berlin := zone(b, "Europe/Berlin")
	s := Schedule{Location: berlin, DailyAt: 8 * 60, Quiet: QuietHours{Start: 22 * 60, End: 7 * 60, Enabled: true}}
	opened := utc(2026, 11, 22, 10, 0)
	b.Run("DailyBerlin", func(b *testing.B) {
		b.ReportAllocs()
		p := Policy{Mode: Daily}
		for b.Loop() {
			CloseTime(p, s, opened, opened)
		}
	})
	b.Run("Cooldown", func(b *testing.B) {
		b.ReportAllocs()
		p := Policy{Mode: Cooldown, Window: 5 * time.Minute, MaxWait: time.Hour}
		last := opened.Add(time.Minute)
		for b.Loop() {
			CloseTime(p, s, opened, last)
		}
	})
}
