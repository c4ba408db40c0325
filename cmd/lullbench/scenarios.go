package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os/exec"
	"regexp"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

var client = &http.Client{Timeout: 120 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64}}

// call sends one API request and returns its status.
func (b *bench) call(method, path string, body []byte) (int, []byte, error) {
	req, err := http.NewRequest(method, b.lull.base+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+benchKey)
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out, nil
}

func (b *bench) putType(key, body string) error {
	st, out, err := b.call("PUT", "/api/v1/types/"+key, []byte(body))
	if err == nil && st != 200 {
		err = fmt.Errorf("PUT type %s: %d %s", key, st, out)
	}
	return err
}

func (b *bench) recipients(ctx context.Context, prefix string, n int) error {
	_, err := b.conn.Exec(ctx, `INSERT INTO recipients (id, email) SELECT $1 || i, $1 || i || '@bench.example'
		FROM generate_series(0, $2 - 1) AS i ON CONFLICT DO NOTHING`, prefix, n)
	return err
}

// ingest: single-recipient events into cool-down batches from 32
// concurrent clients, next to pgbench's TPC-B-like transactions/s.
func (b *bench) ingest(ctx context.Context) error {
	d := 30 * time.Second
	if b.quick {
		d = 10 * time.Second
	}
	if err := b.putType("bench.comment", `{"default_mode":"cooldown","window":"1h","max_wait":"0"}`); err != nil {
		return err
	}
	if err := b.recipients(ctx, "r", 10000); err != nil {
		return err
	}
	var mu sync.Mutex
	var lat []time.Duration
	var errs int
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	start := time.Now()
	for w := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []time.Duration
			bad := 0
			for i := 0; time.Now().Before(deadline); i++ {
				body := fmt.Sprintf(`{"type":"bench.comment","actor":{"id":"a%d","name":"Actor %d"},"object":{"title":"Doc %d"},"batch_key":"doc:%d","recipients":["r%d"]}`,
					w, w, i%50, i%50, rand.IntN(10000))
				t0 := time.Now()
				st, _, err := b.call("POST", "/api/v1/events", []byte(body))
				if err != nil || st != 202 {
					bad++
					continue
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			lat, errs = append(lat, mine...), errs+bad
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	rate := float64(len(lat)) / elapsed.Seconds()
	tps, err := b.pgbench(d)
	if err != nil {
		return err
	}
	b.report.add("Ingest over HTTP (32 clients, single recipient, cool-down)", []row{
		{"events accepted", fmt.Sprintf("%d in %s (%d errors)", len(lat), elapsed.Round(time.Millisecond), errs)},
		{"events/s", fmt.Sprintf("%.0f", rate)},
		{"latency p50 / p99", fmt.Sprintf("%s / %s", pct(lat, 50), pct(lat, 99))},
		{"reference: pgbench TPC-B-like, 8 clients", fmt.Sprintf("%.0f tps", tps)},
		{"ratio events/s ÷ pgbench tps", fmt.Sprintf("%.2f (goal ≥ 0.75; and ≥ 1,000 events/s)", rate/tps)},
	})
	return nil
}

func (b *bench) pgbench(d time.Duration) (float64, error) {
	u, _ := url.Parse(b.dbURL)
	args := []string{"-h", u.Hostname(), "-p", u.Port(), "-U", "postgres"}
	init := exec.Command(b.pgBin+"/pgbench", append(args, "-i", "-s", "10", "-q", "lull_bench")...)
	if out, err := init.CombinedOutput(); err != nil {
		return 0, fmt.Errorf("pgbench -i: %w\n%s", err, out)
	}
	run := exec.Command(b.pgBin+"/pgbench", append(args, "-c", "8", "-j", "2", "-n", "-T", strconv.Itoa(int(d.Seconds())), "lull_bench")...)
	out, err := run.CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("pgbench: %w\n%s", err, out)
	}
	m := regexp.MustCompile(`tps = ([0-9.]+)`).FindSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("pgbench printed no tps:\n%s", out)
	}
	return strconv.ParseFloat(string(m[1]), 64)
}

