package simulate_test

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/db/dbtest"
	"github.com/lull-dev/lull/jobs"
	"github.com/lull-dev/lull/mail"
	"github.com/lull-dev/lull/mailtemplates"
	"github.com/lull-dev/lull/preferences/batching"
	"github.com/lull-dev/lull/preferences/simulate"
)

// The simulator is only worth having if its answers are the engine's. These
// tests record a stream of events over a range with daylight-saving
// switches in it, drive it through the real engine (real PostgreSQL, real
// flush jobs, an injected clock) and through the simulator, and require
// the same batches: recipient, key, mode, opening, closing, size and
// whether they were sent.

// testClock only moves when told.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *testClock) Set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

// engineBundle is the engine with its flush worker on a test database.
type engineBundle struct {
	db     *db.DB
	engine *batching.Engine
	flush  *jobs.FlushWorker
	clock  *testClock
	jobID  int64
}

func setupEngine(t *testing.T) *engineBundle {
	t.Helper()
	d := dbtest.New(t)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	c := &testClock{}
	flush := &jobs.FlushWorker{DB: d, Sender: &mail.Outbox{DB: d}, From: "lull@example.com", Logger: logger, Now: c.Now,
		Links: mailtemplates.Links{BaseURL: "http://lull.test", Secret: []byte("0123456789abcdef0123456789abcdef")}}
	client, err := jobs.NewClient(d, jobs.Config{Workers: 1, JobTimeout: time.Minute, RescueAfter: time.Hour, SweepEvery: time.Hour, Retention: 720 * time.Hour}, flush, logger, true)
	if err != nil {
		t.Fatal(err)
	}
	return &engineBundle{db: d, flush: flush, clock: c,
		engine: &batching.Engine{DB: d, Scheduler: &jobs.Scheduler{Client: client}, Logger: logger, Now: c.Now}}
}

// flushDue works a flush job for every batch due at the clock's time, as
// the jobs would have by then.
func (b *engineBundle) flushDue(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	ids, err := db.DueBatches(ctx, b.db.Pool, b.clock.Now(), 100000)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		b.jobID++
		job := &river.Job[jobs.FlushArgs]{JobRow: &rivertype.JobRow{ID: b.jobID, Attempt: 1, MaxAttempts: 8, Kind: "flush_batch"}, Args: jobs.FlushArgs{BatchID: id}}
		if err := b.flush.Work(ctx, job); err != nil {
			t.Fatalf("flush batch %d: %v", id, err)
		}
	}
}

