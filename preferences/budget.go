package preferences

import "time"

// The daily email budget caps the emails a recipient gets in one of their
// local calendar days. A day, not a rolling 24 hours: "3 emails a day" is
// what a person reads on the settings page, a day has one fixed start, so
// what was held has one obvious time to go out (the next day's digest
// time) and the simulator can tell which day an email counted against
// without remembering when each earlier one went out.
//
// Emails of required types are neither counted nor held. An email that
// would go over the budget is not dropped: its notifications are moved
// into the recipient's one held batch (HeldKey), a digest that goes out at
// HeldCloses and counts as the first email of that day.

// HeldKey is the batch key of a recipient's held digest.
const HeldKey = "budget:held"

// MaxDailyBudget bounds a budget: past it, a cap is no cap.
const MaxDailyBudget = 1000

// DailyBudget is the budget that applies to an email: the recipient's own
// when they set one (0 included: they chose no limit), else the smallest
// that the email's types set, else the installation's
// (LULL_DAILY_EMAIL_BUDGET). 0 is no limit. The types' budgets are
// defaults for recipients who chose nothing, so a noisy type can yield
// once the recipient's day is full without every recipient setting it.
func DailyBudget(recipient *int, types []*int, install int) int {
	if recipient != nil {
		return max(*recipient, 0)
	}
	found := false
	least := 0
	for _, t := range types {
		if t != nil && (!found || *t < least) {
			found, least = true, max(*t, 0)
		}
	}
	if found {
		return least
	}
	return max(install, 0)
}

// BudgetDay is the recipient's local calendar day that holds t, as a date
// at midnight UTC (the form PostgreSQL's date takes).
func BudgetDay(t time.Time, s Schedule) time.Time {
	y, m, d := t.In(s.location()).Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

// HeldCloses is when a digest held back at now goes out: the daily digest
// time of the recipient's next local day (after quiet hours), so what
// the budget held waits one night at most and opens that day's budget.
func HeldCloses(now time.Time, s Schedule) time.Time {
	loc := s.location()
	y, m, d := now.In(loc).Date()
	midnight := localTime(loc, y, m, d+1, 0)
	return AfterQuiet(NextDaily(midnight.Add(-time.Nanosecond), s), s)
}