// fanOut: one event to 100,000 existing recipients, next to a COPY of
// 100,000 rows of the same shape.
func (b *bench) fanOut(ctx context.Context) error {
	const n = 100_000
	if err := b.putType("bench.post", `{"default_mode":"cooldown","window":"1h","max_wait":"0"}`); err != nil {
		return err
	}
	if err := b.recipients(ctx, "f", n); err != nil {
		return err
	}
	ids := make([]string, n)
	for i := range ids {
		ids[i] = "f" + strconv.Itoa(i)
	}
	body, _ := json.Marshal(map[string]any{"type": "bench.post", "actor": map[string]string{"id": "star", "name": "Star"},
		"object": map[string]string{"title": "A new post"}, "recipients": ids})
	t0 := time.Now()
	st, out, err := b.call("POST", "/api/v1/events", body)
	took := time.Since(t0)
	if err != nil || st != 202 {
		return fmt.Errorf("fan-out: %d %v %.200s", st, err, out)
	}
	var res struct{ Notifications int }
	json.Unmarshal(out, &res)

	b.conn.Exec(ctx, `CREATE TABLE copy_ref (event_id bigint, created_at timestamptz, type_key text, occurred_at timestamptz, recipient_id text, batch_id bigint)`)
	rows := make([][]any, n)
	now := time.Now()
	for i := range rows {
		rows[i] = []any{int64(1), now, "bench.post", now, ids[i], int64(i)}
	}
	t1 := time.Now()
	if _, err := b.conn.CopyFrom(ctx, pgx.Identifier{"copy_ref"}, []string{"event_id", "created_at", "type_key", "occurred_at", "recipient_id", "batch_id"}, pgx.CopyFromRows(rows)); err != nil {
		return err
	}
	copyTook := time.Since(t1)
	notesPerSec, copyPerSec := float64(res.Notifications)/took.Seconds(), float64(n)/copyTook.Seconds()
	b.report.add("Fan-out: one event to 100,000 recipients", []row{
		{"request to all notifications batched and jobs scheduled", fmt.Sprintf("%s (goal ≤ 2 s)", took.Round(time.Millisecond))},
		{"notifications", fmt.Sprintf("%d (%.0f/s)", res.Notifications, notesPerSec)},
		{"reference: COPY of 100,000 rows of the same shape", fmt.Sprintf("%s (%.0f rows/s)", copyTook.Round(time.Millisecond), copyPerSec)},
		{"ratio notifications/s ÷ COPY rows/s", fmt.Sprintf("%.2f (goal ≥ 0.2)", notesPerSec/copyPerSec)},
	})
	return nil
}

// flushWave: batches of 1–30 items falling due together, rendered and sent
// to the SMTP sink over reused connections.
func (b *bench) flushWave(ctx context.Context) error {
	n := 6667 // recipients; three types make 20,000 batches
	if b.quick {
		n = 2000
	}
	window := "40s"
	types := []string{"bench.a", "bench.b", "bench.c"}
	for _, t := range types {
		if err := b.putType(t, `{"default_mode":"cooldown","window":"`+window+`","max_wait":"`+window+`","display_limit":10}`); err != nil {
			return err
		}
	}
	if err := b.recipients(ctx, "w", n); err != nil {
		return err
	}
	items := make(map[string][]int)
	for _, t := range types {
		items[t] = make([]int, n)
		for i := range items[t] {
			items[t][i] = 1 + rand.IntN(30)
		}
	}
	sentBefore := b.smtp.Received()
	for round := 1; round <= 30; round++ {
		for _, t := range types {
			var ids []string
			for i, k := range items[t] {
				if k >= round {
					ids = append(ids, "w"+strconv.Itoa(i))
				}
			}
			body, _ := json.Marshal(map[string]any{"type": t, "actor": map[string]string{"id": fmt.Sprint(round % 7), "name": fmt.Sprintf("Actor %d", round%7)},
				"object": map[string]string{"title": fmt.Sprintf("Item %d", round), "url": "https://app.example/x"}, "recipients": ids})
			if st, out, err := b.call("POST", "/api/v1/events", body); err != nil || st != 202 {
				return fmt.Errorf("wave event: %d %v %.200s", st, err, out)
			}
		}
	}
	total := n * len(types)
	deadline := time.Now().Add(10 * time.Minute)
	for {
		var sent int
		if err := b.conn.QueryRow(ctx, `SELECT count(*) FROM batches WHERE state = 'sent' AND type_key LIKE 'bench._'`).Scan(&sent); err != nil {
			return err
		}
		if sent >= total {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("only %d of %d batches sent after 10 minutes", sent, total)
		}
		time.Sleep(500 * time.Millisecond)
	}
	var first, last time.Time
	var p50, p99, worst float64
	err := b.conn.QueryRow(ctx, `
		SELECT min(b.closes_at), max(d.sent_at),
		       percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM d.sent_at - b.closes_at)),
		       percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM d.sent_at - b.closes_at)),
		       max(extract(epoch FROM d.sent_at - b.closes_at))
		FROM batches b JOIN deliveries d ON d.batch_id = b.id WHERE b.type_key LIKE 'bench._'`).Scan(&first, &last, &p50, &p99, &worst)
	if err != nil {
		return err
	}
	wave := last.Sub(first)
	b.report.add(fmt.Sprintf("Flush wave: %d batches (1–30 items each) due together", total), []row{
		{"emails received by the SMTP sink", strconv.Itoa(b.smtp.Received() - sentBefore)},
		{"wave duration (first due to last sent)", wave.Round(time.Millisecond).String()},
		{"digests/s", fmt.Sprintf("%.0f (goal ≥ 1,000)", float64(total)/wave.Seconds())},
		{"lateness p50 / p99 / max (sent_at − closes_at)", fmt.Sprintf("%.2fs / %.2fs / %.2fs", p50, p99, worst)},
	})
	return nil
}

