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
	"slices"
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

// uuidRecipients stores n recipients whose ids are random UUIDs, as many
// applications give their users, and returns the ids in random order:
// keys of 36 bytes, every one landing on a page of its own in the indexes
// keyed by recipient.
func (b *bench) uuidRecipients(ctx context.Context, n int) ([]string, error) {
	rows, err := b.conn.Query(ctx, `INSERT INTO recipients (id, email)
		SELECT u, u || '@bench.example' FROM (SELECT gen_random_uuid()::text AS u FROM generate_series(1, $1)) g
		RETURNING id`, n)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// ingest: single-recipient events into cool-down batches from 32
// concurrent clients, next to pgbench's TPC-B-like transactions/s.
func (b *bench) ingest(ctx context.Context) error {
	d := 30 * time.Second
	if b.quick {
		d = 8 * time.Second
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
	if err := b.settle(ctx); err != nil {
		return err
	}
	body, _ := json.Marshal(map[string]any{"type": "bench.post", "actor": map[string]string{"id": "star", "name": "Star"},
		"object": map[string]string{"title": "A new post"}, "recipients": ids})
	lull0, pg0 := b.cpuSeconds()
	t0 := time.Now()
	st, out, err := b.call("POST", "/api/v1/events", body)
	took := time.Since(t0)
	lull1, pg1 := b.cpuSeconds()
	if err != nil || st != 202 {
		return fmt.Errorf("fan-out: %d %v %.200s", st, err, out)
	}
	var res struct{ Notifications int }
	json.Unmarshal(out, &res)
	keyed, err := b.freshFanOut(ctx, "bench.keyed", "keyed-100000", ids)
	if err != nil {
		return err
	}
	// Applications list followers by when they followed, or by ids that
	// are random (UUIDs): not in the byte order lull writes them in.
	shuffled := slices.Clone(ids)
	rand.New(rand.NewPCG(1, 2)).Shuffle(n, func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	mixed, err := b.freshFanOut(ctx, "bench.shuffled", "", shuffled)
	if err != nil {
		return err
	}
	uuids, err := b.uuidRecipients(ctx, n)
	if err != nil {
		return err
	}
	byUUID, err := b.freshFanOut(ctx, "bench.uuid", "", uuids)
	if err != nil {
		return err
	}

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
		{"CPU time meanwhile: lull + PostgreSQL", fmt.Sprintf("%.2fs + %.2fs", lull1-lull0, pg1-pg0)},
		{"the same with an idempotency key (its 9 MB answer kept for replays), into fresh batches", fmt.Sprintf("%s (goal ≤ 2 s)", keyed.Round(time.Millisecond))},
		{"the same in random order, into fresh batches", fmt.Sprintf("%s (goal ≤ 2 s)", mixed.Round(time.Millisecond))},
		{"the same to other recipients whose ids are UUIDs, in random order", fmt.Sprintf("%s (goal ≤ 2 s)", byUUID.Round(time.Millisecond))},
		{"notifications", fmt.Sprintf("%d (%.0f/s)", res.Notifications, notesPerSec)},
		{"reference: COPY of 100,000 rows of the same shape", fmt.Sprintf("%s (%.0f rows/s)", copyTook.Round(time.Millisecond), copyPerSec)},
		{"ratio notifications/s ÷ COPY rows/s", fmt.Sprintf("%.2f (goal ≥ 0.2)", notesPerSec/copyPerSec)},
	})
	return nil
}

// freshFanOut times one event to ids, with an idempotency key when key
// is not empty (as apps retrying a request send it), under a type of its
// own so that its batches are new.
func (b *bench) freshFanOut(ctx context.Context, typ, key string, ids []string) (time.Duration, error) {
	if err := b.putType(typ, `{"default_mode":"cooldown","window":"1h","max_wait":"0"}`); err != nil {
		return 0, err
	}
	if err := b.settle(ctx); err != nil {
		return 0, err
	}
	ev := map[string]any{"type": typ, "actor": map[string]string{"id": "star", "name": "Star"},
		"object": map[string]string{"title": "A new post"}, "recipients": ids}
	if key != "" {
		ev["key"] = key
	}
	body, _ := json.Marshal(ev)
	return b.postTimed(body)
}

// flushWave: daily digests of three types with 3–30 items each falling due
// together, rendered and sent to the SMTP sink over reused connections;
// then a steady stream of digests closing at 500 a second. The digest hour
// is brought forward in the database (batches and their River jobs) so the
// run does not wait for tomorrow morning.
func (b *bench) flushWave(ctx context.Context) error {
	wave, steady := 20_000, 10_000
	if b.quick {
		wave, steady = 4_000, 4_000
	}
	for _, t := range waveTypes {
		if err := b.putType(t, `{"default_mode":"daily","display_limit":10}`); err != nil {
			return err
		}
	}
	if err := b.openDigests(ctx, "w", wave); err != nil {
		return err
	}
	if err := b.openDigests(ctx, "s", steady); err != nil {
		return err
	}
	sentBefore := b.smtp.Received()
	w, err := b.dueAt(ctx, "w", 0)
	if err != nil {
		return err
	}
	b.report.add(fmt.Sprintf("Flush wave: %d daily digests (3 types, 3–30 items) due at once", wave), []row{
		{"emails received by the SMTP sink", strconv.Itoa(b.smtp.Received() - sentBefore)},
		{"wave duration (first due to last sent)", w.span.Round(time.Millisecond).String()},
		{"digests/s", fmt.Sprintf("%.0f (goal ≥ 2,000)", float64(wave)/w.span.Seconds())},
		{"lateness p50 / p99 / max (sent_at − closes_at)", w.lateness() + " (goal: p99 ≤ 10 s)"},
		// CPU per digest holds on a shared machine, where the wall time
		// moves with the neighbours' load.
		{"CPU per digest: lull + PostgreSQL", fmt.Sprintf("%.2f ms + %.2f ms (%.1f s + %.1f s in all)",
			w.lullCPU/float64(wave)*1000, w.pgCPU/float64(wave)*1000, w.lullCPU, w.pgCPU)},
	})
	s, err := b.dueAt(ctx, "s", 500)
	if err != nil {
		return err
	}
	b.report.add(fmt.Sprintf("Steady closing: %d daily digests closing at 500 a second", steady), []row{
		{"lateness p50 / p99 / max (sent_at − closes_at)", s.lateness() + " (goal: p99 ≤ 2 s)"},
	})
	return nil
}

var waveTypes = []string{"bench.a", "bench.b", "bench.c"}

// openDigests gives n recipients named prefix0… an open daily digest with
// 1–10 items of each of the three wave types, through the API.
func (b *bench) openDigests(ctx context.Context, prefix string, n int) error {
	return b.openDigestsOf(ctx, prefix, n, func() int { return 1 + rand.IntN(10) })
}

// openDigestsOf is openDigests with count() items of each type per
// recipient.
func (b *bench) openDigestsOf(ctx context.Context, prefix string, n int, count func() int) error {
	if err := b.recipients(ctx, prefix, n); err != nil {
		return err
	}
	for _, t := range waveTypes {
		counts := make([]int, n)
		for i := range counts {
			counts[i] = count()
		}
		for round := 1; round <= 10; round++ {
			var ids []string
			for i, k := range counts {
				if k >= round {
					ids = append(ids, prefix+strconv.Itoa(i))
				}
			}
			if len(ids) == 0 {
				continue
			}
			body, _ := json.Marshal(map[string]any{"type": t, "actor": map[string]string{"id": fmt.Sprint(round % 7), "name": fmt.Sprintf("Actor %d", round%7)},
				"object": map[string]string{"title": fmt.Sprintf("Item %d", round), "url": "https://app.example/x"}, "recipients": ids})
			if st, out, err := b.call("POST", "/api/v1/events", body); err != nil || st != 202 {
				return fmt.Errorf("digest event: %d %v %.200s", st, err, out)
			}
		}
	}
	return nil
}

type waveResult struct {
	span            time.Duration
	p50, p99, worst float64
	// lullCPU and pgCPU are the CPU seconds lull and PostgreSQL spent
	// from the moment the digests were moved forward until all were sent.
	lullCPU, pgCPU float64
}

func (w waveResult) lateness() string {
	return fmt.Sprintf("%.2fs / %.2fs / %.2fs", w.p50, w.p99, w.worst)
}

// dueAt moves the open digests of the recipients named prefix… to close
// ten seconds from now, perSecond of them a second (0: all at once), and
// the wakes that write their flush jobs to now, ten seconds ahead as
// lull schedules them; then waits until all are sent and measures the
// lateness of their sends.
func (b *bench) dueAt(ctx context.Context, prefix string, perSecond int) (waveResult, error) {
	spacing := 0.0
	if perSecond > 0 {
		spacing = 1 / float64(perSecond)
	}
	// Settle the setup's writes first (vacuum, statistics, a checkpoint),
	// so the figures are about the flushes and not about the server
	// catching up with the setup in the middle of them. The steady phase
	// follows the wave, whose writes are the flushes' own.
	if perSecond == 0 {
		if err := b.settle(ctx); err != nil {
			return waveResult{}, err
		}
	}
	// List the batches first, so that the timed updates join on primary
	// keys and commit well before the first close. The digests were opened
	// by fan-outs, so their flush jobs are still to be written by wakes.
	tx, err := b.conn.Begin(ctx)
	if err != nil {
		return waveResult{}, err
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `
		CREATE TEMP TABLE due ON COMMIT DROP AS
		SELECT b.id AS batch_id, row_number() OVER (ORDER BY b.id) - 1 AS n
		FROM batches b
		WHERE b.state = 'open' AND b.batch_key = 'digest:daily' AND b.recipient_id LIKE $1 || '%'`, prefix); err != nil {
		return waveResult{}, err
	}
	lullCPU, pgCPU := b.cpuSeconds()
	at := time.Now().Add(10 * time.Second)
	if _, err := tx.Exec(ctx, `UPDATE batches b SET closes_at = $1::timestamptz + make_interval(secs => $2::float8 * due.n),
		                     wake_at = $1::timestamptz + make_interval(secs => $2::float8 * due.n)
		FROM due WHERE b.id = due.batch_id`, at, spacing); err != nil {
		return waveResult{}, err
	}
	woken, err := tx.Exec(ctx, `UPDATE river_job SET scheduled_at = now()
		WHERE kind = 'wake_flushes' AND state = 'scheduled'
		  AND (args->>'last')::bigint >= (SELECT min(batch_id) FROM due) AND (args->>'first')::bigint <= (SELECT max(batch_id) FROM due)`)
	if err != nil {
		return waveResult{}, err
	}
	if woken.RowsAffected() == 0 {
		return waveResult{}, fmt.Errorf("no wake writes the flush jobs of the %s… digests", prefix)
	}
	if err := tx.Commit(ctx); err != nil {
		return waveResult{}, err
	}
	if late := time.Since(at); late > 0 {
		return waveResult{}, fmt.Errorf("moving the digests forward took past their close by %s", late)
	}
	const q = `FROM batches b JOIN deliveries d ON d.batch_id = b.id
		WHERE b.batch_key = 'digest:daily' AND b.recipient_id LIKE $1 || '%'`
	var total int
	if err := b.conn.QueryRow(ctx, `SELECT count(*) FROM batches WHERE batch_key = 'digest:daily' AND recipient_id LIKE $1 || '%'`, prefix).Scan(&total); err != nil {
		return waveResult{}, err
	}
	// Wait for the SMTP sink to have received as many emails, then check
	// in the database. Asking the database four times a second instead
	// (a join over every digest, 30 ms a call) took a tenth of a core from
	// the flushes it measured.
	received := b.smtp.Received()
	deadline := time.Now().Add(10 * time.Minute)
	for {
		var sent int
		if b.smtp.Received()-received >= total {
			if err := b.conn.QueryRow(ctx, `SELECT count(*) `+q+` AND d.state = 'sent'`, prefix).Scan(&sent); err != nil {
				return waveResult{}, err
			}
			if sent >= total {
				break
			}
		}
		if time.Now().After(deadline) {
			return waveResult{}, fmt.Errorf("only %d of %d digests sent after 10 minutes", sent, total)
		}
		time.Sleep(100 * time.Millisecond)
	}
	var r waveResult
	l, pg := b.cpuSeconds()
	r.lullCPU, r.pgCPU = l-lullCPU, pg-pgCPU
	var first, last time.Time
	err = b.conn.QueryRow(ctx, `
		SELECT min(b.closes_at), max(d.sent_at),
		       percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM d.sent_at - b.closes_at)),
		       percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM d.sent_at - b.closes_at)),
		       max(extract(epoch FROM d.sent_at - b.closes_at)) `+q, prefix).Scan(&first, &last, &r.p50, &r.p99, &r.worst)
	r.span = last.Sub(first)
	return r, err
}

// settle vacuums and analyzes the tables a scenario wrote and forces a
// checkpoint.
func (b *bench) settle(ctx context.Context) error {
	for _, q := range []string{"VACUUM (ANALYZE) batches, notifications, events, river_job, deliveries", "CHECKPOINT"} {
		if _, err := b.conn.Exec(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
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
		lullCost, lullPages, err := b.timeQuery(ctx, `SELECT id FROM batches WHERE state = 'open' AND wake_at <= now() AND closes_at <= now() ORDER BY wake_at LIMIT 1000`)
		if err != nil {
			return err
		}
		naiveCost, naivePages, err := b.timeQuery(ctx, `SELECT recipient_id, max(created_at) FROM naive_notifications WHERE NOT sent
			GROUP BY recipient_id HAVING max(created_at) < now() - interval '5 minutes'`)
		if err != nil {
			return err
		}
		lullCosts = append(lullCosts, lullCost)
		rows = append(rows, row{fmt.Sprintf("%d stored notifications", size),
			fmt.Sprintf("lull %s (%d pages), naive %s (%d pages; naive ÷ lull = %.0f)", lullCost, lullPages, naiveCost, naivePages,
				float64(naiveCost)/float64(max(lullCost, time.Microsecond)))})
	}
	rows = append(rows, row{"lull, largest ÷ smallest", fmt.Sprintf("%.2f (goal ≤ 2)", float64(lullCosts[len(lullCosts)-1])/float64(max(lullCosts[0], time.Microsecond)))})
	b.report.add("Growth: finding due batches as history grows (median of 20 queries, the server's execution time)", rows)
	return nil
}

// timeQuery runs sql 20 times and returns the median of the server's
// own execution time (EXPLAIN ANALYZE's), to the microsecond, and the
// pages (shared buffers) the last run touched. Timed from here, a query
// of a few microseconds measured the round trip and the client instead:
// 30 µs one run and 70 µs the next for the same plan, reading the same
// pages, which put a growth ratio of 2.3 in the report.
func (b *bench) timeQuery(ctx context.Context, sql string) (time.Duration, int, error) {
	var ds []time.Duration
	var pages int
	for range 20 {
		var plan []struct {
			ExecutionTime float64 `json:"Execution Time"` // milliseconds
			Plan          struct {
				Hit  int `json:"Shared Hit Blocks"`
				Read int `json:"Shared Read Blocks"`
			}
		}
		if err := b.conn.QueryRow(ctx, "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "+sql).Scan(&plan); err != nil {
			return 0, 0, err
		}
		if len(plan) != 1 {
			return 0, 0, fmt.Errorf("explain: %d plans", len(plan))
		}
		ds = append(ds, time.Duration(plan[0].ExecutionTime*float64(time.Millisecond)).Round(time.Microsecond))
		pages = plan[0].Plan.Hit + plan[0].Plan.Read
	}
	slices.Sort(ds)
	return ds[len(ds)/2], pages, nil
}

func pct(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[min(len(s)-1, len(s)*p/100)].Round(10 * time.Microsecond)
}
