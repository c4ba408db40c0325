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
		Rates: deliveryRateRows(rates)}
	v.Chart, v.ChartMax = bars(day.SentPerHour)
	s.render(w, r, http.StatusOK, views.Dashboard(v))
}

func statCards(st *db.Stats, withBacklog bool) []views.Stat {
	ratio := "–"
	if st.EmailsSent > 0 {
		ratio = fmt.Sprintf("%.1f notifications per email", float64(st.EmailsSent+st.EmailsSaved)/float64(st.EmailsSent))
	}
	cards := []views.Stat{
		{Label: "Events in", Value: fmt.Sprint(st.Events)},
		{Label: "Notifications", Value: fmt.Sprint(st.Notifications)},
		{Label: "Emails sent", Value: fmt.Sprint(st.EmailsSent)},
		{Label: "Emails saved", Value: fmt.Sprint(st.EmailsSaved), Note: ratio},
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

// bars lays out a bar chart of values in a 480x110 box.
func bars(values []int) ([]views.Bar, string) {
	top := 0
	for _, v := range values {
		top = max(top, v)
	}
	scale := float64(max(top, 1))
	w := 480.0 / float64(max(len(values), 1))
	out := make([]views.Bar, len(values))
	for i, v := range values {
		h := 100 * float64(v) / scale
		out[i] = views.Bar{X: float64(i)*w + 1, Y: 110 - h, W: w - 2, H: h,
			Title: fmt.Sprintf("%d emails, %d to %d hours ago", v, len(values)-i, len(values)-i-1)}
	}
	return out, fmt.Sprint(top)
}
