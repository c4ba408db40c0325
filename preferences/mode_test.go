package preferences

import (
	"strings"
	"testing"
	"time"
)

func TestParseMode(t *testing.T) {
	t.Parallel()
	for _, m := range []Mode{Never, Immediate, Cooldown, Daily, Weekly} {
		t.Run("Accepts"+strings.ToUpper(string(m[:1]))+string(m[1:]), func(t *testing.T) {
			t.Parallel()
			got, err := ParseMode(string(m))
			if err != nil || got != m {
				t.Fatalf("ParseMode(%q) = %q, %v", m, got, err)
			}
		})
	}
	// Callers store the string they validated, so anything but the exact
	// spelling must be refused.
	for name, s := range map[string]string{"Empty": "", "Unknown": "fortnightly", "Capitalised": "Daily", "Padded": " daily"} {
		t.Run("Refuses"+name, func(t *testing.T) {
			t.Parallel()
			_, err := ParseMode(s)
			if err == nil {
				t.Fatalf("ParseMode(%q) accepted", s)
			}
			for _, m := range []string{"never", "immediate", "cooldown", "daily", "weekly"} {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q does not name %s", err, m)
				}
			}
		})
	}
}

func TestParseTimeOfDay(t *testing.T) {
	t.Parallel()
	good := []struct {
		in   string
		want TimeOfDay
	}{
		{"00:00", 0},
		{"08:00", 480},
		{"8:05", 485},
		{"12:30", 750},
		{"23:59", 1439},
	}
	for _, tc := range good {
		t.Run("Accepts"+strings.ReplaceAll(tc.in, ":", ""), func(t *testing.T) {
			t.Parallel()
			got, err := ParseTimeOfDay(tc.in)
			if err != nil || got != tc.want {
				t.Fatalf("ParseTimeOfDay(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
			}
		})
	}
	bad := map[string]string{
		"Empty": "", "Midnight24": "24:00", "BareHour": "7", "Minute60": "08:60", "OneDigitMinute": "8:5",
		"ThreeDigitHour": "008:00", "Seconds": "08:00:00", "PlusSign": "+8:00", "SignedMinute": "08:+5",
		"Negative": "-1:00", "Letters": "ab:cd", "Space": " 8:00", "NoHour": ":30", "Dot": "08.00",
		"LetterHour": "A:00", "LetterMinute": "08:0A",
	}
	for name, in := range bad {
		t.Run("Refuses"+name, func(t *testing.T) {
			t.Parallel()
			if got, err := ParseTimeOfDay(in); err == nil {
				t.Fatalf("ParseTimeOfDay(%q) = %d, want an error", in, got)
			}
		})
	}
}

func TestTimeOfDayString(t *testing.T) {
	t.Parallel()
	t.Run("RoundTripsEveryMinute", func(t *testing.T) {
		t.Parallel()
		for m := TimeOfDay(0); m < 1440; m++ {
			back, err := ParseTimeOfDay(m.String())
			if err != nil || back != m {
				t.Fatalf("%d -> %q -> %d, %v", m, m.String(), back, err)
			}
		}
	})
	cases := []struct {
		name string
		in   TimeOfDay
		want string
	}{
		{"Morning", 480, "08:00"},
		{"Padded", 5, "00:05"},
		{"LastMinute", 1439, "23:59"},
		{"OverflowWraps", 1440 + 60, "01:00"},
		{"NegativeWraps", -1, "23:59"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := tc.in.String(); got != tc.want {
				t.Fatalf("TimeOfDay(%d).String() = %q, want %q", int(tc.in), got, tc.want)
			}
		})
	}
}

