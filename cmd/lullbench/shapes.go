package main

// The shapes real applications send, beyond single-recipient events and
// one fan-out to bare ids: inline audiences, the same audience notified
// again while its batches are open, overlapping audiences, floods into
// shared batches, retraction storms, a digest peak across time zones,
// recipients with modes of their own and an audience scattered among a
// population.
// Each scenario reports a ratio to a reference measured in the same run,
// and a growth check, the time at 5 × the size ÷ the time at 1 × (linear
// is 5), so its figures hold on a noisy machine; each figure is the
// median of three tries (tries), the two sizes taking turns
// (atBothSizes), and a digest wave's figures are those of the try with
// the median span. The scattered audience is the exception: one try at
// one size, its population taking most of a minute to write.

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// sizes is a scenario's 1 × and 5 × size: full in a full run, quick in
// -quick.
func (b *bench) sizes(full, quick int) [2]int {
	if b.quick {
		return [2]int{quick, 5 * quick}
	}
	return [2]int{full, 5 * full}
}

// tries is how many times a scenario runs at each size. A request of a
// few hundred milliseconds moves by a tenth or more from one try to the
// next on this machine, and a fan-out of a second or two by as much
// (100,000 stored inline recipients: 1.46–1.98 s, run alone with the same
// code), so one fast or slow try moved a growth ratio by a whole point
// (5.3–6.6 in six runs of the same code; docs/performance.md, "Growth
// measured as medians"). The median of three damps that.
const tries = 3

// atBothSizes runs a scenario tries times at each of its two sizes and
// returns, for each size, the median of each figure run returns.
//
// The sizes take turns (1 ×, 5 ×, 1 ×, 5 × …): every try leaves its rows
// behind, and a fan-out costs more on bigger tables (a 100,000 fan-out
// late in a full run takes a quarter longer than alone), so the 5 × tries,
// run after all the 1 × ones, counted the tables' growth in a growth
// ratio meant to count the audience's. In turn, the tries of both sizes
// see tables of about the same size.
//
// Each try gets recipients of its own: prefix, the size and "r0-",
// "r1-", "r2-" ("in20000-r0-"), no try's prefix beginning another's, so
// a LIKE prefix || '%' of one try never matches the rows of another. A
// failed try fails the scenario.
func (b *bench) atBothSizes(prefix string, sizes [2]int, run func(prefix string, i, n int) ([]time.Duration, error)) ([2][]time.Duration, error) {
	var all [2][][]time.Duration
	var out [2][]time.Duration
	for t := range tries {
		for i, n := range sizes {
			ds, err := run(fmt.Sprintf("%s%d-r%d-", prefix, n, t), i, n)
			if err != nil {
				return out, err
			}
			all[i] = append(all[i], ds)
		}
	}
	for i := range out {
		var err error
		if out[i], err = medianEach(all[i]); err != nil {
			return out, fmt.Errorf("%d recipients: %w", sizes[i], err)
		}
	}
	return out, nil
}

// medianEach returns the median of each figure over the tries, figure by
// figure: a try slow in one figure need not be slow in the next.
func medianEach(tries [][]time.Duration) ([]time.Duration, error) {
	out := make([]time.Duration, len(tries[0]))
	for t, ds := range tries {
		if len(ds) != len(out) {
			return nil, fmt.Errorf("try %d gave %d figures, the first %d", t, len(ds), len(out))
		}
	}
	for k := range out {
		col := make([]time.Duration, len(tries))
		for t := range tries {
			col[t] = tries[t][k]
		}
		slices.Sort(col)
		out[k] = col[len(col)/2]
	}
	return out, nil
}

// growthRow reports a growth check: the time at 5 × the size ÷ the time
// at 1 ×.
func growthRow(what string, ts [2]time.Duration) row {
	return row{"growth: " + what + ", 5 × the size ÷ 1 ×", fmt.Sprintf("%.1f (%s ÷ %s; linear = 5, goal ≤ 6)",
		ts[1].Seconds()/ts[0].Seconds(), ts[1].Round(time.Millisecond), ts[0].Round(time.Millisecond))}
}

