package db

import (
	"context"
	"fmt"
	"time"
)

// Stats are the dashboard's figures over one period.
type Stats struct {
	Events        int
	Notifications int
	EmailsSent    int
	// EmailsSaved is notifications delivered minus emails sent: the emails
	// a send-everything design would have sent on top.
	EmailsSaved  int
	Failures     int
	LatenessP50  time.Duration
	LatenessP99  time.Duration
	OpenBatches  int
	DueNextHour  int
	SentPerHour  []int // the last 24 hours, oldest first
	ItemsPerHour []int
}

// DashboardStats computes the figures since since. Each count reads an
// index on its time column, so the dashboard stays cheap as history grows.
func DashboardStats(ctx context.Context, q Querier, since, now time.Time) (*Stats, error) {
	s := &Stats{}
	var p50, p99 *float64
	err := q.QueryRow(ctx, `
		SELECT
		  (SELECT count(*) FROM events WHERE created_at >= $1),
		  (SELECT count(*) FROM notifications WHERE created_at >= $1),
		  (SELECT count(*) FROM deliveries WHERE sent_at >= $1 AND state = 'sent'),
		  (SELECT coalesce(sum(b.item_count), 0) FROM deliveries d JOIN batches b ON b.id = d.batch_id
		     WHERE d.sent_at >= $1 AND d.state = 'sent'),
		  (SELECT count(*) FROM deliveries WHERE failed_at >= $1),
		  (SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM d.sent_at - b.closes_at))
		     FROM deliveries d JOIN batches b ON b.id = d.batch_id WHERE d.sent_at >= $1 AND d.state = 'sent'),
		  (SELECT percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM d.sent_at - b.closes_at))
		     FROM deliveries d JOIN batches b ON b.id = d.batch_id WHERE d.sent_at >= $1 AND d.state = 'sent'),
		  (SELECT count(*) FROM batches WHERE state = 'open'),
		  (SELECT count(*) FROM batches WHERE state = 'open'
		     AND wake_at < $2::timestamptz + interval '1 hour' AND closes_at < $2::timestamptz + interval '1 hour')`,
		since, now).Scan(&s.Events, &s.Notifications, &s.EmailsSent, &s.EmailsSaved, &s.Failures, &p50, &p99, &s.OpenBatches, &s.DueNextHour)
	if err != nil {
		return nil, fmt.Errorf("dashboard: %w", err)
	}
	s.EmailsSaved -= s.EmailsSent
	if p50 != nil {
		s.LatenessP50 = time.Duration(*p50 * float64(time.Second))
	}
	if p99 != nil {
		s.LatenessP99 = time.Duration(*p99 * float64(time.Second))
	}
	s.SentPerHour, s.ItemsPerHour, err = hourly(ctx, q, now)
	return s, err
}

// hourly counts emails sent and the notifications they carried per hour
// over the last 24 hours.
func hourly(ctx context.Context, q Querier, now time.Time) ([]int, []int, error) {
	rows, err := q.Query(ctx, `
		SELECT h, count(d.id), coalesce(sum(b.item_count), 0)
		FROM generate_series(0, 23) AS h
		LEFT JOIN deliveries d ON d.state = 'sent'
		     AND d.sent_at >= $1::timestamptz - make_interval(hours => 24 - h)
		     AND d.sent_at < $1::timestamptz - make_interval(hours => 23 - h)
		LEFT JOIN batches b ON b.id = d.batch_id
		GROUP BY h ORDER BY h`, now)
	if err != nil {
		return nil, nil, fmt.Errorf("dashboard chart: %w", err)
	}
	defer rows.Close()
	sent, items := make([]int, 0, 24), make([]int, 0, 24)
	for rows.Next() {
		var h, n, i int
		if err := rows.Scan(&h, &n, &i); err != nil {
			return nil, nil, err
		}
		sent, items = append(sent, n), append(items, i)
	}
	return sent, items, rows.Err()
}

// Job is a River job as the console shows it.
type Job struct {
	ID          int64
	Kind        string
	State       string
	Attempt     int
	MaxAttempts int
	ScheduledAt time.Time
	Args        string
	LastError   string
}

// JobCount is how many jobs of a kind are in a state.
type JobCount struct {
	Kind, State string
	Count       int
}

// JobCounts counts River's jobs by kind and state.
func JobCounts(ctx context.Context, q Querier) ([]JobCount, error) {
	rows, err := q.Query(ctx, `SELECT kind, state::text, count(*) FROM river_job GROUP BY 1, 2 ORDER BY 1, 2`)
	if err != nil {
		return nil, fmt.Errorf("job counts: %w", err)
	}
	defer rows.Close()
	var out []JobCount
	for rows.Next() {
		var c JobCount
		if err := rows.Scan(&c.Kind, &c.State, &c.Count); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// GetJob returns one River job, or ErrNotFound.
func GetJob(ctx context.Context, q Querier, id int64) (Job, error) {
	var j Job
	err := q.QueryRow(ctx, `
		SELECT id, kind, state::text, attempt, max_attempts, scheduled_at, args::text,
		       coalesce(errors[array_length(errors, 1)]->>'error', '')
		FROM river_job WHERE id = $1`, id).Scan(&j.ID, &j.Kind, &j.State, &j.Attempt, &j.MaxAttempts, &j.ScheduledAt, &j.Args, &j.LastError)
	if err != nil {
		return Job{}, notFound(err, fmt.Sprintf("job %d", id))
	}
	return j, nil
}

// ListJobs returns River jobs in states, soonest scheduled first, or the
// jobs of one batch when batchID > 0: its flush jobs, and the wakes of the
// fan-out that opened it, which write its flush job shortly before it
// closes (see package batching, wake.go).
func ListJobs(ctx context.Context, q Querier, states []string, batchID int64, limit int) ([]Job, error) {
	rows, err := q.Query(ctx, `
		SELECT id, kind, state::text, attempt, max_attempts, scheduled_at, args::text,
		       coalesce(errors[array_length(errors, 1)]->>'error', '')
		FROM river_job
		WHERE ($2::bigint > 0 AND kind = 'flush_batch' AND (args->>'batch_id')::bigint = $2)
		   OR ($2 > 0 AND kind = 'wake_flushes' AND $2 BETWEEN (args->>'first')::bigint AND (args->>'last')::bigint
		       AND (args->>'opened_at')::timestamptz = (SELECT opened_at FROM batches WHERE id = $2))
		   OR ($2 = 0 AND state::text = ANY($1))
		ORDER BY scheduled_at, id LIMIT $3`, states, batchID, limit)
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	defer rows.Close()
	var out []Job
	for rows.Next() {
		var j Job
		if err := rows.Scan(&j.ID, &j.Kind, &j.State, &j.Attempt, &j.MaxAttempts, &j.ScheduledAt, &j.Args, &j.LastError); err != nil {
			return nil, err
		}
		out = append(out, j)
	}
	return out, rows.Err()
}