// world registers a type for every mode and rule, and recipients in time
// zones on both sides of the Atlantic and the equator, with quiet hours
// across the switch nights, digests at a time that does not exist (or
// exists twice) on switch days, choices of their own, an unsubscribed, an
// inactive and an addressless one.
func (b *engineBundle) world(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	for _, typ := range []db.Type{
		{Key: "ping", DefaultMode: "immediate", BurstLimit: 3},
		{Key: "comment", DefaultMode: "cooldown", WindowMS: 5 * 60_000, MaxWaitMS: 12 * 60_000, MaxItems: 4, BurstLimit: 5},
		{Key: "task", DefaultMode: "cooldown", WindowMS: 10 * 60_000, MaxWaitMS: 30 * 60_000, Lead: true, BurstLimit: 5},
		{Key: "fixed", DefaultMode: "cooldown", WindowMS: 15 * 60_000, MaxWaitMS: 15 * 60_000, BurstLimit: 5},
		{Key: "share", DefaultMode: "daily", WindowMS: 5 * 60_000, BurstLimit: 5},
		{Key: "news", DefaultMode: "weekly", WindowMS: 5 * 60_000, BurstLimit: 5},
		{Key: "pulse", DefaultMode: "hourly", WindowMS: 5 * 60_000, BurstLimit: 5},
		{Key: "recap", DefaultMode: "monthly", WindowMS: 5 * 60_000, BurstLimit: 5},
		{Key: "alert", DefaultMode: "immediate", Required: true, WindowMS: 5 * 60_000},
		{Key: "chatter", DefaultMode: "never", WindowMS: 5 * 60_000, BurstLimit: 5},
	} {
		typ.Name, typ.DisplayLimit, typ.ItemOrder = typ.Key, 10, "latest"
		typ.ItemText, typ.GroupText = "{{actor.name}}", "{{count}} "+typ.Key
		if err := db.SaveType(ctx, b.db.Pool, &typ); err != nil {
			t.Fatal(err)
		}
	}
	minutes := func(hhmm string) *int {
		var h, m int
		fmt.Sscanf(hhmm, "%d:%d", &h, &m)
		v := h*60 + m
		return &v
	}
	ms := func(d time.Duration) *int64 { v := d.Milliseconds(); return &v }
	yes := true
	for _, r := range []struct {
		id, zone, email string
		active, unsub   bool
		daily           string
		weeklyOn        int
		weekly          string
		quiet           [2]string
		prefs           []db.TypePreference
		weeklyDays      int // Sunday = 1
		everyHours      int
		monthlyDay      int
		monthly         string
	}{
		{id: "ana", zone: "Europe/Berlin", active: true, daily: "08:00", weeklyOn: 1, weekly: "08:00", quiet: [2]string{"22:00", "07:00"},
			weeklyDays: 1<<1 | 1<<4, everyHours: 2, monthlyDay: 31, monthly: "08:00"},
		{id: "ben", zone: "America/New_York", active: true, daily: "07:30", weeklyOn: 0, weekly: "18:00", quiet: [2]string{"01:00", "03:00"},
			prefs:      []db.TypePreference{{TypeKey: "comment", Mode: "daily"}, {TypeKey: "chatter", Mode: "cooldown", WindowMS: ms(3 * time.Minute), MaxWaitMS: ms(0)}},
			everyHours: 1, monthlyDay: 1, monthly: "01:30"},
		{id: "chi", zone: "Australia/Sydney", active: true, daily: "06:15", weeklyOn: 5, weekly: "17:00",
			prefs: []db.TypePreference{{TypeKey: "ping", Mode: "cooldown", WindowMS: ms(2 * time.Minute), Lead: &yes}}},
		{id: "dee", zone: "UTC", active: true, daily: "00:00", weeklyOn: 3, weekly: "23:59",
			prefs:      []db.TypePreference{{TypeKey: "task", Mode: "immediate"}, {TypeKey: "share", Mode: "weekly"}, {TypeKey: "pulse", Mode: "monthly"}},
			weeklyDays: 1<<0 | 1<<3 | 1<<6, everyHours: 12, monthlyDay: 10, monthly: "23:59"},
		{id: "ivy", zone: "Europe/Berlin", active: true, daily: "02:30", weeklyOn: 0, weekly: "02:30", quiet: [2]string{"02:00", "03:00"}},
		{id: "jon", zone: "America/New_York", active: true, daily: "01:30", weeklyOn: 0, weekly: "01:30", everyHours: 4, monthlyDay: 8, monthly: "02:30"},
		{id: "fay", zone: "Asia/Kolkata", active: true, unsub: true, daily: "08:00", weeklyOn: 1, weekly: "08:00"},
		{id: "gus", zone: "UTC", active: false, daily: "08:00", weeklyOn: 1, weekly: "08:00"},
		{id: "hal", zone: "Europe/London", active: true, email: "-", daily: "08:00", weeklyOn: 1, weekly: "08:00"},
	} {
		email := r.id + "@example.com"
		if r.email == "-" {
			email = ""
		}
		rec := &db.Recipient{ID: r.id, Email: email, Name: r.id, Timezone: r.zone, Active: r.active}
		if err := db.UpsertRecipient(ctx, b.db.Pool, rec); err != nil {
			t.Fatal(err)
		}
		rec.DailyAt, rec.WeeklyOn, rec.WeeklyAt, rec.Unsubscribed = *minutes(r.daily), r.weeklyOn, *minutes(r.weekly), r.unsub
		rec.WeeklyDays, rec.EveryHours, rec.MonthlyDay, rec.MonthlyAt = r.weeklyDays, cmp.Or(r.everyHours, 4), cmp.Or(r.monthlyDay, 1), *minutes(cmp.Or(r.monthly, "08:00"))
		if r.quiet[0] != "" {
			rec.QuietStart, rec.QuietEnd = minutes(r.quiet[0]), minutes(r.quiet[1])
		}
		for i := range r.prefs {
			r.prefs[i].RecipientID = r.id
		}
		if err := db.SavePreferences(ctx, b.db.Pool, rec, r.prefs); err != nil {
			t.Fatal(err)
		}
	}
}