// ratio reports a ÷ b with both times, and note after them.
func ratio(a, b time.Duration, note string) string {
	return fmt.Sprintf("%.2f (%s ÷ %s%s)", a.Seconds()/b.Seconds(), a.Round(time.Millisecond), b.Round(time.Millisecond), note)
}

// event is a POST /api/v1/events body.
func event(typ, batchKey, key string, recipients any) []byte {
	body, _ := json.Marshal(map[string]any{"type": typ, "key": key, "batch_key": batchKey,
		"actor": map[string]string{"id": "star", "name": "Star"}, "object": map[string]string{"title": "A new post"},
		"recipients": recipients})
	return body
}

// postTimed posts one event and returns how long lull took to answer.
func (b *bench) postTimed(body []byte) (time.Duration, error) {
	t0 := time.Now()
	st, out, err := b.call("POST", "/api/v1/events", body)
	took := time.Since(t0)
	if err != nil || st != 202 {
		return 0, fmt.Errorf("event: %d %v %.200s", st, err, out)
	}
	return took, nil
}

// postAll posts events one after the other and returns how long lull
// took to answer each.
func (b *bench) postAll(bodies ...[]byte) ([]time.Duration, error) {
	out := make([]time.Duration, len(bodies))
	for i, body := range bodies {
		var err error
		if out[i], err = b.postTimed(body); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// ids are n recipient ids prefix0, prefix1, …, from start.
func ids(prefix string, start, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = prefix + strconv.Itoa(start+i)
	}
	return out
}

// zones24 are 24 zones a whole hour apart, for recipients around the world.
var zones24 = []string{"Pacific/Pago_Pago", "Pacific/Honolulu", "America/Anchorage", "America/Los_Angeles",
	"America/Denver", "America/Chicago", "America/New_York", "America/Halifax", "America/Sao_Paulo",
	"Atlantic/South_Georgia", "Atlantic/Azores", "Europe/London", "Europe/Berlin", "Europe/Athens",
	"Europe/Moscow", "Asia/Dubai", "Asia/Karachi", "Asia/Dhaka", "Asia/Bangkok", "Asia/Shanghai",
	"Asia/Tokyo", "Australia/Brisbane", "Pacific/Noumea", "Pacific/Auckland"}

// benchLocales are the shipped locales, and one served by its parent.
var benchLocales = []string{"en", "de", "de-AT", "fr", "es", "pt-BR", "ja", "ar", "ru"}

// inline: one event to n recipients given inline as objects (email, name,
// time zone, locale): new ones; the same, existing now, into fresh batches; and
// the same event again while its batches are open, each ÷ the first.
func (b *bench) inline(ctx context.Context) error {
	if err := b.putType("bench.art", `{"default_mode":"cooldown","window":"1h","max_wait":"0"}`); err != nil {
		return err
	}
	sizes := b.sizes(20_000, 2_000)
	ds, err := b.atBothSizes("in", sizes, func(prefix string, _, n int) ([]time.Duration, error) {
		audience := make([]map[string]string, n)
		for j, id := range ids(prefix, 0, n) {
			audience[j] = map[string]string{"id": id, "email": id + "@bench.example", "name": "Follower " + id, "timezone": zones24[j%24],
				"locale": benchLocales[j%len(benchLocales)]}
		}
		if err := b.settle(ctx); err != nil {
			return nil, err
		}
		return b.postAll(event("bench.art", prefix+"art:1", "", audience), event("bench.art", prefix+"art:2", "", audience),
			event("bench.art", prefix+"art:1", "", audience))
	})
	if err != nil {
		return err
	}
	var rows []row
	var news, existings, repeats [2]time.Duration
	for i, n := range sizes {
		news[i], existings[i], repeats[i] = ds[i][0], ds[i][1], ds[i][2]
		goal := ""
		if n == 20_000 {
			goal = "; goal ≤ 1.5"
		}
		rows = append(rows,
			row{fmt.Sprintf("%d new inline recipients", n), news[i].Round(time.Millisecond).String()},
			row{fmt.Sprintf("%d existing, into fresh batches ÷ new", n), fmt.Sprintf("%.2f (%s)", existings[i].Seconds()/news[i].Seconds(), existings[i].Round(time.Millisecond))},
			row{fmt.Sprintf("%d again, batches open ÷ new", n), fmt.Sprintf("%.2f (%s%s)", repeats[i].Seconds()/news[i].Seconds(), repeats[i].Round(time.Millisecond), goal)})
	}
	rows = append(rows, growthRow("new", news), growthRow("existing", existings), growthRow("again", repeats))
	b.report.add("Inline recipients: new, existing, and notified again while their batches are open", rows)
	return nil
}

// overlap: two artists post at the same moment to followers who overlap
// by half, so half of the notifications of both join the same batches;
// next to the same two events to followers who do not overlap.
func (b *bench) overlap(ctx context.Context) error {
	if err := b.putType("bench.follow", `{"default_mode":"cooldown","window":"1h","max_wait":"0"}`); err != nil {
		return err
	}
	sizes := b.sizes(10_000, 1_000)
	ds, err := b.atBothSizes("ov", sizes, func(prefix string, _, n int) ([]time.Duration, error) {
		if err := b.recipients(ctx, prefix, 7*n/2); err != nil {
			return nil, err
		}
		if err := b.settle(ctx); err != nil {
			return nil, err
		}
		disjoint, err := b.together(event("bench.follow", "", "", ids(prefix, 3*n/2, n)), event("bench.follow", "", "", ids(prefix, 5*n/2, n)))
		if err != nil {
			return nil, err
		}
		overlap, err := b.together(event("bench.follow", "", "", ids(prefix, 0, n)), event("bench.follow", "", "", ids(prefix, n/2, n)))
		return []time.Duration{disjoint, overlap}, err
	})
	if err != nil {
		return err
	}
	var rows []row
	var overlaps [2]time.Duration
	for i, n := range sizes {
		disjoint := ds[i][0]
		overlaps[i] = ds[i][1]
		rows = append(rows, row{fmt.Sprintf("two events to %d followers each, at once, overlapping by half ÷ not overlapping", n),
			ratio(overlaps[i], disjoint, "")})
	}
	rows = append(rows, growthRow("overlapping", overlaps))
	b.report.add("Overlapping audiences: two artists whose followers overlap by half post at once", rows)
	return nil
}

// together posts bodies at once and returns the time until the last is
// answered.
func (b *bench) together(bodies ...[]byte) (time.Duration, error) {
	errs := make([]error, len(bodies))
	var wg sync.WaitGroup
	t0 := time.Now()
	for i, body := range bodies {
		wg.Go(func() { _, errs[i] = b.postTimed(body) })
	}
	wg.Wait()
	took := time.Since(t0)
	for _, err := range errs {
		if err != nil {
			return 0, err
		}
	}
	return took, nil
}

// floodClients is how many clients send a flood at once.
const floodClients = 32

// flood sends n requests from floodClients clients, request i made by
// req(i), and returns the time until the last is answered.
func (b *bench) flood(n int, req func(i int) (method, path string, body []byte, want int)) (time.Duration, error) {
	var next atomic.Int64
	var failed atomic.Value
	var wg sync.WaitGroup
	t0 := time.Now()
	for range floodClients {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				method, path, body, want := req(i)
				if st, out, err := b.call(method, path, body); err != nil || st != want {
					failed.Store(fmt.Errorf("%s %s: %d %v %.200s", method, path, st, err, out))
					return
				}
			}
		})
	}
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		return 0, err
	}
	return time.Since(t0), nil
}

