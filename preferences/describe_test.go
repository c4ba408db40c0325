package preferences

import (
	"strings"
	"testing"
	"time"

	"github.com/lull-dev/lull/i18n"
)

func TestDescribe(t *testing.T) {
	t.Parallel()
	berlin := zone(t, "Europe/Berlin")
	s := Schedule{Location: berlin, DailyAt: 8 * 60, WeeklyOn: time.Monday, WeeklyAt: 9 * 60}
	quiet := s
	quiet.Quiet = QuietHours{Start: 22 * 60, End: 7 * 60, Enabled: true}
	early := quiet
	early.DailyAt, early.WeeklyAt = 6*60, 23*60
	utcWeekly := Schedule{WeeklyOn: time.Monday, WeeklyAt: 8 * 60}
	m := time.Minute
	cases := []struct {
		name string
		p    Policy
		s    Schedule
		want string
	}{
		{"Never", Policy{Mode: Never}, s, "Nothing by email."},
		{"NeverWithQuietHours", Policy{Mode: Never}, quiet, "Nothing by email."},
		{"Immediate", Policy{Mode: Immediate}, s, "An email for each one, as it happens."},
		{"ImmediateWithQuietHours", Policy{Mode: Immediate}, quiet, "An email for each one, as it happens. During your quiet hours (22:00 to 07:00) it waits until 07:00."},
		{"Cooldown", Policy{Mode: Cooldown, Window: 5 * m, MaxWait: time.Hour}, s, "You'll get one email 5 minutes after the last one, at most 1 hour after the first."},
		{"CooldownNoCap", Policy{Mode: Cooldown, Window: 15 * m}, s, "You'll get one email 15 minutes after the last one."},
		{"CooldownFixedWindow", Policy{Mode: Cooldown, Window: 10 * m, MaxWait: 10 * m}, s, "You'll get one email 10 minutes after the first one."},
		{"CooldownCapBelowWindow", Policy{Mode: Cooldown, Window: time.Hour, MaxWait: 15 * m}, s, "You'll get one email 15 minutes after the first one."},
		{"CooldownSeconds", Policy{Mode: Cooldown, Window: 90 * time.Second, MaxWait: 4 * time.Hour}, s, "You'll get one email 90 seconds after the last one, at most 4 hours after the first."},
		{"CooldownLead", Policy{Mode: Cooldown, Window: time.Minute, MaxWait: 24 * time.Hour, Lead: true}, s, "The first one at once; after that, one email 1 minute after the last one, at most 24 hours after the first."},
		{"CooldownWithQuietHours", Policy{Mode: Cooldown, Window: 5 * m}, quiet, "You'll get one email 5 minutes after the last one. During your quiet hours (22:00 to 07:00) it waits until 07:00."},
		{"Daily", Policy{Mode: Daily}, s, "One email a day at 08:00 (Europe/Berlin)."},
		{"DailyOutsideQuietHours", Policy{Mode: Daily}, quiet, "One email a day at 08:00 (Europe/Berlin)."},
		{"DailyInsideQuietHours", Policy{Mode: Daily}, early, "One email a day at 07:00 (Europe/Berlin), when your quiet hours end."},
		{"Weekly", Policy{Mode: Weekly}, utcWeekly, "One email every Monday at 08:00 (UTC)."},
		{"WeeklyBerlin", Policy{Mode: Weekly}, s, "One email every Monday at 09:00 (Europe/Berlin)."},
		{"WeeklyInsideQuietHoursMovesToNextDay", Policy{Mode: Weekly}, early, "One email every Tuesday at 07:00 (Europe/Berlin), when your quiet hours end."},
		{"UnknownMode", Policy{Mode: "fortnightly"}, s, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := Describe(tc.p, tc.s); got != tc.want {
				t.Fatalf("Describe =\n%q, want\n%q", got, tc.want)
			}
		})
	}
}