var agreementRecipients = []string{"ana", "ben", "chi", "dee", "ivy", "jon", "fay", "gus", "hal"}

// recordedStream is a reproducible stream over [from, from+days): bursts of
// a few to a few dozen events minutes apart, some of them on the nights
// the clocks change, with a mix of types, batch keys and fan-outs.
func recordedStream(seed uint64, from time.Time, days int, switches []time.Time) []simulate.Event {
	rng := rand.New(rand.NewPCG(seed, seed+1))
	types := []string{"ping", "ping", "comment", "comment", "task", "fixed", "share", "news", "alert", "chatter", "pulse", "recap"}
	var starts []time.Time
	for range days * 2 {
		starts = append(starts, from.Add(time.Duration(rng.Int64N(int64(days)*int64(24*time.Hour)))))
	}
	for _, s := range switches {
		for _, off := range []time.Duration{-150 * time.Minute, -40 * time.Minute, 10 * time.Minute, 70 * time.Minute} {
			starts = append(starts, s.Add(off))
		}
	}
	var events []simulate.Event
	pick := func() []string {
		var ids []string
		for range 1 + rng.IntN(3) {
			if id := agreementRecipients[rng.IntN(len(agreementRecipients))]; !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
		return ids
	}
	for _, at := range starts {
		typ, recipients := types[rng.IntN(len(types))], pick()
		for range 2 + rng.IntN(12) {
			// Pings come in floods, seconds apart; the rest minutes apart.
			gap := 240
			if typ == "ping" {
				gap = 20
			}
			at = at.Add(time.Duration(rng.IntN(gap)) * time.Second)
			if rng.IntN(4) == 0 {
				typ = types[rng.IntN(len(types))]
			}
			if rng.IntN(3) == 0 {
				recipients = pick()
			}
			ev := simulate.Event{At: at, Type: typ, Recipients: recipients}
			if typ == "comment" || typ == "task" {
				ev.BatchKey = []string{"", "doc:1", "doc:2"}[rng.IntN(3)]
			}
			events = append(events, ev)
		}
	}
	slices.SortStableFunc(events, func(a, b simulate.Event) int { return a.At.Compare(b.At) })
	return events
}

// batchLine is one batch as both sides describe it.
func batchLine(recipient, key, mode string, opened, closes time.Time, items int, sent bool) string {
	return fmt.Sprintf("%s %s %s opened %s closes %s items %d sent %v", recipient, key, mode,
		opened.UTC().Format(time.RFC3339), closes.UTC().Format(time.RFC3339), items, sent)
}

func TestSimulatorAgreesWithEngine(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		from     time.Time
		days     int
		switches []time.Time // UTC instants the clocks change in Europe and the US
	}{
		{"AutumnSwitches", time.Date(2026, 10, 22, 0, 0, 0, 0, time.UTC), 12,
			[]time.Time{time.Date(2026, 10, 25, 1, 0, 0, 0, time.UTC), time.Date(2026, 11, 1, 6, 0, 0, 0, time.UTC)}},
		{"SpringSwitches", time.Date(2026, 3, 6, 0, 0, 0, 0, time.UTC), 25,
			[]time.Time{time.Date(2026, 3, 8, 7, 0, 0, 0, time.UTC), time.Date(2026, 3, 29, 1, 0, 0, 0, time.UTC)}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			b := setupEngine(t)
			b.world(t)
			events := recordedStream(uint64(i+1)*17, tc.from, tc.days, tc.switches)

			// The engine: the clock steps from event to event, and the
			// flush jobs due by then run before the next event arrives.
			for _, ev := range events {
				b.clock.Set(ev.At)
				b.flushDue(t)
				in := &batching.Event{Type: ev.Type, BatchKey: ev.BatchKey, OccurredAt: &ev.At}
				for _, r := range ev.Recipients {
					in.Recipients = append(in.Recipients, batching.RecipientRef{ID: r})
				}
				if _, err := b.engine.Ingest(ctx, 1, in); err != nil {
					t.Fatalf("ingest at %v: %v", ev.At, err)
				}
			}
			end := events[len(events)-1].At.Add(40 * 24 * time.Hour) // past the next monthly digest
			b.clock.Set(end)
			b.flushDue(t)
			engine := engineBatches(t, b.db)

			// The simulator, on the same stream given as an upload, with
			// the settings loaded from the same database.
			upload := &simulate.Upload{Events: events}
			settings, err := batching.SimulationSettings(ctx, b.db, time.Time{}, time.Time{}, upload)
			if err != nil {
				t.Fatal(err)
			}
			sim := simulated(t, settings, func(add func(simulate.Event) error) error {
				for _, ev := range events {
					if err := add(ev); err != nil {
						return err
					}
				}
				return nil
			})
			compareBatches(t, engine, sim)
			coverage(t, engine)

			// Replayed from storage: events are read back in the order and
			// at the times lull accepted them. Under a fake clock their
			// created_at is the wall clock's, so first set it to the time
			// the engine saw (the occurred_at the test passed), as it is
			// in production.
			for _, q := range []string{
				`UPDATE events SET created_at = occurred_at`,
				`UPDATE notifications SET created_at = occurred_at`,
				`UPDATE skips s SET created_at = e.occurred_at FROM events e WHERE s.event_id = e.id`,
			} {
				if _, err := b.db.Pool.Exec(ctx, q); err != nil {
					t.Fatal(err)
				}
			}
			to := events[len(events)-1].At.Add(time.Second)
			stored, err := batching.SimulationSettings(ctx, b.db, tc.from, to, nil)
			if err != nil {
				t.Fatal(err)
			}
			sim = simulated(t, stored, func(add func(simulate.Event) error) error {
				return db.StreamSimulationEvents(ctx, b.db.Pool, tc.from, to, func(ev *db.SimulationEvent) error {
					return add(simulate.Event{At: ev.At, Type: ev.TypeKey, BatchKey: ev.BatchKey, Recipients: ev.Recipients})
				})
			})
			compareBatches(t, engine, sim)

			// The report sets what was sent beside the replay of the
			// current settings: the same emails, type by type.
			rep, err := batching.SimulateStored(ctx, b.db, stored, []simulate.Policy{simulate.Current()}, tc.from, to)
			if err != nil {
				t.Fatal(err)
			}
			actual, current := rep.Results[0], rep.Results[1]
			if actual.Kind != simulate.KindActual || actual.Overall.Emails != current.Overall.Emails || actual.Overall.Emails != countSent(engine) {
				t.Fatalf("actual %d emails, replayed %d, engine sent %d", actual.Overall.Emails, current.Overall.Emails, countSent(engine))
			}
			for i := range actual.Types {
				if a, c := actual.Types[i], current.Types[i]; a.Type != c.Type || a.Emails != c.Emails || a.EmailsPerRecipient != c.EmailsPerRecipient {
					t.Errorf("type %s: actual %+v, replayed %+v", a.Type, a.Metrics, c.Metrics)
				}
			}
			if rep.Events != len(events) {
				t.Errorf("replayed %d stored events, want %d", rep.Events, len(events))
			}
		})
	}
}