// sharedFlood: events to the same 50 recipients, all into one shared
// batch_key (every event locks and updates the same 50 batch rows), next
// to the same flood into fresh batches.
func (b *bench) sharedFlood(ctx context.Context) error {
	if err := b.putType("bench.thread", `{"default_mode":"cooldown","window":"1h","max_wait":"0"}`); err != nil {
		return err
	}
	sizes := b.sizes(400, 40)
	ds, err := b.atBothSizes("sf", sizes, func(prefix string, _, n int) ([]time.Duration, error) {
		if err := b.recipients(ctx, prefix, 50); err != nil {
			return nil, err
		}
		audience := ids(prefix, 0, 50)
		if err := b.settle(ctx); err != nil {
			return nil, err
		}
		post := func(key func(int) string) func(int) (string, string, []byte, int) {
			return func(i int) (string, string, []byte, int) {
				return "POST", "/api/v1/events", event("bench.thread", key(i), "", audience), 202
			}
		}
		fresh, err := b.flood(n, post(func(i int) string { return prefix + "thread:" + strconv.Itoa(i) }))
		if err != nil {
			return nil, err
		}
		shared, err := b.flood(n, post(func(int) string { return prefix + "thread" }))
		return []time.Duration{fresh, shared}, err
	})
	if err != nil {
		return err
	}
	var rows []row
	var shareds [2]time.Duration
	for i, n := range sizes {
		fresh := ds[i][0]
		shareds[i] = ds[i][1]
		rows = append(rows, row{fmt.Sprintf("%d events × the same 50 recipients (%d clients), one shared batch_key ÷ fresh batches", n, floodClients),
			ratio(shareds[i], fresh, "; goal ≤ 2")})
	}
	rows = append(rows, growthRow("shared", shareds))
	b.report.add("Shared-batch flood: many events into the same open batches at once", rows)
	return nil
}

