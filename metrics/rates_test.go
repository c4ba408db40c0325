package metrics

import (
	"context"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/db/dbtest"
)

// TestRatesPerTypeAndOverall: hard bounces and complaints heard in the
// last week, over the emails sent in it, per type and overall, each with
// its level; a report heard twice counts once, and what was sent or
// heard before the window counts not at all.
func TestRatesPerTypeAndOverall(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx := context.Background()
	now := time.Now()
	// sent inserts n sent emails of a type (or a digest's batch key)
	// and returns their batch ids.
	sent := func(typ *string, key string, n int, at time.Time) []int64 {
		rows, err := d.Pool.Query(ctx, `
			WITH b AS (
			    INSERT INTO batches (recipient_id, batch_key, type_key, mode, state, opened_at, last_event_at, closes_at)
			    SELECT 'r' || i, $2, $1, 'cooldown', 'sent', $4, $4, $4 FROM generate_series(1, $3) i
			    RETURNING id)
			INSERT INTO deliveries (batch_id, state, message_id, sent_at)
			SELECT id, 'sent', 'm' || id, $4 FROM b RETURNING batch_id`, typ, key, n, at)
		if err != nil {
			t.Fatal(err)
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			t.Fatal(err)
		}
		return ids
	}
	heard := func(kind, address string, batch int64) {
		err := d.InTx(ctx, func(tx pgx.Tx) error {
			return db.RecordBounce(ctx, tx, db.BounceReport{Address: address, Kind: kind, BatchID: batch, Source: "smtp"}, db.SoftBouncePolicy{Threshold: 3, Decay: time.Hour}, now)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	comment := "comment"
	comments := sent(&comment, "comment", 1000, now.Add(-time.Hour))
	digests := sent(nil, "digest:daily", 100, now.Add(-time.Hour))
	sent(&comment, "comment", 500, now.Add(-8*24*time.Hour)) // before the window
	heard("hard", "a@example.com", comments[0])
	heard("hard", "a@example.com", comments[0]) // heard again
	heard("hard", "b@example.com", comments[1])
	heard("complaint", "c@example.com", comments[2])
	heard("complaint", "d@example.com", digests[0])

	m := New("test")
	m.WatchDatabase(d.Pool)
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	text := string(body)
	for _, line := range []string{
		`lull_sent_window_emails{type="all"} 1100`,
		`lull_sent_window_emails{type="comment"} 1000`,
		`lull_sent_window_emails{type="digest:daily"} 100`,
		`lull_bounce_rate{type="comment"} 0.002`,
		`lull_complaint_rate{type="comment"} 0.001`,
		`lull_complaint_rate{type="digest:daily"} 0.01`,
		`lull_deliverability_level{rate="bounce",type="comment"} 1`,
		`lull_deliverability_level{rate="complaint",type="digest:daily"} 2`,
		`lull_deliverability_level{rate="bounce",type="digest:daily"} 0`,
	} {
		if !strings.Contains(text, line+"\n") {
			t.Errorf("scrape lacks %q", line)
		}
	}
	if t.Failed() {
		t.Log(text)
	}
}