// engineBatches lists what the engine did, sorted.
func engineBatches(t *testing.T, d *db.DB) []string {
	t.Helper()
	rows, err := d.Pool.Query(context.Background(), `
		SELECT recipient_id, batch_key, mode, opened_at, closes_at, item_count, state FROM batches`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var rid, key, mode, state string
		var opened, closes time.Time
		var items int
		if err := rows.Scan(&rid, &key, &mode, &opened, &closes, &items, &state); err != nil {
			t.Fatal(err)
		}
		if state != db.StateSent && !(state == db.StateCanceled && rid == "hal") {
			t.Fatalf("batch of %s under %s is %s: the engine left something undone", rid, key, state)
		}
		out = append(out, batchLine(rid, key, mode, opened, closes, items, state == db.StateSent))
	}
	slices.Sort(out)
	return out
}

// simulated replays events from feed under the current settings and lists
// the batches, sorted.
func simulated(t *testing.T, s *simulate.Settings, feed func(add func(simulate.Event) error) error) []string {
	t.Helper()
	r := simulate.New(s, []simulate.Policy{simulate.Current()})
	var out []string
	r.OnBatch(func(_ int, b simulate.Batch) {
		out = append(out, batchLine(b.Recipient, b.Key, string(b.Mode), b.OpenedAt, b.ClosesAt, b.Items, b.Sent))
	})
	if err := feed(r.Add); err != nil {
		t.Fatal(err)
	}
	r.Report()
	slices.Sort(out)
	return out
}

