package web

import (
	"fmt"
	"net/http"
	"time"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/views"
)

func (s *Server) dashboard(w http.ResponseWriter, r *http.Request) {
	now := s.now()
	day, err := db.DashboardStats(r.Context(), s.DB.Pool, now.Add(-24*time.Hour), now)
	if err != nil {
		s.pageError(w, r, err)
		return
	}
	hour, err := db.DashboardStats(r.Context(), s.DB.Pool, now.Add(-time.Hour), now)
	if err != nil {
		s.pageError(w, r, err)
		return
	}
	rates, err := db.DeliveryRates(r.Context(), s.DB.Pool, now)
	if err != nil {
		s.pageError(w, r, err)
		return
	}
	v := views.DashboardView{AdminPage: s.adminPage(r, "Dashboard", "dashboard"),
		Day: statCards(day, true), Hour: statCards(hour, false), ChartTitle: "Emails sent per hour, last 24 hours",
		Rates:    deliveryRateRows(rates),
		DaySince: fmtTime(ptr(now.Add(-24 * time.Hour))), HourSince: fmtTime(ptr(now.Add(-time.Hour))),
		WindowNote: "The last hour is part of the last 24 hours: each row counts everything since its start, " +
			"so the two are equal when nothing happened before the last hour."}
	v.Chart, v.ChartMax = bars(day.SentPerHour)
	v.Ticks = hourTicks(now, len(day.SentPerHour))
	s.render(w, r, http.StatusOK, views.Dashboard(v))
}

func ptr[T any](v T) *T { return &v }

// statCards are one window's figures. Their notes say how they add up:
// emails sent carried sent+saved notifications (saved is what bundling
// spared), while notifications made in the window may still wait in open
// batches, be skipped, or have gone out in an email counted later.
func statCards(st *db.Stats, withBacklog bool) []views.Stat {
	carried := st.EmailsSent + st.EmailsSaved
	ratio := "no emails sent"
	if st.EmailsSent > 0 {
		ratio = fmt.Sprintf("%s in %s (%.1f per email)", plural(carried, "notification"), plural(st.EmailsSent, "email"), float64(carried)/float64(st.EmailsSent))
	}
	cards := []views.Stat{
		{Label: "Events in", Value: fmt.Sprint(st.Events), Note: "accepted by the API"},
		{Label: "Notifications", Value: fmt.Sprint(st.Notifications), Note: "one per recipient of an event; those not yet in a sent email wait in open batches or were skipped"},
		{Label: "Emails sent", Value: fmt.Sprint(st.EmailsSent), Note: "carrying " + plural(carried, "notification")},
		{Label: "Emails saved", Value: fmt.Sprint(st.EmailsSaved), Note: ratio + fmt.Sprintf(": %d − %d = %d spared by bundling", carried, st.EmailsSent, st.EmailsSaved)},
		{Label: "Delivery failures", Value: fmt.Sprint(st.Failures)},
		{Label: "Lateness p50 / p99", Value: lateness(st.LatenessP50) + " / " + lateness(st.LatenessP99), Note: "sent minus due time"},
	}
	if withBacklog {
		cards = append(cards, views.Stat{Label: "Open batches", Value: fmt.Sprint(st.OpenBatches)},
			views.Stat{Label: "Due in the next hour", Value: fmt.Sprint(st.DueNextHour)})
	}
	return cards
}

func lateness(d time.Duration) string {
	if d < time.Second {
		return fmt.Sprintf("%dms", d.Milliseconds())
	}
	return d.Round(100 * time.Millisecond).String()
}

// The chart's plot area: x from chartLeft to 520, y from 10 to 110; the
// rest holds the axes' labels.
const chartLeft, chartWidth = 40.0, 480.0

// bars lays out a bar chart of values in the plot area.
func bars(values []int) ([]views.Bar, string) {
	top := 0
	for _, v := range values {
		top = max(top, v)
	}
	scale := float64(max(top, 1))
	w := chartWidth / float64(max(len(values), 1))
	out := make([]views.Bar, len(values))
	for i, v := range values {
		h := 100 * float64(v) / scale
		out[i] = views.Bar{X: chartLeft + float64(i)*w + 1, Y: 110 - h, W: w - 2, H: h,
			Title: fmt.Sprintf("%d emails, %d to %d hours ago", v, len(values)-i, len(values)-i-1)}
	}
	return out, fmt.Sprint(top)
}

// hourTicks labels every sixth hour of the chart with the UTC hour its
// bar starts at, and the right edge with "now".
func hourTicks(now time.Time, n int) []views.Tick {
	w := chartWidth / float64(max(n, 1))
	var out []views.Tick
	for i := 0; i < n; i += 6 {
		start := now.Add(-time.Duration(n-i) * time.Hour).UTC()
		out = append(out, views.Tick{X: chartLeft + float64(i)*w, Label: start.Format("15:04")})
	}
	return append(out, views.Tick{X: chartLeft + chartWidth - 12, Label: "now"})
}
