package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lull-dev/lull/db/dbtest"
	"github.com/lull-dev/lull/mail/smtptest"
	"github.com/lull-dev/lull/mailtemplates"
)

// TestModel is lull against a model of what it promises. Clients post
// events over the real HTTP API, retract them, read them in the feed,
// change preferences (whole and partial bodies), unsubscribe with the
// one-click link, flush and cancel batches and make the mail server
// refuse emails, all at once and at random, while batches close on the
// wall clock and one of the two lull processes is killed with SIGKILL
// and started again. Then everything is let settle and the database, the
// skip log and the emails that reached a real SMTP server are held
// against the model: the invariants of docs/reliability.md ("The model
// test"), from every acknowledged notification being accounted for
// exactly once to no email reaching someone who had unsubscribed.
//
// LULL_MODEL_SEED replays a seed (each client's operations, not their
// timing); LULL_MODEL_OPS sets the number of operations (3,000 by
// default, about half a minute; .ci/model runs a longer one).
func TestModel(t *testing.T) {
	t.Parallel()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("LULL_MODEL_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("LULL_MODEL_SEED=%q: want a number", s)
		}
	}
	ops := 3000
	if s := os.Getenv("LULL_MODEL_OPS"); s != "" {
		var err error
		if ops, err = strconv.Atoi(s); err != nil || ops < 100 {
			t.Fatalf("LULL_MODEL_OPS=%q: want a number of operations, at least 100", s)
		}
	}
	t.Logf("model seed %d, %d operations (replay with LULL_MODEL_SEED=%d)", seed, ops, seed)
	m := newModel(t, seed)
	m.setUp()
	m.run(ops)
	m.settle()
	m.check()
}

// The notification types of the model: one per mode, and a required one.
// Every item's text is its event's token and every group heading names
// its type and true count, so an email's text says exactly which events
// it lists and how many more it counts.
var modelTypes = map[string]string{
	"alert":    `{"default_mode":"immediate","burst_limit":3}`,
	"comment":  `{"default_mode":"cooldown","window":"1s","max_wait":"3s","max_items":3,"display_limit":2}`,
	"share":    `{"default_mode":"daily","display_limit":3}`,
	"news":     `{"default_mode":"never"}`,
	"security": `{"default_mode":"immediate","required":true,"burst_limit":100}`,
}

var modelTypeKeys = []string{"alert", "comment", "share", "news", "security"}

// modelType is what the model knows of a type.
type modelType struct {
	mode     string
	required bool
	maxItems int
}

var modelZones = []string{"UTC", "Asia/Tokyo", "America/New_York", "Asia/Kathmandu", "Australia/Adelaide"}

const (
	modelWorkers    = 6
	modelRecipients = 10
	modelSecret     = "model-test-secret-0123456789abcdef"
)

// model is one run: the lull processes, the clients' log of what lull
// acknowledged, and each recipient's preferences as they changed.
type model struct {
	t      *testing.T
	seed   uint64
	dbURL  string
	env    map[string]string
	smtp   *smtptest.Server
	client *http.Client
	links  mailtemplates.Links
	types  map[string]modelType
	a      *process
	// b is the process that is killed and restarted; nil while down.
	b      atomic.Pointer[process]
	bs     []*process // every b started, for their logs
	digest time.Time  // when the digests of the run close

	mu         sync.Mutex
	recipients map[string]*recipientModel
	rids       []string // known recipients, in creation order
	posts      []*postRec
	events     map[string]*eventRec // by token
	keyed      []*eventRec          // acknowledged events with a key, for replays
	batchIDs   []int64              // batches seen in answers, for flush and cancel
	retracts   []*retractRec
	reads      []*readRec
	actions    []*actionRec
	kills      []killRec
	counts     map[string]int
	problems   map[string][]string // by format
	// late and lateKilled are the longest a batch was sent after its
	// close time, without and with a kill of its flush.
	late, lateKilled time.Duration
}

// recipientModel is one recipient's preferences over time. Changes are
// made one at a time (mu), so the versions form a chain.
type recipientModel struct {
	mu       sync.Mutex
	versions []*prefVersion
}

// prefVersion is a recipient's preferences from the moment the request
// that set them was sent (from) until the request that replaced them was
// answered (until; zero while current): lull may have applied either at
// any time in between, so both count as possible there.
type prefVersion struct {
	from, until time.Time
	unsub       bool
	modes       map[string]string
	by          string // what made it
}

