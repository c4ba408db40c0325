package metrics

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/lull-dev/lull/db"
)

// rateCollector gives the bounce and complaint rates of the emails sent
// in the last db.RateWindow, per type and overall (type "all"), with a
// level beside each: 0 below db.RateWarning (0.1 %), 1 from it, 2 from
// db.RateBad (0.3 %). The rates move slowly and their query reads a
// week of deliveries, so one reading serves every scrape for a minute.
type rateCollector struct {
	pool                         *pgxpool.Pool
	sent, bounce, complaint, lvl *prometheus.Desc

	mu    sync.Mutex
	at    time.Time
	rates []db.DeliveryRate
}

// rateTTL is how long one reading of the rates is served.
const rateTTL = time.Minute

func newRateCollector(pool *pgxpool.Pool) *rateCollector {
	return &rateCollector{pool: pool,
		sent: prometheus.NewDesc("lull_sent_window_emails", "Emails sent in the last 7 days, by type (\"all\" for every type).", []string{"type"}, nil),
		bounce: prometheus.NewDesc("lull_bounce_rate", "Hard bounces heard in the last 7 days ÷ emails sent in them, by type.",
			[]string{"type"}, nil),
		complaint: prometheus.NewDesc("lull_complaint_rate", "Complaints heard in the last 7 days ÷ emails sent in them, by type.",
			[]string{"type"}, nil),
		lvl: prometheus.NewDesc("lull_deliverability_level", "How a rate stands: 0 below 0.1 %, 1 (warning) from 0.1 %, 2 (bad) from 0.3 %.",
			[]string{"type", "rate"}, nil),
	}
}

func (c *rateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.sent
	ch <- c.bounce
	ch <- c.complaint
	ch <- c.lvl
}

func (c *rateCollector) Collect(ch chan<- prometheus.Metric) {
	rates, err := c.read()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.bounce, fmt.Errorf("delivery rates: %w", err))
		return
	}
	levels := map[string]float64{"ok": 0, "warning": 1, "bad": 2}
	for _, r := range rates {
		t := r.Type
		if t == "" {
			t = "all"
		}
		ch <- prometheus.MustNewConstMetric(c.sent, prometheus.GaugeValue, float64(r.Sent), t)
		ch <- prometheus.MustNewConstMetric(c.bounce, prometheus.GaugeValue, r.BounceRate(), t)
		ch <- prometheus.MustNewConstMetric(c.complaint, prometheus.GaugeValue, r.ComplaintRate(), t)
		ch <- prometheus.MustNewConstMetric(c.lvl, prometheus.GaugeValue, levels[db.RateLevel(r.BounceRate())], t, "bounce")
		ch <- prometheus.MustNewConstMetric(c.lvl, prometheus.GaugeValue, levels[db.RateLevel(r.ComplaintRate())], t, "complaint")
	}
}

// read returns the rates, read again when the last reading is older
// than rateTTL.
func (c *rateCollector) read() ([]db.DeliveryRate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.rates != nil && time.Since(c.at) < rateTTL {
		return c.rates, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), queueTimeout)
	defer cancel()
	rates, err := db.DeliveryRates(ctx, c.pool, time.Now())
	if err != nil {
		return nil, err
	}
	c.rates, c.at = rates, time.Now()
	return rates, nil
}