// retractionStorm: events to 10 of 1,000 recipients each, into 100 shared
// threads, all retracted by their keys from many clients at once; next to
// the time the same events took to post.
func (b *bench) retractionStorm(ctx context.Context) error {
	if err := b.putType("bench.spam", `{"default_mode":"cooldown","window":"1h","max_wait":"0"}`); err != nil {
		return err
	}
	sizes := b.sizes(2_000, 200)
	ds, err := b.atBothSizes("rs", sizes, func(prefix string, _, n int) ([]time.Duration, error) {
		if err := b.recipients(ctx, prefix, 1000); err != nil {
			return nil, err
		}
		if err := b.settle(ctx); err != nil {
			return nil, err
		}
		posted, err := b.flood(n, func(i int) (string, string, []byte, int) {
			to := make([]string, 10)
			for k := range to {
				to[k] = prefix + strconv.Itoa((i*37+k*101)%1000)
			}
			return "POST", "/api/v1/events", event("bench.spam", "thread:"+strconv.Itoa(i%100), prefix+strconv.Itoa(i), to), 202
		})
		if err != nil {
			return nil, err
		}
		retracted, err := b.flood(n, func(i int) (string, string, []byte, int) {
			return "DELETE", "/api/v1/events?key=" + url.QueryEscape(prefix+strconv.Itoa(i)), nil, 200
		})
		return []time.Duration{posted, retracted}, err
	})
	if err != nil {
		return err
	}
	var rows []row
	var retracts [2]time.Duration
	for i, n := range sizes {
		posted := ds[i][0]
		retracts[i] = ds[i][1]
		rows = append(rows, row{fmt.Sprintf("retract %d events (10 recipients each, %d clients) ÷ post them", n, floodClients),
			fmt.Sprintf("%.2f (%s, %.0f/s ÷ %s)", retracts[i].Seconds()/posted.Seconds(), retracts[i].Round(time.Millisecond),
				float64(n)/retracts[i].Seconds(), posted.Round(time.Millisecond))})
	}
	rows = append(rows, growthRow("retraction", retracts))
	b.report.add("Retraction storm: the events of a fan-out retracted at once", rows)
	return nil
}