// postRec is one POST of an event as the client saw it.
type postRec struct {
	ev         *eventRec
	start, end time.Time
	answer     ingestAnswer
}

// eventRec is one event the clients made (a token), posted once or more.
type eventRec struct {
	tok, key, typ, batchKey string
	rcpts                   []string // distinct ids
	body                    []byte
	// first is the first 2xx answer; every later one must equal it.
	first *ingestAnswer
	acked time.Time // when first was received
	start time.Time // when it was first posted
}

type ingestAnswer struct {
	ID            int64 `json:"id"`
	Notifications int   `json:"notifications"`
	Suppressed    int   `json:"suppressed"`
	Batches       []struct {
		ID        int64     `json:"id"`
		Recipient string    `json:"recipient"`
		BatchKey  string    `json:"batch_key"`
		ClosesAt  time.Time `json:"closes_at"`
	} `json:"batches"`
}

type retractRec struct {
	ev        *eventRec
	end       time.Time
	removed   int
	canceled  []int64
	uncertain bool // retried after a kill: the first try may have removed them
}

// readRec is a feed/read: ids, or everything before a time, or all.
type readRec struct {
	rid        string
	ids        []int64
	before     time.Time // zero with ids
	start, end time.Time
}

// actionRec is an operator's flush or cancel of a batch.
type actionRec struct {
	kind      string
	batch     int64
	status    int
	end       time.Time
	uncertain bool
}

// killRec is a SIGKILL of b: when, and the batches whose flush was
// running or sending then.
type killRec struct {
	at      time.Time
	batches map[int64]bool
}

func newModel(t *testing.T, seed uint64) *model {
	m := &model{t: t, seed: seed, client: &http.Client{Timeout: 30 * time.Second},
		types: map[string]modelType{}, recipients: map[string]*recipientModel{}, events: map[string]*eventRec{},
		counts: map[string]int{}}
	m.smtp = smtptest.Start(t, smtptest.KeepAll())
	m.dbURL = dbtest.NewURL(t)
	m.env = faultEnv(m.dbURL, m.smtp)
	m.env["LULL_SECRET"] = modelSecret
	m.links = mailtemplates.Links{BaseURL: "http://lull.test", Secret: []byte(modelSecret)}
	return m
}

// problem records a broken invariant; the check groups them by format.
func (m *model) problem(format string, args ...any) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.addProblem(format, args...)
}

func (m *model) addProblem(format string, args ...any) {
	if m.problems == nil {
		m.problems = map[string][]string{}
	}
	m.problems[format] = append(m.problems[format], fmt.Sprintf(format, args...))
}

func (m *model) count(kind string) {
	m.mu.Lock()
	m.counts[kind]++
	m.mu.Unlock()
}

// setUp starts both processes, registers the types and the first
// recipients with their preferences. Digests close at the first whole
// minute at least 10 s away, in every recipient's zone, so a run long
// enough sees them close on their own.
func (m *model) setUp() {
	t := m.t
	m.a = startProcess(t, m.env)
	m.startB()
	for _, key := range modelTypeKeys {
		var typ map[string]any
		json.Unmarshal([]byte(modelTypes[key]), &typ)
		typ["item_text"] = "{{data.tok}}"
		typ["group_text"] = "grp " + key + " {{count}}"
		body, _ := json.Marshal(typ)
		m.a.post(t, "/api/v1/types/"+key, faultAPIKey, string(body))
		mt := modelType{mode: typ["default_mode"].(string)}
		mt.required, _ = typ["required"].(bool)
		if n, ok := typ["max_items"].(float64); ok {
			mt.maxItems = int(n)
		}
		m.types[key] = mt
	}
	m.digest = time.Now().Add(10 * time.Second).Truncate(time.Minute).Add(time.Minute)
	rng := rand.New(rand.NewPCG(m.seed, 1000))
	for i := range modelRecipients {
		id := fmt.Sprintf("r%02d", i)
		m.a.post(t, "/api/v1/recipients/"+id, faultAPIKey, fmt.Sprintf(`{"email":"%s@example.com","name":"R %d"}`, id, i))
		m.mu.Lock()
		m.addRecipient(id)
		m.mu.Unlock()
		m.putPreferences(rng, id, m.fullPreferences(rng), "set-up")
	}
}

