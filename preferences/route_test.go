package preferences

import (
	"testing"
	"time"
)

func TestRoute(t *testing.T) {
	t.Parallel()
	now := utc(2026, 11, 22, 10, 0)
	imm := Policy{Mode: Immediate}
	lead := Policy{Mode: Cooldown, Window: 10 * time.Minute, MaxWait: time.Hour, Lead: true}
	cool := Policy{Mode: Cooldown, Window: 10 * time.Minute}
	cases := []struct {
		name  string
		p     Policy
		limit int
		h     RouteHistory
		want  Policy
	}{
		{"ImmediateUnderLimit", imm, 3, RouteHistory{RecentImmediate: 2}, imm},
		{"ImmediateAtLimitBursts", imm, 3, RouteHistory{RecentImmediate: 3}, BurstPolicy},
		{"ImmediateJoinsOpenBurst", imm, 3, RouteHistory{HasOpen: true}, BurstPolicy},
		{"GuardOff", imm, 0, RouteHistory{RecentImmediate: 50, HasOpen: true}, imm},
		{"LeadFirstOfQuietPeriod", lead, 3, RouteHistory{}, imm},
		{"LeadAfterAWindowOfQuiet", lead, 3, RouteHistory{Last: now.Add(-10 * time.Minute)}, imm},
		{"LeadWithinTheWindow", lead, 3, RouteHistory{Last: now.Add(-9 * time.Minute)}, lead},
		{"LeadWithAnOpenBatch", lead, 3, RouteHistory{HasOpen: true}, lead},
		{"CooldownWithoutLead", cool, 3, RouteHistory{RecentImmediate: 9}, cool},
		{"Daily", Policy{Mode: Daily}, 3, RouteHistory{RecentImmediate: 9, HasOpen: true}, Policy{Mode: Daily}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := Route(tc.p, tc.limit, tc.h, now); got != tc.want {
				t.Fatalf("Route = %+v, want %+v", got, tc.want)
			}
			// Whenever the history changes the answer, NeedsHistory must
			// have asked for it.
			if got := Route(tc.p, tc.limit, RouteHistory{}, now); got != Route(tc.p, tc.limit, tc.h, now) && !NeedsHistory(tc.p, tc.limit) {
				t.Fatalf("the history changed the policy but NeedsHistory is false")
			}
		})
	}
}

func TestSettleClose(t *testing.T) {
	t.Parallel()
	opened := utc(2026, 11, 22, 10, 0)
	now := opened.Add(3 * time.Minute)
	cool := Policy{Mode: Cooldown, Window: 5 * time.Minute}
	if got := SettleClose(cool, Schedule{}, opened, now, now, 2, 3); !got.Equal(now.Add(5 * time.Minute)) {
		t.Fatalf("below max items: %v, want the window", got)
	}
	if got := SettleClose(cool, Schedule{}, opened, now, now, 3, 3); !got.Equal(now) {
		t.Fatalf("at max items: %v, want now", got)
	}
	if got := SettleClose(cool, Schedule{}, opened, now, now, 300, 0); !got.Equal(now.Add(5 * time.Minute)) {
		t.Fatalf("no limit: %v, want the window", got)
	}
	daily := Policy{Mode: Daily}
	if got := SettleClose(daily, Schedule{DailyAt: 8 * 60}, opened, now, now, 300, 3); !got.Equal(utc(2026, 11, 23, 8, 0)) {
		t.Fatalf("a digest ignores max items: %v", got)
	}
}