// digestPeak: recipients in 24 time zones, daily digests at 08:00 local.
// One event to all of them opens a digest per recipient, closing at 24
// different times; next to the same event in cool-down mode (one close
// time for all). Then one zone's digests fall due at once, as they do at
// the top of every hour.
func (b *bench) digestPeak(ctx context.Context) error {
	if err := b.putType("bench.daily", `{"default_mode":"daily"}`); err != nil {
		return err
	}
	if err := b.putType("bench.note", `{"default_mode":"cooldown","window":"1h","max_wait":"0"}`); err != nil {
		return err
	}
	sizes := b.sizes(20_000, 2_000)
	var waves [2][]waveResult
	ds, err := b.atBothSizes("dp", sizes, func(prefix string, i, n int) ([]time.Duration, error) {
		ds, wave, err := b.digestPeakOnce(ctx, prefix, n)
		waves[i] = append(waves[i], wave)
		return ds, err
	})
	if err != nil {
		return err
	}
	var rows []row
	var dailies [2]time.Duration
	for i, n := range sizes {
		w := medianWave(waves[i])
		cooldown, again := ds[i][0], ds[i][2]
		dailies[i] = ds[i][1]
		rows = append(rows,
			row{fmt.Sprintf("one event to %d recipients in 24 zones, daily digests ÷ the same in cool-down", n),
				ratio(dailies[i], cooldown, "")},
			row{fmt.Sprintf("a second event to the same %d, joining their digests ÷ the first", n),
				fmt.Sprintf("%.2f (%s)", again.Seconds()/dailies[i].Seconds(), again.Round(time.Millisecond))},
			row{fmt.Sprintf("one zone's %d digests due at once: digests/s, lateness p50 / p99 / max", n/24),
				fmt.Sprintf("%.0f/s, %s", float64(n/24)/w.span.Seconds(), w.lateness())})
	}
	rows = append(rows, growthRow("daily fan-out", dailies))
	b.report.add("Digest peak: recipients in 24 time zones, daily at 08:00 local", rows)
	return nil
}

// medianWave is the wave of the try whose span is the median of the
// tries': its rate and lateness belong together, so they come from one
// try, not each from a try of its own.
func medianWave(ws []waveResult) waveResult {
	s := slices.Clone(ws)
	slices.SortStableFunc(s, func(a, b waveResult) int { return cmp.Compare(a.span, b.span) })
	return s[len(s)/2]
}

// digestPeakOnce posts to n new recipients in 24 zones one cool-down
// event, then a daily one twice, and returns the three times; then has
// Europe/Berlin's cohort fall due and returns how that wave went.
func (b *bench) digestPeakOnce(ctx context.Context, prefix string, n int) ([]time.Duration, waveResult, error) {
	if _, err := b.conn.Exec(ctx, `INSERT INTO recipients (id, email, timezone)
		SELECT $1 || (i % 24) || '-' || i, $1 || i || '@bench.example', ($3::text[])[i % 24 + 1]
		FROM generate_series(0, $2 - 1) AS i`, prefix, n, zones24); err != nil {
		return nil, waveResult{}, err
	}
	audience := make([]string, n)
	for j := range audience {
		audience[j] = prefix + strconv.Itoa(j%24) + "-" + strconv.Itoa(j)
	}
	if err := b.settle(ctx); err != nil {
		return nil, waveResult{}, err
	}
	ds, err := b.postAll(event("bench.note", "", "", audience), event("bench.daily", "", "", audience), event("bench.daily", "", "", audience))
	if err != nil {
		return nil, waveResult{}, err
	}
	w, err := b.dueAt(ctx, prefix+"12-", 0)
	if err != nil {
		return nil, waveResult{}, err
	}
	// The other zones' digests are not part of the run: cancel them, so
	// none falls due during a later scenario.
	_, err = b.conn.Exec(ctx, `
		WITH c AS (UPDATE batches SET state = 'canceled' WHERE state = 'open' AND recipient_id LIKE $1 || '%' RETURNING id)
		DELETE FROM river_job WHERE kind = 'flush_batch' AND state IN ('scheduled', 'available') AND (args->>'batch_id')::bigint IN (SELECT id FROM c)`, prefix)
	return ds, w, err
}

