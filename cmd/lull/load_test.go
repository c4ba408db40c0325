package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lull-dev/lull/mail/smtptest"
)

// The fault tests drive lull the way a host application does: clients
// post events with idempotency keys and keep a log of what lull
// acknowledged, then the log is reconciled against the database and the
// mail that arrived. Nothing here reaches into lull's memory.

const faultAPIKey = "fault-test-key"

// faultEnv is the environment of a lull under a fault test: its own
// database, a bootstrap API key, and timeouts short enough that a flush
// orphaned by a killed process is taken over within seconds.
func faultEnv(dbURL string, smtp *smtptest.Server) map[string]string {
	env := map[string]string{
		"DATABASE_URL": dbURL, "LULL_API_KEY": faultAPIKey, "LULL_MAIL_FROM": "lull@example.com",
		"LULL_JOB_TIMEOUT": "3s", "LULL_RESCUE_AFTER": "4s",
	}
	if smtp != nil {
		env["LULL_SMTP_URL"] = smtp.URL()
	}
	return env
}

// cooldownType is a type whose batches close a second after their last
// event and at most two after their first, so a test sees many flushes.
// Every item is listed (max_items equals display_limit) by its title,
// which the load sets to the event's key: an email's text says exactly
// which events it carries.
const cooldownType = `{"default_mode":"cooldown","window":"1s","max_wait":"2s","max_items":100,"display_limit":100,"item_text":"{{object.title}}"}`

// request is one POST of an event as the client saw it.
type request struct {
	key     string
	start   time.Time
	took    time.Duration
	status  int    // 0 when no answer came
	ctype   string // the answer's Content-Type
	problem string // a problem's title, for error answers
	// canceled is set when the client itself gave up (the load stopped),
	// which says nothing about lull.
	canceled bool
}

// loadGen posts events, each with a unique key ("key-0000042", also its
// object's title) to fanout of a pool of recipients given inline, from
// several workers, round-robin over the lull processes in targets.
type loadGen struct {
	typ        string
	recipients int
	fanout     int
	client     *http.Client
	targets    atomic.Pointer[[]string]
	seq        atomic.Int64
	turn       atomic.Int64
	inFlight   atomic.Int64 // requests sent and not yet answered

	mu       sync.Mutex
	acked    map[string]int64    // key -> event id, for 2xx answers
	rcpts    map[string][]string // key -> recipient ids
	pending  map[string]bool     // keys posted without a 2xx answer yet
	requests []request
}

func newLoad(typ string, recipients, fanout int, targets ...string) *loadGen {
	l := &loadGen{typ: typ, recipients: recipients, fanout: fanout,
		client: &http.Client{Timeout: 20 * time.Second},
		acked:  map[string]int64{}, rcpts: map[string][]string{}, pending: map[string]bool{}}
	l.setTargets(targets...)
	return l
}

func (l *loadGen) setTargets(bases ...string) { l.targets.Store(&bases) }

func (l *loadGen) target() string {
	ts := *l.targets.Load()
	return ts[int(l.turn.Add(1))%len(ts)]
}

// body is the event for key number n and its recipients.
func (l *loadGen) body(n int64) (string, []string) {
	key := fmt.Sprintf("key-%07d", n)
	var rs, refs []string
	for i := range l.fanout {
		id := fmt.Sprintf("r%03d", (int(n)*7+i)%l.recipients)
		rs = append(rs, id)
		refs = append(refs, fmt.Sprintf(`{"id":%q,"email":"%s@example.com"}`, id, id))
	}
	return fmt.Sprintf(`{"type":%q,"key":%q,"actor":{"id":"app","name":"App"},"object":{"type":"doc","id":%q,"title":%q},"recipients":[%s]}`,
		l.typ, key, key, key, strings.Join(refs, ",")), rs
}

// post sends event number n to base and records the answer.
func (l *loadGen) post(ctx context.Context, base string, n int64) request {
	body, rs := l.body(n)
	key := fmt.Sprintf("key-%07d", n)
	r := request{key: key, start: time.Now()}
	l.mu.Lock()
	l.rcpts[key] = rs
	if _, ok := l.acked[key]; !ok {
		l.pending[key] = true
	}
	l.mu.Unlock()
	req, _ := http.NewRequestWithContext(ctx, "POST", base+"/api/v1/events", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+faultAPIKey)
	req.Header.Set("Content-Type", "application/json")
	l.inFlight.Add(1)
	resp, err := l.client.Do(req)
	l.inFlight.Add(-1)
	r.took = time.Since(r.start)
	r.canceled = err != nil && ctx.Err() != nil
	if err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		r.status, r.ctype = resp.StatusCode, resp.Header.Get("Content-Type")
		var ans struct {
			ID    int64  `json:"id"`
			Title string `json:"title"`
		}
		json.Unmarshal(b, &ans)
		r.problem = ans.Title
		if r.status/100 == 2 {
			l.mu.Lock()
			l.acked[key] = ans.ID
			delete(l.pending, key)
			l.mu.Unlock()
		}
	}
	l.mu.Lock()
	l.requests = append(l.requests, r)
	l.mu.Unlock()
	return r
}

// run posts new events from workers until ctx ends, at most rate a
// second in all when rate > 0, and returns when every worker is done.
func (l *loadGen) run(ctx context.Context, workers int, rate float64) {
	var tokens <-chan time.Time
	if rate > 0 {
		tk := time.NewTicker(time.Duration(float64(time.Second) / rate))
		defer tk.Stop()
		tokens = tk.C
	}
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				if tokens != nil {
					select {
					case <-tokens:
					case <-ctx.Done():
						return
					}
				}
				l.post(ctx, l.target(), l.seq.Add(1))
			}
		})
	}
	wg.Wait()
}