func TestParseWeekday(t *testing.T) {
	t.Parallel()
	good := []struct {
		in   string
		want time.Weekday
	}{
		{"monday", time.Monday}, {"tuesday", time.Tuesday}, {"wednesday", time.Wednesday},
		{"thursday", time.Thursday}, {"friday", time.Friday}, {"saturday", time.Saturday}, {"sunday", time.Sunday},
		{"mon", time.Monday}, {"Mon", time.Monday}, {"MONDAY", time.Monday}, {" Friday ", time.Friday},
		{"sun", time.Sunday}, {"thu", time.Thursday},
	}
	for _, tc := range good {
		t.Run("Accepts"+strings.ToUpper(strings.TrimSpace(tc.in)), func(t *testing.T) {
			t.Parallel()
			got, err := ParseWeekday(tc.in)
			if err != nil || got != tc.want {
				t.Fatalf("ParseWeekday(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
			}
		})
	}
	bad := map[string]string{"Empty": "", "TwoLetters": "mo", "FourLetters": "mond", "Unknown": "funday", "Trailing": "monday1", "Number": "1"}
	for name, in := range bad {
		t.Run("Refuses"+name, func(t *testing.T) {
			t.Parallel()
			if _, err := ParseWeekday(in); err == nil {
				t.Fatalf("ParseWeekday(%q) accepted", in)
			}
		})
	}
}

func TestWeekdayName(t *testing.T) {
	t.Parallel()
	want := map[time.Weekday]string{time.Sunday: "sunday", time.Monday: "monday", time.Saturday: "saturday", 8: "monday", -1: "saturday"}
	for d, name := range want {
		if got := WeekdayName(d); got != name {
			t.Errorf("WeekdayName(%d) = %q, want %q", int(d), got, name)
		}
	}
	for d := time.Sunday; d <= time.Saturday; d++ {
		if back, err := ParseWeekday(WeekdayName(d)); err != nil || back != d {
			t.Errorf("%v -> %q -> %v, %v", d, WeekdayName(d), back, err)
		}
	}
}

func TestParseWindow(t *testing.T) {
	t.Parallel()
	good := map[string]time.Duration{"1s": time.Second, "90s": 90 * time.Second, "5m": 5 * time.Minute, "1h30m": 90 * time.Minute, "1.5s": 1500 * time.Millisecond}
	for in, want := range good {
		t.Run("Accepts"+in, func(t *testing.T) {
			t.Parallel()
			if got, err := ParseWindow(in); err != nil || got != want {
				t.Fatalf("ParseWindow(%q) = %v, %v; want %v", in, got, err, want)
			}
		})
	}
	bad := map[string]string{"Empty": "", "Zero": "0", "ZeroSeconds": "0s", "UnderASecond": "999ms", "Negative": "-5m", "Word": "soon", "NoUnit": "90"}
	for name, in := range bad {
		t.Run("Refuses"+name, func(t *testing.T) {
			t.Parallel()
			if got, err := ParseWindow(in); err == nil {
				t.Fatalf("ParseWindow(%q) = %v, want an error", in, got)
			}
		})
	}
}

func TestParseMaxWait(t *testing.T) {
	t.Parallel()
	good := map[string]time.Duration{"0": 0, "0s": 0, "0m": 0, "1s": time.Second, "2h": 2 * time.Hour, "24h": 24 * time.Hour}
	for in, want := range good {
		t.Run("Accepts"+in, func(t *testing.T) {
			t.Parallel()
			if got, err := ParseMaxWait(in); err != nil || got != want {
				t.Fatalf("ParseMaxWait(%q) = %v, %v; want %v", in, got, err, want)
			}
		})
	}
	bad := map[string]string{"Empty": "", "UnderASecond": "500ms", "Negative": "-1s", "NegativeHour": "-1h", "Word": "x", "NoUnit": "60"}
	for name, in := range bad {
		t.Run("Refuses"+name, func(t *testing.T) {
			t.Parallel()
			if got, err := ParseMaxWait(in); err == nil {
				t.Fatalf("ParseMaxWait(%q) = %v, want an error", in, got)
			}
		})
	}
}

func TestFormatDuration(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		in   time.Duration
		want string
	}{
		{"Zero", 0, "0"},
		{"Second", time.Second, "1s"},
		{"Seconds", 45 * time.Second, "45s"},
		{"NinetySeconds", 90 * time.Second, "90s"},
		{"Minute", time.Minute, "1m"},
		{"TwoMinutes", 2 * time.Minute, "2m"},
		{"MinutesAndSeconds", 2*time.Minute + 30*time.Second, "2m30s"},
		{"FiveMinutes", 5 * time.Minute, "5m"},
		{"Hour", time.Hour, "1h"},
		{"HourAndHalf", 90 * time.Minute, "1h30m"},
		{"HourAndSeconds", time.Hour + 5*time.Second, "1h5s"},
		{"Day", 24 * time.Hour, "24h"},
		{"Fraction", 1500 * time.Millisecond, "1.5s"},
		{"Negative", -5 * time.Minute, "-5m0s"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := FormatDuration(tc.in)
			if got != tc.want {
				t.Fatalf("FormatDuration(%v) = %q, want %q", tc.in, got, tc.want)
			}
			back, err := time.ParseDuration(got)
			if err != nil || back != tc.in {
				t.Fatalf("%q reads back as %v, %v", got, back, err)
			}
		})
	}
	t.Run("RoundTripsThroughParsers", func(t *testing.T) {
		t.Parallel()
		for d := time.Second; d <= 25*time.Hour; d += 7 * time.Second {
			if back, err := ParseWindow(FormatDuration(d)); err != nil || back != d {
				t.Fatalf("ParseWindow(FormatDuration(%v) = %q) = %v, %v", d, FormatDuration(d), back, err)
			}
			if back, err := ParseMaxWait(FormatDuration(d)); err != nil || back != d {
				t.Fatalf("ParseMaxWait(FormatDuration(%v) = %q) = %v, %v", d, FormatDuration(d), back, err)
			}
		}
		if back, err := ParseMaxWait(FormatDuration(0)); err != nil || back != 0 {
			t.Fatalf("ParseMaxWait(FormatDuration(0)) = %v, %v", back, err)
		}
	})
}