// mixedPreferences: one event to an audience whose recipients chose
// their own modes for its type, as a real audience has: a tenth
// immediate, a tenth daily, a twentieth never, a fiftieth unsubscribed
// from everything, the rest the type's cool-down; next to the same event
// of a type nobody chose anything for. Then the time until the immediate
// tenth's emails are all sent, counted from the mixed event's request.
func (b *bench) mixedPreferences(ctx context.Context) error {
	for _, typ := range []string{"bench.plain", "bench.mixed"} {
		if err := b.putType(typ, `{"default_mode":"cooldown","window":"1h","max_wait":"0"}`); err != nil {
			return err
		}
	}
	sizes := b.sizes(20_000, 2_000)
	ds, err := b.atBothSizes("mx", sizes, func(prefix string, _, n int) ([]time.Duration, error) {
		return b.mixedOnce(ctx, prefix, n)
	})
	if err != nil {
		return err
	}
	var rows []row
	var mixed [2]time.Duration
	for i, n := range sizes {
		plain, sent := ds[i][0], ds[i][2]
		mixed[i] = ds[i][1]
		rows = append(rows,
			row{fmt.Sprintf("one event to %d recipients with modes of their own ÷ the same with none", n),
				ratio(mixed[i], plain, "")},
			row{fmt.Sprintf("the %d immediate emails all sent, from the request", (n+9)/10), sent.Round(time.Millisecond).String()})
	}
	rows = append(rows, growthRow("mixed", mixed))
	b.report.add("Mixed preferences: an audience whose recipients chose their own modes", rows)
	return nil
}

// mixedOnce stores n recipients named prefix… with their choices for
// bench.mixed, posts an event of bench.plain and one of bench.mixed to
// them, and returns the two times and the time from the second request
// until the immediate emails were all received.
func (b *bench) mixedOnce(ctx context.Context, prefix string, n int) ([]time.Duration, error) {
	if err := b.recipients(ctx, prefix, n); err != nil {
		return nil, err
	}
	if _, err := b.conn.Exec(ctx, `INSERT INTO type_preferences (recipient_id, type_key, mode)
		SELECT $1 || i, 'bench.mixed', CASE i % 10 WHEN 0 THEN 'immediate' WHEN 1 THEN 'daily' ELSE 'never' END
		FROM generate_series(0, $2 - 1) AS i WHERE i % 10 < 2 OR i % 20 = 2`, prefix, n); err != nil {
		return nil, err
	}
	if _, err := b.conn.Exec(ctx, `UPDATE recipients SET unsubscribed = true
		WHERE id IN (SELECT $1 || i FROM generate_series(3, $2 - 1, 50) AS i)`, prefix, n); err != nil {
		return nil, err
	}
	if err := b.settle(ctx); err != nil {
		return nil, err
	}
	audience := ids(prefix, 0, n)
	plain, err := b.postTimed(event("bench.plain", "", "", audience))
	if err != nil {
		return nil, err
	}
	received := b.smtp.Received()
	t0 := time.Now()
	mixed, err := b.postTimed(event("bench.mixed", "", "", audience))
	if err != nil {
		return nil, err
	}
	sent, err := b.immediateSent(ctx, prefix, (n+9)/10, received, t0)
	if err != nil {
		return nil, err
	}
	// The cool-down and daily batches are not part of the run: cancel
	// them, so none falls due during a later scenario.
	_, err = b.conn.Exec(ctx, `UPDATE batches SET state = 'canceled' WHERE state = 'open' AND recipient_id LIKE $1 || '%'`, prefix)
	return []time.Duration{plain, mixed, sent}, err
}

// immediateSent waits until the sink has received want more emails than
// it had (received) and the database has the immediate batches of the
// recipients named prefix… all sent, and returns the time from t0 until
// the sink had them. The sink counts every email, a batch of another
// scenario falling due meanwhile too: its count alone could end the wait
// early, and an email more than want means the time is not the
// immediate emails' alone.
func (b *bench) immediateSent(ctx context.Context, prefix string, want, received int, t0 time.Time) (time.Duration, error) {
	var took time.Duration
	for deadline := time.Now().Add(5 * time.Minute); ; time.Sleep(20 * time.Millisecond) {
		got := b.smtp.Received() - received
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("%d of %d immediate emails received in 5 minutes", got, want)
		}
		if got < want {
			continue
		}
		if took == 0 {
			took = time.Since(t0)
		}
		var sent int
		if err := b.conn.QueryRow(ctx, `SELECT count(*) FROM batches b JOIN deliveries d ON d.batch_id = b.id
			WHERE b.mode = 'immediate' AND b.recipient_id LIKE $1 || '%' AND d.state = 'sent'`, prefix).Scan(&sent); err != nil {
			return 0, err
		}
		if sent < want {
			continue
		}
		if got > want {
			return 0, fmt.Errorf("the sink received %d emails while %d immediate ones were sent: another scenario's batches fell due", got, want)
		}
		return took, nil
	}
}