// start runs the load in the background; the returned stop ends it and
// waits for the workers.
func (l *loadGen) start(workers int, rate float64) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { l.run(ctx, workers, rate); close(done) }()
	return func() { cancel(); <-done }
}

func (l *loadGen) ackedCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acked)
}

func (l *loadGen) pendingKeys() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var keys []string
	for k := range l.pending {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func (l *loadGen) ackedKeys() map[string]int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]int64, len(l.acked))
	for k, v := range l.acked {
		out[k] = v
	}
	return out
}

func (l *loadGen) log() []request {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]request(nil), l.requests...)
}

// retryPending posts again, with the same keys, every event that got no
// 2xx answer, as a well-behaved client does after an error; each must now
// be acknowledged. It returns how many were retried.
func (l *loadGen) retryPending(t *testing.T, base string) int {
	t.Helper()
	keys := l.pendingKeys()
	for _, k := range keys {
		var n int64
		fmt.Sscanf(k, "key-%d", &n)
		if r := l.post(context.Background(), base, n); r.status != http.StatusAccepted {
			t.Fatalf("retrying %s after the fault: %d %s", k, r.status, r.problem)
		}
	}
	return len(keys)
}

// storedEvent is what the database holds for one event key.
type storedEvent struct {
	id     int64
	copies int
	// batches maps each recipient's notification to its batch and the
	// batch's state ("" when the notification has no batch).
	batches map[string]batchState
}

type batchState struct {
	id    int64
	state string
}

// stored loads, for the given keys, the events and where their
// notifications are.
func stored(t *testing.T, dbURL string, keys []string) map[string]*storedEvent {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	out := map[string]*storedEvent{}
	rows, err := conn.Query(ctx, `SELECT key, min(id), count(*) FROM events WHERE key = ANY($1) GROUP BY key`, keys)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		e := &storedEvent{batches: map[string]batchState{}}
		var key string
		if err := rows.Scan(&key, &e.id, &e.copies); err != nil {
			t.Fatal(err)
		}
		out[key] = e
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	rows, err = conn.Query(ctx, `
		SELECT e.key, n.recipient_id, coalesce(b.id, 0), coalesce(b.state, '')
		FROM events e JOIN notifications n ON n.event_id = e.id AND n.created_at = e.created_at
		LEFT JOIN batches b ON b.id = n.batch_id
		WHERE e.key = ANY($1)`, keys)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var key, rid string
		var b batchState
		if err := rows.Scan(&key, &rid, &b.id, &b.state); err != nil {
			t.Fatal(err)
		}
		out[key].batches[rid] = b
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	return out
}

// checkAcknowledged checks that every acknowledged event is stored once,
// under the id lull answered, with one notification per recipient in a
// batch in one of the states allowed. It returns the batches involved.
func (l *loadGen) checkAcknowledged(t *testing.T, dbURL string, states ...string) map[int64]bool {
	t.Helper()
	acked := l.ackedKeys()
	keys := make([]string, 0, len(acked))
	for k := range acked {
		keys = append(keys, k)
	}
	got := stored(t, dbURL, keys)
	batches := map[int64]bool{}
	bad := 0
	for _, k := range keys {
		e := got[k]
		l.mu.Lock()
		rs := l.rcpts[k]
		l.mu.Unlock()
		switch {
		case e == nil:
			t.Errorf("event %s was acknowledged with id %d but is not stored", k, acked[k])
		case e.copies != 1 || e.id != acked[k]:
			t.Errorf("event %s: %d stored copies, id %d; acknowledged as %d", k, e.copies, e.id, acked[k])
		default:
			for _, r := range rs {
				b, ok := e.batches[r]
				if !ok || b.id == 0 || !contains(states, b.state) {
					t.Errorf("event %s for %s: notification in batch %d (%q), want one in state %v", k, r, b.id, b.state, states)
				}
				batches[b.id] = true
			}
			continue
		}
		if bad++; bad > 10 {
			t.Fatal("too many missing events")
		}
	}
	return batches
}

// checkConsistentCounts checks that every batch's item count is the
// number of notifications it holds, so no half-applied ingest survived.
func checkConsistentCounts(t *testing.T, dbURL string) {
	t.Helper()
	if n := queryInt(t, dbURL, `
		SELECT count(*) FROM batches b
		WHERE b.item_count <> (SELECT count(*) FROM notifications n WHERE n.batch_id = b.id AND n.retracted_at IS NULL)`); n != 0 {
		t.Errorf("%d batches have an item count that does not match their notifications", n)
	}
}

// waitDrained waits until no batch is open or flushing.
func waitDrained(t *testing.T, dbURL string, timeout time.Duration) {
	t.Helper()
	waitUntil(t, timeout, "every batch to be flushed", func() bool {
		return queryInt(t, dbURL, "SELECT count(*) FROM batches WHERE state IN ('open', 'flushing')") == 0
	})
}

// int64Set reads a set of ids with sql.
func int64Set(t *testing.T, dbURL, sql string, args ...any) map[int64]bool {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, sql, args...)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[int64]bool, len(ids))
	for _, id := range ids {
		out[id] = true
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func sortedIDs(set map[int64]bool) []int64 {
	out := make([]int64, 0, len(set))
	for id := range set {
		out = append(out, id)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// checkProcessLog fails the test if a lull process panicked or logged an
// error it should not have.
func checkProcessLog(t *testing.T, p *process) {
	t.Helper()
	out := p.out.String()
	for _, bad := range []string{"panic:", "fatal error:", "DATA RACE"} {
		if strings.Contains(out, bad) {
			i := strings.Index(out, bad)
			t.Errorf("lull's output has %q:\n%s", bad, out[i:min(len(out), i+3000)])
		}
	}
}
