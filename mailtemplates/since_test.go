package mailtemplates

import (
	"strings"
	"testing"
	"time"

	"github.com/lull-dev/lull/i18n"
)

// TestSinceReadsInTheLanguagesGrammar: the digest's "since …" is one
// phrase per kind of start (a time today, a weekday, a date) in each
// language, because a preposition bends what follows it: Russian takes
// the genitive ("со вторника", not "с вторник"), Spanish and French an
// article ("desde el martes", "depuis le 11 novembre"), German "seit
// dem 11. November".
func TestSinceReadsInTheLanguagesGrammar(t *testing.T) {
	t.Parallel()
	tuesday, date, today := sent.Add(-6*24*time.Hour), sent.Add(-12*24*time.Hour), sent.Add(-time.Hour)
	for _, c := range []struct {
		locale string
		since  time.Time
		want   string
	}{
		{"ru", tuesday, "со вторника"},
		{"es", tuesday, "desde el martes"},
		{"es", date, "desde el 11 de noviembre"},
		{"es", today, "desde las 07:00 CET"},
		{"fr", date, "depuis le 11 novembre"},
		{"de", date, "seit dem 11. November"},
		{"de", tuesday, "seit Dienstag"},
		{"en", tuesday, "since Tuesday"},
		{"en", date, "since November 11"},
		{"ja", tuesday, "火曜日以降の"},
		{"ar", tuesday, "منذ الثلاثاء"},
	} {
		in := input("daily", comments(), shares())
		in.Since, in.Locale = c.since, i18n.Resolve(c.locale, "", "")
		m, doc := render(t, in)
		if got := doc.Find(`[data-testid=summary]`).Text(); !strings.Contains(got, c.want) {
			t.Errorf("%s: summary %q lacks %q", c.locale, got, c.want)
		}
		if !strings.Contains(m.Text, c.want) {
			t.Errorf("%s: text part lacks %q", c.locale, c.want)
		}
	}
}