// addRecipient starts the model of a new recipient: subscribed, with
// no choices. The caller holds m.mu.
func (m *model) addRecipient(id string) {
	if m.recipients[id] == nil {
		m.recipients[id] = &recipientModel{versions: []*prefVersion{{modes: map[string]string{}, by: "created"}}}
		m.rids = append(m.rids, id)
	}
}

func (m *model) startB() {
	p := startProcess(m.t, m.env)
	m.mu.Lock()
	m.bs = append(m.bs, p)
	m.mu.Unlock()
	m.b.Store(p)
}

// killB kills b with SIGKILL, notes which batches were being flushed, and
// starts it again after a pause.
func (m *model) killB(pause time.Duration) {
	// Aim at a moment when flushes are running, so the kill can land in
	// the middle of one.
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if queryInt(m.t, m.dbURL, `SELECT count(*) FROM river_job WHERE kind = 'flush_batch' AND state = 'running'`) > 0 {
			break
		}
	}
	p := m.b.Swap(nil)
	p.kill(m.t)
	k := killRec{at: time.Now(), batches: int64Set(m.t, m.dbURL, `
		SELECT (args->>'batch_id')::bigint FROM river_job WHERE kind = 'flush_batch' AND state = 'running'
		UNION SELECT id FROM batches WHERE state = 'flushing'`)}
	m.mu.Lock()
	m.kills = append(m.kills, k)
	m.mu.Unlock()
	time.Sleep(pause)
	m.startB()
}

// run has the clients make ops operations in all, and kills b once for
// every 6,000 (at least once) along the way.
func (m *model) run(ops int) {
	var done atomic.Int64
	kills := max(1, ops/6000)
	var wg sync.WaitGroup
	killer := rand.New(rand.NewPCG(m.seed, 2000))
	wg.Go(func() {
		for k := range kills {
			at := int64(float64(ops) * (float64(k) + 0.35) / float64(kills))
			for done.Load() < at {
				time.Sleep(10 * time.Millisecond)
			}
			m.killB(time.Duration(200+killer.IntN(1300)) * time.Millisecond)
		}
	})
	for w := range modelWorkers {
		rng := rand.New(rand.NewPCG(m.seed, uint64(w)))
		n := ops / modelWorkers
		if w < ops%modelWorkers {
			n++
		}
		wg.Go(func() {
			for i := range n {
				m.operate(rng, w, i)
				done.Add(1)
				time.Sleep(time.Duration(rng.IntN(40)) * time.Millisecond)
			}
		})
	}
	wg.Wait()
}

// operate makes one random operation.
func (m *model) operate(rng *rand.Rand, w, i int) {
	switch x := rng.IntN(100); {
	case x < 58:
		m.postNew(rng, w, i)
	case x < 63:
		m.replay(rng)
	case x < 69:
		m.retract(rng)
	case x < 76:
		m.read(rng)
	case x < 81:
		if id := m.pickRecipient(rng); id != "" {
			m.putPreferences(rng, id, m.fullPreferences(rng), "full")
		}
	case x < 84:
		if id := m.pickRecipient(rng); id != "" {
			m.putPreferences(rng, id, m.partialPreferences(rng), "partial")
		}
	case x < 88:
		m.unsubscribe(rng)
	case x < 93:
		m.batchAction(rng, "flush")
	case x < 96:
		m.batchAction(rng, "cancel")
	case x < 97:
		// A permanent refusal of whatever email comes next: that batch
		// fails, visibly.
		m.smtp.FailNext(550, "5.1.1 mailbox unavailable", 1)
		m.count("smtp refusals")
	default:
		m.postUnknown(rng, w, i)
	}
}

func (m *model) pickRecipient(rng *rand.Rand) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.rids) == 0 {
		return ""
	}
	return m.rids[rng.IntN(len(m.rids))]
}

// answer is an HTTP answer: its status (0: none came) and body.
type answer struct {
	status int
	body   []byte
}

// call sends a request to a or b at random; one that b never answers
// (it was killed) is sent again to a, as a client retries after an
// error. It reports whether it was retried.
func (m *model) call(rng *rand.Rand, method, path, ctype string, body []byte) (answer, bool) {
	return m.callOn(rng.IntN(10) < 4, method, path, ctype, body)
}

