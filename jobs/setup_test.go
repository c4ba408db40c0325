package jobs_test

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/db/dbtest"
	"github.com/lull-dev/lull/jobs"
	"github.com/lull-dev/lull/mail"
	"github.com/lull-dev/lull/mailtemplates"
	"github.com/lull-dev/lull/preferences/batching"
)

// clock is a test clock that only moves when told.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}
func (c *clock) Set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

type testBundle struct {
	db     *db.DB
	engine *batching.Engine
	flush  *jobs.FlushWorker
	client *river.Client[pgx.Tx]
	clock  *clock
	jobID  atomic.Int64
}

// setup gives a test its own database, an engine on a test clock, and a
// flush worker that sends to the built-in outbox. Jobs are inserted by a
// real River client but worked by flushDue, so the test controls time.
func setup(t *testing.T) *testBundle {
	t.Helper()
	d := dbtest.New(t)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	c := &clock{t: time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)}
	flush := &jobs.FlushWorker{
		DB: d, Sender: &mail.Outbox{DB: d}, From: "lull@example.com", Logger: logger, Now: c.Now,
		Links: mailtemplates.Links{BaseURL: "http://lull.test", Secret: []byte("0123456789abcdef0123456789abcdef")},
	}
	client, err := jobs.NewClient(d, jobs.Config{Workers: 1, JobTimeout: time.Minute, RescueAfter: time.Hour, SweepEvery: time.Hour, Retention: 720 * time.Hour}, flush, logger, true)
	if err != nil {
		t.Fatal(err)
	}
	b := &testBundle{db: d, flush: flush, client: client, clock: c}
	b.engine = &batching.Engine{DB: d, Scheduler: &jobs.Scheduler{Client: client}, Logger: logger, Now: c.Now}
	return b
}

func (b *testBundle) withSender(s mail.Sender) { b.flush.Sender = s }

// saveType registers a type, with defaults for what the test leaves out.
func (b *testBundle) saveType(t *testing.T, typ db.Type) {
	t.Helper()
	if typ.Name == "" {
		typ.Name = typ.Key
	}
	if typ.DefaultMode == "" {
		typ.DefaultMode = "cooldown"
	}
	if typ.WindowMS == 0 {
		typ.WindowMS = 5 * 60_000
	}
	if typ.DisplayLimit == 0 {
		typ.DisplayLimit = 10
	}
	if typ.ItemOrder == "" {
		typ.ItemOrder = "latest"
	}
	if typ.ItemText == "" {
		typ.ItemText = "{{actor.name}}: {{object.title}}"
	}
	if typ.GroupText == "" {
		typ.GroupText = "1 new " + typ.Name + "|{{count}} new " + typ.Name
	}
	if err := b.engine.SaveType(context.Background(), &typ); err != nil {
		t.Fatal(err)
	}
}

// recipient creates a recipient with an email address.
func (b *testBundle) recipient(t *testing.T, id, zone string) {
	t.Helper()
	err := db.UpsertRecipient(context.Background(), b.db.Pool, &db.Recipient{ID: id, Email: id + "@example.com", Name: id, Timezone: zone, Active: true})
	if err != nil {
		t.Fatal(err)
	}
}

// setPref stores one type preference for a recipient.
func (b *testBundle) setPref(t *testing.T, rid, typ, mode string, window, maxWait time.Duration) {
	t.Helper()
	ctx := context.Background()
	rec, err := db.GetRecipient(ctx, b.db.Bun, rid)
	if err != nil {
		t.Fatal(err)
	}
	prefs, err := db.TypePreferences(ctx, b.db.Pool, rid)
	if err != nil {
		t.Fatal(err)
	}
	p := db.TypePreference{RecipientID: rid, TypeKey: typ, Mode: mode}
	if window > 0 {
		w := window.Milliseconds()
		p.WindowMS = &w
	}
	if maxWait >= 0 {
		m := maxWait.Milliseconds()
		p.MaxWaitMS = &m
	}
	prefs[typ] = p
	var rows []db.TypePreference
	for _, v := range prefs {
		rows = append(rows, v)
	}
	if err := db.SavePreferences(ctx, b.db.Pool, rec, rows); err != nil {
		t.Fatal(err)
	}
}

// post ingests an event of typ from actor to recipients.
func (b *testBundle) post(t *testing.T, typ, actor string, recipients ...string) *batching.IngestResult {
	t.Helper()
	ev := &batching.Event{Type: typ, Actor: batching.Actor{ID: actor, Name: actor},
		Object: batching.Object{Type: "doc", ID: "7", Title: "Q3 plan"}}
	for _, r := range recipients {
		ev.Recipients = append(ev.Recipients, batching.RecipientRef{ID: r})
	}
	res, err := b.engine.Ingest(context.Background(), 1, ev)
	if err != nil {
		t.Fatalf("ingest: %v", err)
	}
	return res
}

// flushDue works a flush job for every batch due at the test clock's time
// and returns how many were worked.
func (b *testBundle) flushDue(t *testing.T) int {
	t.Helper()
	ctx := context.Background()
	ids, err := db.DueBatches(ctx, b.db.Pool, b.clock.Now(), 10000)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		if err := b.work(ctx, id, 1); err != nil {
			t.Fatalf("flush batch %d: %v", id, err)
		}
	}
	return len(ids)
}

// work runs one flush job for batch id as attempt number attempt.
func (b *testBundle) work(ctx context.Context, id int64, attempt int) error {
	return b.workAs(ctx, b.jobID.Add(1), id, attempt)
}

func (b *testBundle) workAs(ctx context.Context, jobID, id int64, attempt int) error {
	job := &river.Job[jobs.FlushArgs]{
		JobRow: &rivertype.JobRow{ID: jobID, Attempt: attempt, MaxAttempts: 8, Kind: "flush_batch"},
		Args:   jobs.FlushArgs{BatchID: id},
	}
	return b.flush.Work(ctx, job)
}

// outbox returns what the outbox holds, oldest first.
func (b *testBundle) outbox(t *testing.T) []db.OutboxMessage {
	t.Helper()
	ms, err := db.ListOutbox(context.Background(), b.db.Pool, 0, 0, 100000)
	if err != nil {
		t.Fatal(err)
	}
	for i, j := 0, len(ms)-1; i < j; i, j = i+1, j-1 {
		ms[i], ms[j] = ms[j], ms[i]
	}
	return ms
}

// batch loads one batch.
func (b *testBundle) batch(t *testing.T, id int64) *db.Batch {
	t.Helper()
	bt, err := db.GetBatch(context.Background(), b.db.Pool, id)
	if err != nil {
		t.Fatal(err)
	}
	return bt
}

// count runs a COUNT query.
func (b *testBundle) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := b.db.Pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
