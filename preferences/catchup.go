package preferences

import "time"

// SlowsDown reports whether catch-up slows mode m to Weekly: every mode
// that would send sooner than weekly. Weekly and Monthly stay.
func SlowsDown(m Mode) bool {
	switch m {
	case Immediate, Cooldown, Hourly, Daily:
		return true
	}
	return false
}

// Absent reports whether a recipient last seen at seen counts as absent
// at now under a catch-up period of days. Never seen (zero) is not
// absent: an installation that reports no visits must not slow everyone.
func Absent(seen, now time.Time, days int) bool {
	return days > 0 && !seen.IsZero() && seen.Before(AbsentCutoff(now, days))
}

// AbsentCutoff is the last visit before which a recipient is absent.
func AbsentCutoff(now time.Time, days int) time.Time {
	return now.Add(-time.Duration(days) * 24 * time.Hour)
}