// callOn is call, sent to b (when it runs) if toB.
func (m *model) callOn(toB bool, method, path, ctype string, body []byte) (answer, bool) {
	p := m.a
	if b := m.b.Load(); b != nil && toB {
		p = b
	}
	a, err := m.send(p.base, method, path, ctype, body)
	if err == nil {
		return a, false
	}
	if p == m.a {
		m.problem("%s %s: no answer from the process that is never killed: %v", method, path, err)
		return a, false
	}
	a, err = m.send(m.a.base, method, path, ctype, body)
	if err != nil {
		m.problem("%s %s: no answer after a retry: %v", method, path, err)
	}
	return a, true
}

func (m *model) send(base, method, path, ctype string, body []byte) (answer, error) {
	req, _ := http.NewRequest(method, base+path, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+faultAPIKey)
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := m.client.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return answer{}, err
	}
	return answer{resp.StatusCode, b}, nil
}

// postNew posts a new event: a type, one to three recipients (bare ids,
// objects, now and then a new recipient or one named twice), a shared,
// new or no batch key, and a key most of the time.
func (m *model) postNew(rng *rand.Rand, w, i int) {
	ev := &eventRec{tok: fmt.Sprintf("tok-%d-%d", w, i)}
	ev.typ = modelTypeKeys[[]int{0, 0, 1, 1, 1, 1, 2, 2, 3, 4}[rng.IntN(10)]]
	switch x := rng.IntN(10); {
	case x < 6:
		ev.batchKey = fmt.Sprintf("doc:%d", rng.IntN(3)/2)
	case x < 8:
		ev.batchKey = "new:" + ev.tok
	}
	if rng.IntN(10) < 8 {
		ev.key = "key-" + ev.tok
	}
	var refs []any
	seen := map[string]bool{}
	for range 1 + rng.IntN(3) {
		id := m.pickRecipient(rng)
		if rng.IntN(25) == 0 {
			id = fmt.Sprintf("f-%d-%d", w, i)
		}
		switch {
		case strings.HasPrefix(id, "f-"):
			refs = append(refs, map[string]string{"id": id, "email": id + "@example.com"})
		case rng.IntN(2) == 0:
			refs = append(refs, id)
		default:
			refs = append(refs, map[string]string{"id": id, "email": id + "@example.com", "name": "R " + id})
		}
		if !seen[id] {
			seen[id] = true
			ev.rcpts = append(ev.rcpts, id)
		}
	}
	sort.Strings(ev.rcpts)
	ev.body, _ = json.Marshal(map[string]any{
		"type": ev.typ, "key": ev.key, "batch_key": ev.batchKey, "recipients": refs,
		"actor": map[string]string{"id": "app", "name": "App"}, "data": map[string]string{"tok": ev.tok},
	})
	m.mu.Lock()
	m.events[ev.tok] = ev
	m.mu.Unlock()
	m.post(rng, ev)
}

// postUnknown posts an event naming a recipient that does not exist by
// a bare id: lull must refuse it, naming the recipient, and store
// nothing.
func (m *model) postUnknown(rng *rand.Rand, w, i int) {
	tok := fmt.Sprintf("tok-%d-%d", w, i)
	body := fmt.Sprintf(`{"type":"alert","key":"key-%s","recipients":["r00","nobody-%s"],"data":{"tok":%q}}`, tok, tok, tok)
	a, _ := m.call(rng, "POST", "/api/v1/events", "application/json", []byte(body))
	m.count("posts naming an unknown recipient")
	if a.status != http.StatusUnprocessableEntity || !bytes.Contains(a.body, []byte("recipients[1]")) {
		m.problem("an event naming an unknown recipient: %d %s, want 422 naming recipients[1]", a.status, a.body)
	}
	m.mu.Lock()
	m.events[tok] = &eventRec{tok: tok, typ: "alert", rcpts: nil}
	m.mu.Unlock()
}

// replay posts an acknowledged event again with its key: the answer must
// be the first one, and nothing new may be stored.
func (m *model) replay(rng *rand.Rand) {
	m.mu.Lock()
	if len(m.keyed) == 0 {
		m.mu.Unlock()
		return
	}
	ev := m.keyed[rng.IntN(len(m.keyed))]
	m.mu.Unlock()
	m.count("replayed keys")
	m.post(rng, ev)
}