// scattered: one event to 100,000 recipients drawn at random from a
// population of 1,000,000 named by UUID, each with history (a sent batch
// holding three of the day's notifications), as an artist's followers
// are scattered among a site's users; next to the same event to the
// 100,000 of the population whose ids come first in byte order, posted
// on the same tables: recipients alike in all but where their keys fall,
// which run together. An audience in one run of keys lands on few index
// pages; a scattered one on a page of its own per recipient in every
// index keyed by recipient.
func (b *bench) scattered(ctx context.Context) error {
	population, n := 1_000_000, 100_000
	if b.quick {
		population, n = 100_000, 10_000
	}
	if err := b.putType("bench.scatter", `{"default_mode":"cooldown","window":"1h","max_wait":"0"}`); err != nil {
		return err
	}
	t0 := time.Now()
	together, audience, err := b.population(ctx, population, n)
	if err != nil {
		return err
	}
	setup := time.Since(t0)
	var took [2]time.Duration
	for i, ids := range [][]string{audience, together} {
		if err := b.settle(ctx); err != nil {
			return err
		}
		if took[i], err = b.postTimed(event("bench.scatter", "", "", ids)); err != nil {
			return err
		}
	}
	scattered := took[0]
	// The goal is for 100,000 recipients; -quick's 10,000 have none.
	goal := ""
	if n == 100_000 {
		goal = " (goal ≤ 2 s)"
	}
	b.report.add("Scattered audience: followers drawn from a whole population", []row{
		{fmt.Sprintf("population: %d recipients named by UUID, %d notifications of the day, written in", population, 3*population), setup.Round(time.Second).String()},
		{fmt.Sprintf("one event to %d of them, drawn at random", n), scattered.Round(time.Millisecond).String() + goal},
		{fmt.Sprintf("the same to the %d of them whose ids come first", n), took[1].Round(time.Millisecond).String()},
		{"scattered ÷ together", fmt.Sprintf("%.2f", scattered.Seconds()/took[1].Seconds())},
	})
	return nil
}

// population stores size recipients named by UUID, each with a sent
// batch of three notifications left unread (emailed, never opened in
// the app: in the index of unread notifications, which a fan-out's
// notifications join), and returns the n whose ids come first
// in byte order, and n others drawn at random from the rest.
func (b *bench) population(ctx context.Context, size, n int) (first, scattered []string, err error) {
	if _, err := b.conn.Exec(ctx, `
		WITH r AS (INSERT INTO recipients (id, email)
		           SELECT id, id || '@bench.example' FROM (SELECT 'p' || gen_random_uuid() AS id FROM generate_series(1, $1)) g RETURNING id),
		     nb AS (INSERT INTO batches (recipient_id, batch_key, mode, state, opened_at, last_event_at, closes_at, item_count, processed_at)
		            SELECT id, 'history', 'cooldown', 'sent', now() - interval '2 hours', now() - interval '2 hours',
		                   now() - interval '1 hour', 3, now() - interval '1 hour' FROM r RETURNING id, recipient_id)
		INSERT INTO notifications (event_id, recipient_id, type_key, batch_id, occurred_at, read_at)
		SELECT 0, recipient_id, 'bench.scatter', id, now() - interval '2 hours', NULL FROM nb, generate_series(1, 3)`, size); err != nil {
		return nil, nil, err
	}
	// Only this scenario names recipients "p…"; the UUID fan-out's start
	// with a hex digit.
	rows, err := b.conn.Query(ctx, `SELECT id FROM recipients WHERE id LIKE 'p%' ORDER BY id`)
	if err != nil {
		return nil, nil, err
	}
	all, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, nil, err
	}
	rest := slices.Clone(all[n:])
	rand.New(rand.NewPCG(3, 4)).Shuffle(len(rest), func(i, j int) { rest[i], rest[j] = rest[j], rest[i] })
	return all[:n], rest[:n], nil
}