// growth: the cost of finding due batches as history grows, for lull and
// for a naive batch-on-read design on the same data.
func (b *bench) growth(ctx context.Context) error {
	sizes := []int{1_000_000, 10_000_000}
	if b.quick {
		sizes = []int{100_000, 1_000_000}
	}
	b.conn.Exec(ctx, `CREATE TABLE naive_notifications (recipient_id text, created_at timestamptz, sent boolean)`)
	b.conn.Exec(ctx, `CREATE INDEX ON naive_notifications (recipient_id)`)
	var rows []row
	var lullCosts []time.Duration
	have := 0
	for _, size := range sizes {
		add := size - have
		// History: sent notifications in sent batches, ten per batch.
		if _, err := b.conn.Exec(ctx, `
			WITH nb AS (INSERT INTO batches (recipient_id, batch_key, mode, state, opened_at, last_event_at, closes_at, item_count, processed_at)
			            SELECT 'r' || (i % 10000), 'history', 'cooldown', 'sent', now() - interval '2 days', now() - interval '2 days',
			                   now() - interval '2 days', 10, now() - interval '2 days'
			            FROM generate_series(1, $1 / 10) AS i RETURNING id)
			INSERT INTO notifications (event_id, recipient_id, type_key, batch_id, occurred_at)
			SELECT 0, 'r' || (i % 10000), 'bench.comment', NULL, now() - interval '2 days' FROM generate_series(1, $1) AS i`, add); err != nil {
			return err
		}
		if _, err := b.conn.Exec(ctx, `INSERT INTO naive_notifications SELECT 'r' || (i % 10000), now() - interval '2 days', true FROM generate_series(1, $1) AS i`, add); err != nil {
			return err
		}
		// The same 1,000 undelivered notifications in both designs.
		b.conn.Exec(ctx, `DELETE FROM naive_notifications WHERE NOT sent`)
		b.conn.Exec(ctx, `INSERT INTO naive_notifications SELECT 'r' || i, now() - interval '10 minutes', false FROM generate_series(1, 1000) AS i`)
		b.conn.Exec(ctx, `ANALYZE`)
		have = size
		lullCost, err := b.timeQuery(ctx, `SELECT id FROM batches WHERE state = 'open' AND closes_at <= now() ORDER BY closes_at LIMIT 1000`)
		if err != nil {
			return err
		}
		naiveCost, err := b.timeQuery(ctx, `SELECT recipient_id, max(created_at) FROM naive_notifications WHERE NOT sent
			GROUP BY recipient_id HAVING max(created_at) < now() - interval '5 minutes'`)
		if err != nil {
			return err
		}
		lullCosts = append(lullCosts, lullCost)
		rows = append(rows, row{fmt.Sprintf("%d stored notifications", size),
			fmt.Sprintf("lull %s, naive %s (naive ÷ lull = %.0f)", lullCost, naiveCost, float64(naiveCost)/float64(max(lullCost, time.Microsecond)))})
	}
	rows = append(rows, row{"lull, largest ÷ smallest", fmt.Sprintf("%.2f (goal ≤ 2)", float64(lullCosts[len(lullCosts)-1])/float64(max(lullCosts[0], time.Microsecond)))})
	b.report.add("Growth: finding due batches as history grows (median of 20 queries)", rows)
	return nil
}

// timeQuery runs sql 20 times and returns the median duration.
func (b *bench) timeQuery(ctx context.Context, sql string) (time.Duration, error) {
	var ds []time.Duration
	for range 20 {
		t0 := time.Now()
		rows, err := b.conn.Query(ctx, sql)
		if err != nil {
			return 0, err
		}
		for rows.Next() {
		}
		rows.Close()
		ds = append(ds, time.Since(t0))
	}
	return pct(ds, 50), nil
}

func pct(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[min(len(s)-1, len(s)*p/100)].Round(10 * time.Microsecond)
}