func (m *model) post(rng *rand.Rand, ev *eventRec) {
	r := &postRec{ev: ev, start: time.Now()}
	// An event without a key goes to the process never killed: one sent
	// to a process killed after it committed, and sent again, is stored
	// twice, as docs/reliability.md says a retry without a key may be.
	// The model holds lull to exactly once, which only a key promises.
	a, retried := m.callOn(ev.key != "" && rng.IntN(10) < 4, "POST", "/api/v1/events", "application/json", ev.body)
	r.end = time.Now()
	m.count("posts")
	if retried {
		m.count("keyed posts sent again after a kill")
	}
	if a.status != http.StatusAccepted {
		m.problem("event %s: answered %d %s", ev.tok, a.status, a.body)
	} else if err := json.Unmarshal(a.body, &r.answer); err != nil {
		m.problem("event %s: answer %s: %v", ev.tok, a.body, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.posts = append(m.posts, r)
	if ev.start.IsZero() {
		ev.start = r.start
	}
	if a.status != http.StatusAccepted {
		return
	}
	for _, id := range ev.rcpts {
		m.addRecipient(id)
	}
	for _, b := range r.answer.Batches {
		m.batchIDs = append(m.batchIDs, b.ID)
	}
	switch {
	case ev.first == nil:
		ev.first, ev.acked = &r.answer, r.end
		if ev.key != "" {
			m.keyed = append(m.keyed, ev)
		}
	case !sameAnswer(ev.first, &r.answer):
		m.addProblem("event %s: a replay of key %s answered %+v, the first answer was %+v", ev.tok, ev.key, r.answer, *ev.first)
	}
}

func sameAnswer(a, b *ingestAnswer) bool {
	if a.ID != b.ID || a.Notifications != b.Notifications || a.Suppressed != b.Suppressed || len(a.Batches) != len(b.Batches) {
		return false
	}
	for i := range a.Batches {
		x, y := a.Batches[i], b.Batches[i]
		if x.ID != y.ID || x.Recipient != y.Recipient || x.BatchKey != y.BatchKey || !x.ClosesAt.Equal(y.ClosesAt) {
			return false
		}
	}
	return true
}

// retract retracts an acknowledged event by its id.
func (m *model) retract(rng *rand.Rand) {
	m.mu.Lock()
	var evs []*eventRec
	for _, p := range m.posts[max(0, len(m.posts)-200):] {
		if p.ev.first != nil {
			evs = append(evs, p.ev)
		}
	}
	m.mu.Unlock()
	if len(evs) == 0 {
		return
	}
	ev := evs[rng.IntN(len(evs))]
	r := &retractRec{ev: ev}
	a, retried := m.call(rng, "DELETE", fmt.Sprintf("/api/v1/events/%d", ev.first.ID), "", nil)
	r.end, r.uncertain = time.Now(), retried
	m.count("retractions")
	var ans struct {
		Removed  int     `json:"removed"`
		Canceled []int64 `json:"canceled_batches"`
	}
	if a.status != http.StatusOK || json.Unmarshal(a.body, &ans) != nil {
		m.problem("retracting event %s (id %d): answered %d %s", ev.tok, ev.first.ID, a.status, a.body)
		return
	}
	r.removed, r.canceled = ans.Removed, ans.Canceled
	m.mu.Lock()
	m.retracts = append(m.retracts, r)
	m.mu.Unlock()
}

// read marks a recipient's notifications read: some ids from its feed,
// everything before a moment a little in the past, or all.
func (m *model) read(rng *rand.Rand) {
	rid := m.pickRecipient(rng)
	if rid == "" {
		return
	}
	r := &readRec{rid: rid}
	var body []byte
	switch rng.IntN(3) {
	case 0:
		a, _ := m.call(rng, "GET", "/api/v1/recipients/"+rid+"/feed?unread=true&limit=10", "", nil)
		var feed struct {
			Groups []struct {
				Notifications []struct {
					ID int64 `json:"id"`
				} `json:"notifications"`
			} `json:"groups"`
		}
		if a.status != http.StatusOK || json.Unmarshal(a.body, &feed) != nil {
			m.problem("feed of %s: answered %d %s", rid, a.status, a.body)
			return
		}
		for _, g := range feed.Groups {
			for _, n := range g.Notifications {
				if rng.IntN(2) == 0 {
					r.ids = append(r.ids, n.ID)
				}
			}
		}
		if len(r.ids) == 0 {
			return
		}
		body, _ = json.Marshal(map[string]any{"ids": r.ids})
	case 1:
		r.before = time.Now().Add(-time.Duration(rng.IntN(3000)) * time.Millisecond)
		body, _ = json.Marshal(map[string]any{"before": r.before})
	default:
		body = []byte(`{"all":true}`)
	}
	r.start = time.Now()
	if len(r.ids) == 0 && r.before.IsZero() {
		// "all" reads what occurred before lull's now plus a second.
		r.before = r.start
	}
	a, _ := m.call(rng, "POST", "/api/v1/recipients/"+rid+"/feed/read", "application/json", body)
	r.end = time.Now()
	m.count("reads")
	if a.status != http.StatusOK {
		m.problem("marking read for %s: answered %d %s", rid, a.status, a.body)
		return
	}
	m.mu.Lock()
	m.reads = append(m.reads, r)
	m.mu.Unlock()
}

// fullPreferences is a whole preferences body: a mode for some types,
// subscribed or not, a zone and the run's digest time in it.
func (m *model) fullPreferences(rng *rand.Rand) map[string]any {
	zone := modelZones[rng.IntN(len(modelZones))]
	types := map[string]any{}
	for _, k := range modelTypeKeys {
		switch rng.IntN(8) {
		case 0:
			types[k] = map[string]string{"mode": "never"}
		case 1:
			types[k] = map[string]string{"mode": "immediate"}
		case 2:
			types[k] = map[string]string{"mode": "cooldown", "window": "1s", "max_wait": "2s"}
		case 3:
			types[k] = map[string]string{"mode": "daily"}
		}
	}
	return map[string]any{"timezone": zone, "unsubscribed": rng.IntN(5) == 0, "types": types,
		"digest": map[string]string{"daily_at": m.digestAt(zone), "weekly_on": "monday", "weekly_at": "08:00"}}
}

// partialPreferences names one part of the preferences only: whatever
// the others were must stay as they are.
func (m *model) partialPreferences(rng *rand.Rand) map[string]any {
	zone := modelZones[rng.IntN(len(modelZones))]
	switch rng.IntN(3) {
	case 0:
		return map[string]any{"timezone": zone}
	case 1:
		return map[string]any{"digest": map[string]string{"daily_at": m.digestAt("UTC")}}
	}
	k := modelTypeKeys[rng.IntN(len(modelTypeKeys))]
	return map[string]any{"types": map[string]any{k: map[string]string{"mode": []string{"never", "immediate", "daily"}[rng.IntN(3)]}}}
}

// digestAt is the run's digest time in zone.
func (m *model) digestAt(zone string) string {
	loc, _ := time.LoadLocation(zone)
	return m.digest.In(loc).Format("15:04")
}

// putPreferences sends body and takes the preferences lull answers with
// as the recipient's new version. A body that leaves out "unsubscribed"
// or a type must not change it.
func (m *model) putPreferences(rng *rand.Rand, rid string, body map[string]any, kind string) {
	m.mu.Lock()
	rm := m.recipients[rid]
	m.mu.Unlock()
	rm.mu.Lock()
	defer rm.mu.Unlock()
	raw, _ := json.Marshal(body)
	start := time.Now()
	a, _ := m.call(rng, "PUT", "/api/v1/recipients/"+rid+"/preferences", "application/json", raw)
	end := time.Now()
	m.count("preference changes (" + kind + ")")
	var got struct {
		Unsubscribed bool `json:"unsubscribed"`
		Types        map[string]struct {
			Mode string `json:"mode"`
		} `json:"types"`
	}
	if a.status != http.StatusOK || json.Unmarshal(a.body, &got) != nil {
		m.problem("preferences of %s (%s): answered %d %s", rid, raw, a.status, a.body)
		return
	}
	v := &prefVersion{from: start, unsub: got.Unsubscribed, modes: map[string]string{}, by: kind + " " + string(raw)}
	for k, tp := range got.Types {
		v.modes[k] = tp.Mode
	}
	prev := rm.versions[len(rm.versions)-1]
	var changed []string
	if _, ok := body["unsubscribed"]; !ok && prev.unsub && !v.unsub {
		changed = append(changed, "re-subscribed")
	}
	if _, ok := body["types"]; !ok {
		for _, k := range modelTypeKeys {
			if v.modes[k] != prev.modes[k] {
				changed = append(changed, fmt.Sprintf("%s %q -> %q", k, prev.modes[k], v.modes[k]))
			}
		}
	}
	if len(changed) > 0 {
		m.problem("issue 17 defect 1: the partial preferences update %s of %s changed what it left out: %s", raw, rid, strings.Join(changed, ", "))
	}
	m.addVersion(rm, v, end)
}

func (m *model) addVersion(rm *recipientModel, v *prefVersion, end time.Time) {
	m.mu.Lock()
	rm.versions[len(rm.versions)-1].until = end
	rm.versions = append(rm.versions, v)
	m.mu.Unlock()
}

// unsubscribe posts the RFC 8058 one-click unsubscribe of a recipient's
// emails.
func (m *model) unsubscribe(rng *rand.Rand) {
	rid := m.pickRecipient(rng)
	if rid == "" {
		return
	}
	m.mu.Lock()
	rm := m.recipients[rid]
	m.mu.Unlock()
	rm.mu.Lock()
	defer rm.mu.Unlock()
	link, _ := url.Parse(m.links.UnsubscribeURL(rid, nil, time.Now()))
	start := time.Now()
	a, _ := m.call(rng, "POST", "/unsubscribe?"+link.RawQuery, "application/x-www-form-urlencoded", []byte("List-Unsubscribe=One-Click"))
	end := time.Now()
	m.count("unsubscribes")
	if a.status != http.StatusOK {
		m.problem("one-click unsubscribe of %s: answered %d %s", rid, a.status, a.body)
		return
	}
	prev := rm.versions[len(rm.versions)-1]
	m.addVersion(rm, &prefVersion{from: start, unsub: true, modes: prev.modes, by: "one-click unsubscribe"}, end)
}

// batchAction flushes or cancels a batch from a recent answer, as an
// operator does; a batch no longer open is refused with 409.
func (m *model) batchAction(rng *rand.Rand, kind string) {
	m.mu.Lock()
	if len(m.batchIDs) == 0 {
		m.mu.Unlock()
		return
	}
	id := m.batchIDs[max(0, len(m.batchIDs)-1-rng.IntN(100))]
	m.mu.Unlock()
	r := &actionRec{kind: kind, batch: id}
	a, retried := m.call(rng, "POST", fmt.Sprintf("/api/v1/batches/%d/%s", id, kind), "", nil)
	r.end, r.status, r.uncertain = time.Now(), a.status, retried
	m.count(map[string]string{"flush": "flushes", "cancel": "cancels"}[kind])
	if a.status != http.StatusAccepted && a.status != http.StatusConflict {
		m.problem("%s of batch %d: answered %d %s", kind, id, a.status, a.body)
	}
	m.mu.Lock()
	m.actions = append(m.actions, r)
	m.mu.Unlock()
}

// settle lets every batch go out. Batches due within a few seconds close
// on their own; those due later (digests, the burst guard's minute,
// preferences that moved a batch to a digest) are flushed as an operator
// would, which stands in for the clock reaching them. Then it waits for
// every flush to finish, including those a killed process left behind.
func (m *model) settle() {
	t := m.t
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		later := int64Set(t, m.dbURL, `SELECT id FROM batches WHERE state = 'open' AND closes_at > now() + interval '3 seconds'`)
		for id := range later {
			a, err := m.send(m.a.base, "POST", fmt.Sprintf("/api/v1/batches/%d/flush", id), "", nil)
			if err != nil || (a.status != http.StatusAccepted && a.status != http.StatusConflict) {
				t.Fatalf("settling: flush of batch %d: %v %d %s", id, err, a.status, a.body)
			}
			m.count("flushes to settle")
		}
		if queryInt(t, m.dbURL, "SELECT count(*) FROM batches WHERE state IN ('open', 'flushing')") == 0 {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Fatalf("batches still open or flushing 3 minutes after the run (seed %d)", m.seed)
}

// modelSummary lists counts by kind, sorted.
func modelSummary(counts map[string]int) string {
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, counts[k]))
	}
	return strings.Join(parts, ", ")
}