// TestDescribeMatchesCloseTime checks that what the settings page promises
// for a digest is where CloseTime actually puts it.
func TestDescribeMatchesCloseTime(t *testing.T) {
	t.Parallel()
	tokyo := zone(t, "Asia/Tokyo")
	opened := time.Date(2026, 11, 22, 12, 0, 0, 0, tokyo) // a Sunday
	quiets := map[string]QuietHours{
		"NoQuietHours":    {},
		"NightQuietHours": {Start: 22 * 60, End: 7 * 60, Enabled: true},
		"DayQuietHours":   {Start: 9 * 60, End: 17 * 60, Enabled: true},
	}
	var locales []i18n.Locale
	for _, tag := range i18n.Shipped() {
		locales = append(locales, i18n.Resolve(tag.String(), "", ""))
	}
	for name, q := range quiets {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			for at := TimeOfDay(0); at < 1440; at += 30 {
				s := Schedule{Location: tokyo, DailyAt: at, WeeklyOn: time.Wednesday, WeeklyAt: at, Quiet: q}
				for _, mode := range []Mode{Daily, Weekly} {
					closes := CloseTime(Policy{Mode: mode}, s, opened, opened).In(tokyo)
					text := Describe(Policy{Mode: mode}, s)
					want := " at " + closes.Format("15:04") + " "
					if mode == Weekly {
						want = "every " + closes.Weekday().String() + want
					}
					if !strings.Contains(text, want) {
						t.Fatalf("%s at %s: %q, but it closes %s", mode, at, text, closes.Format(localFormat))
					}
					// Every language names the same time and day.
					for _, l := range locales {
						text := DescribeIn(l, Policy{Mode: mode}, s)
						if !strings.Contains(text, closes.Format("15:04")) || mode == Weekly && !strings.Contains(text, l.Weekday(closes.Weekday())) {
							t.Fatalf("%s %s at %s: %q, but it closes %s", l.Tag(), mode, at, text, closes.Format(localFormat))
						}
					}
				}
			}
		})
	}
}

// TestDescribeInLocale: the settings page's sentences in a recipient's
// language, with its plural forms, weekday names and lists.
func TestDescribeInLocale(t *testing.T) {
	t.Parallel()
	berlin := zone(t, "Europe/Berlin")
	s := Schedule{Location: berlin, DailyAt: 8 * 60, WeeklyAt: 9 * 60, EveryHours: 4,
		WeeklyDays: WeekdaySet(0).With(time.Monday).With(time.Thursday)}
	quiet := s
	quiet.Quiet = QuietHours{Start: 22 * 60, End: 7 * 60, Enabled: true}
	cases := []struct {
		locale string
		p      Policy
		s      Schedule
		want   string
	}{
		{"de-AT", Policy{Mode: Weekly}, s, "Eine E-Mail jeden Montag und Donnerstag um 09:00 (Europe/Berlin)."},
		{"de", Policy{Mode: Cooldown, Window: time.Minute, MaxWait: 4 * time.Hour}, s, "Sie erhalten eine E-Mail 1 Minute nach der letzten, höchstens 4 Stunden nach der ersten."},
		{"fr", Policy{Mode: Immediate}, quiet, "Un e-mail pour chacune, dès qu’elle arrive. Pendant vos heures calmes (22:00 à 07:00), il attend jusqu’à 07:00."},
		{"ru", Policy{Mode: Cooldown, Window: 5 * time.Minute}, s, "Вы получите одно письмо через 5 минут после последнего."},
		{"ru", Policy{Mode: Cooldown, Window: 2 * time.Minute}, s, "Вы получите одно письмо через 2 минуты после последнего."},
		{"ja", Policy{Mode: Daily}, s, "毎日 08:00(Europe/Berlin)にメールが 1 通届きます。"},
		{"ar", Policy{Mode: Cooldown, Window: 2 * time.Hour}, s, "ستصلك رسالة واحدة عندما تمضي ساعتان على آخر إشعار."},
		{"es", Policy{Mode: Hourly}, s, "Hasta 6 correos al día, cada 4 horas a las 00:00, 04:00, 08:00, 12:00, 16:00 y 20:00 (Europe/Berlin)."},
	}
	// The settings page's script swaps the zone of every sentence when
	// another is picked, looking for it in ASCII parentheses.
	for _, tag := range i18n.Shipped() {
		for _, m := range []Mode{Hourly, Daily, Weekly, Monthly} {
			if got := DescribeIn(i18n.Resolve(tag.String(), "", ""), Policy{Mode: m}, quiet); !strings.Contains(got, "(Europe/Berlin)") {
				t.Errorf("%s %s: %q does not say (Europe/Berlin)", tag, m, got)
			}
		}
	}
	for _, c := range cases {
		if got := DescribeIn(i18n.Resolve(c.locale, "", "en"), c.p, c.s); got != c.want {
			t.Errorf("%s %s:\n got %q\nwant %q", c.locale, c.p.Mode, got, c.want)
		}
	}
}