func TestEffective(t *testing.T) {
	t.Parallel()
	dur := func(d time.Duration) *time.Duration { return &d }
	yes, no := true, false
	daily := TypeDefaults{Mode: Daily, Window: 10 * time.Minute, MaxWait: time.Hour, Lead: true}
	required := TypeDefaults{Required: true, Mode: Cooldown, Window: 10 * time.Minute, MaxWait: time.Hour}
	cases := []struct {
		name  string
		t     TypeDefaults
		o     *Override
		unsub bool
		want  Policy
	}{
		{"TypeDefaults", daily, nil, false, Policy{Mode: Daily, Window: 10 * time.Minute, MaxWait: time.Hour, Lead: true}},
		{"EmptyOverrideFallsBack", daily, &Override{}, false, Policy{Mode: Daily, Window: 10 * time.Minute, MaxWait: time.Hour, Lead: true}},
		{"ModeOnlyKeepsTypeParameters", daily, &Override{Mode: Cooldown}, false, Policy{Mode: Cooldown, Window: 10 * time.Minute, MaxWait: time.Hour, Lead: true}},
		{"EveryField", daily, &Override{Mode: Cooldown, Window: dur(5 * time.Minute), MaxWait: dur(0), Lead: &no}, false, Policy{Mode: Cooldown, Window: 5 * time.Minute, MaxWait: 0, Lead: false}},
		{"LeadOn", TypeDefaults{Mode: Cooldown, Window: time.Minute}, &Override{Lead: &yes}, false, Policy{Mode: Cooldown, Window: time.Minute, Lead: true}},
		{"ZeroWindowFallsBackToType", daily, &Override{Mode: Cooldown, Window: dur(0)}, false, Policy{Mode: Cooldown, Window: 10 * time.Minute, MaxWait: time.Hour, Lead: true}},
		{"NoWindowAnywhere", TypeDefaults{Mode: Immediate}, &Override{Mode: Cooldown}, false, Policy{Mode: Cooldown, Window: 5 * time.Minute}},
		{"NegativeMaxWaitIsNoCap", daily, &Override{Mode: Cooldown, MaxWait: dur(-time.Minute)}, false, Policy{Mode: Cooldown, Window: 10 * time.Minute, Lead: true}},
		{"UnknownOverrideModeIgnored", daily, &Override{Mode: "fortnightly"}, false, Policy{Mode: Daily, Window: 10 * time.Minute, MaxWait: time.Hour, Lead: true}},
		{"EmptyTypeModeIsImmediate", TypeDefaults{}, nil, false, Policy{Mode: Immediate}},
		{"UnknownTypeModeIsImmediate", TypeDefaults{Mode: "fortnightly"}, nil, false, Policy{Mode: Immediate}},
		{"OverrideNever", daily, &Override{Mode: Never}, false, Policy{Mode: Never, Window: 10 * time.Minute, MaxWait: time.Hour, Lead: true}},
		{"Unsubscribed", daily, nil, true, Policy{Mode: Never, Window: 10 * time.Minute, MaxWait: time.Hour, Lead: true}},
		{"UnsubscribedBeatsOverride", daily, &Override{Mode: Immediate}, true, Policy{Mode: Never, Window: 10 * time.Minute, MaxWait: time.Hour, Lead: true}},
		{"RequiredIgnoresNever", required, &Override{Mode: Never}, false, Policy{Mode: Cooldown, Window: 10 * time.Minute, MaxWait: time.Hour}},
		{"RequiredIgnoresUnsubscribe", required, nil, true, Policy{Mode: Cooldown, Window: 10 * time.Minute, MaxWait: time.Hour}},
		{"RequiredKeepsOtherChoiceWhenUnsubscribed", required, &Override{Mode: Weekly}, true, Policy{Mode: Weekly, Window: 10 * time.Minute, MaxWait: time.Hour}},
		{"RequiredWithNeverDefault", TypeDefaults{Required: true, Mode: Never}, nil, false, Policy{Mode: Immediate}},
		{"RequiredWithNeverDefaultAndNeverOverride", TypeDefaults{Required: true, Mode: Never}, &Override{Mode: Never}, true, Policy{Mode: Immediate}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := Effective(tc.t, tc.o, tc.unsub); got != tc.want {
				t.Fatalf("Effective = %+v, want %+v", got, tc.want)
			}
		})
	}
}