func compareBatches(t *testing.T, engine, sim []string) {
	t.Helper()
	if slices.Equal(engine, sim) {
		return
	}
	missing, extra := diff(engine, sim), diff(sim, engine)
	t.Fatalf("engine made %d batches, simulator %d\nonly the engine's (first 10):\n  %s\nonly the simulator's (first 10):\n  %s",
		len(engine), len(sim), strings.Join(missing[:min(10, len(missing))], "\n  "), strings.Join(extra[:min(10, len(extra))], "\n  "))
}

// diff lists the lines of a that b lacks (both sorted, with repeats).
func diff(a, b []string) []string {
	var out []string
	j := 0
	for _, l := range a {
		for j < len(b) && b[j] < l {
			j++
		}
		if j < len(b) && b[j] == l {
			j++
			continue
		}
		out = append(out, l)
	}
	return out
}

// coverage makes sure the stream exercised what it is meant to: every
// mode, the burst guard, the leading item, max items and multi-item
// batches.
func coverage(t *testing.T, engine []string) {
	t.Helper()
	berlin, _ := time.LoadLocation("Europe/Berlin")
	type line struct {
		recipient, key, mode, closes string
		closesDay                    time.Weekday
	}
	var lines []line
	for _, l := range engine {
		f := strings.Fields(l)
		closes, _ := time.Parse(time.RFC3339, f[6])
		lines = append(lines, line{f[0], f[1], f[2], f[6], closes.In(berlin).Weekday()})
	}
	has := func(pred func(line) bool) bool { return slices.ContainsFunc(lines, pred) }
	checks := map[string]func(line) bool{
		"an immediate email": func(l line) bool { return l.mode == "immediate" },
		"a cooldown batch":   func(l line) bool { return l.mode == "cooldown" },
		"a daily digest":     func(l line) bool { return l.key == "digest:daily" && l.mode == "daily" },
		"a weekly digest":    func(l line) bool { return l.key == "digest:weekly" && l.mode == "weekly" },
		"an hourly digest":   func(l line) bool { return l.key == "digest:hourly" && l.mode == "hourly" },
		"a monthly digest":   func(l line) bool { return l.key == "digest:monthly" && l.mode == "monthly" },
		"a weekly digest on a second day": func(l line) bool {
			return l.key == "digest:weekly" && l.recipient == "ana" && strings.Contains(l.closes, "T") && l.closesDay == time.Thursday
		},
		"the burst guard": func(l line) bool { return l.key == "ping" && l.mode == "cooldown" && l.recipient != "chi" },
		"a leading item": func(l line) bool {
			return strings.HasPrefix(l.key, "task") && l.mode == "immediate" && l.recipient != "dee"
		},
		"a recipient's lead":  func(l line) bool { return l.key == "ping" && l.mode == "immediate" && l.recipient == "chi" },
		"a per-document key":  func(l line) bool { return l.key == "comment+doc:1" },
		"a muted type chosen": func(l line) bool { return l.key == "chatter" && l.recipient == "ben" },
	}
	for what, pred := range checks {
		if !has(pred) {
			t.Errorf("the stream never produced %s", what)
		}
	}
	for what, substr := range map[string]string{"a full batch (max items)": "items 4 sent", "an unsent batch": "sent false"} {
		if !slices.ContainsFunc(engine, func(l string) bool { return strings.Contains(l, substr) }) {
			t.Errorf("the stream never produced %s", what)
		}
	}
	if len(engine) < 100 {
		t.Errorf("only %d batches", len(engine))
	}
}

func countSent(lines []string) int {
	n := 0
	for _, l := range lines {
		if strings.HasSuffix(l, "sent true") {
			n++
		}
	}
	return n
}
