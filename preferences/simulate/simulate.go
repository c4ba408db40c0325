// Package simulate replays notification events under proposed delivery
// policies and reports the emails that would result, without sending or
// storing anything.
//
// It answers "what if comments used a 10-minute cool-down?" with the same
// rules the engine uses: every decision — the effective mode, the batch
// key, the burst guard and the leading item, the close time with max items,
// digest times and quiet hours across time zones and daylight saving — is
// a call into package preferences. What this package adds is only the
// bookkeeping the engine keeps in its batches table (which batch is open
// for a recipient and key, when a key last saw a notification, how many
// immediate emails went out in the last minute), held in memory, and the
// clock: a batch flushes at its close time, before any event at or after
// that instant, as the flush jobs do.
//
// Input is a Settings (types and recipients as stored) and a time-ordered
// stream of Events; several policies are replayed side by side in one pass
// over the stream, so a stored range is read once however many proposals
// are compared.
package simulate

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/lull-dev/lull/preferences"
)

// Type is a notification type as stored: the defaults the rules resolve a
// recipient's choice against, and the parameters that belong to the type
// alone.
type Type struct {
	Key  string
	Name string
	// Defaults are the type's mode, window, max wait, lead and required flag.
	Defaults preferences.TypeDefaults
	// MaxItems flushes a cooldown batch early once it holds that many; 0 is
	// no limit.
	MaxItems int
	// DisplayLimit is how many items of the type an email shows.
	DisplayLimit int
	// BurstLimit is the burst guard's limit; 0 turns it off.
	BurstLimit int
	// Budget is the daily email budget of recipients who set none; nil
	// follows Settings.DefaultBudget.
	Budget *int // CatchUpDays slows the type to a weekly digest for a recipient not
	// seen for that many days; 0 is off.
	CatchUpDays int
}

// DefaultType is what a type that is not registered gets, the same values
// a type saved without them gets: immediate, a 5-minute window capped at an
// hour, ten items shown and a burst limit of five.
func DefaultType(key string) Type {
	return Type{Key: key, Name: key, DisplayLimit: 10, BurstLimit: 5,
		Defaults: preferences.TypeDefaults{Mode: preferences.Immediate, Window: 5 * time.Minute, MaxWait: time.Hour}}
}

// Recipient is one recipient's stored settings.
type Recipient struct {
	ID string
	// Active recipients get email; inactive ones are skipped at ingest.
	Active bool
	// HasEmail is false for a recipient without an address: their batches
	// form as usual and are canceled at flush.
	HasEmail     bool
	Unsubscribed bool
	Schedule     preferences.Schedule
	// Overrides are the recipient's own choices by type key.
	Overrides map[string]*preferences.Override
	// Muted are the conversations the recipient muted, by batch key
	// ("comment+doc:7"), each with when its mute ends (the zero time:
	// never). A policy changes modes, not mutes: every one honours them.
	Muted map[string]time.Time
	// Budget is the recipient's own daily email budget; nil follows the
	// type's and the installation's (preferences.DailyBudget).
	Budget *int // SeenAt is the recipient's last visit as stored now; zero: never.
	// A replay of events before it cannot know older visits and takes
	// the recipient as present.
	SeenAt time.Time
}

// mutes reports whether the recipient muted the conversation thread at
// the instant at, as the engine's ingest decides.
func (rc *Recipient) mutes(thread string, at int64) bool {
	until, ok := rc.Muted[thread]
	return ok && (until.IsZero() || until.UnixNano() > at)
}

// DefaultRecipient is a recipient lull knows nothing about yet: active,
// with an address, in UTC, digests at 08:00 and on Mondays.
func DefaultRecipient(id string) *Recipient {
	return &Recipient{ID: id, Active: true, HasEmail: true,
		Schedule: preferences.Schedule{Location: time.UTC, DailyAt: 8 * 60, WeeklyOn: time.Monday, WeeklyAt: 8 * 60}}
}

// Settings are the stored types and recipients a replay starts from.
// Events may name types and recipients it lacks; they are replayed with
// DefaultType and DefaultRecipient, and the report says how many.
type Settings struct {
	Types      map[string]Type
	Recipients map[string]*Recipient
	// DefaultBudget is the installation's daily email budget
	// (LULL_DAILY_EMAIL_BUDGET); 0 is no limit.
	DefaultBudget int
}

// Event is one event to replay: at At (the time lull accepted it, which is
// the time the engine batches by), of type Type with the host
// application's optional batch key, for Recipients.
type Event struct {
	At         time.Time
	Type       string
	BatchKey   string
	Recipients []string
}

// Batch is one batch a replay formed, reported to an OnBatch hook when it
// closes; the agreement tests compare these with the engine's batches.
type Batch struct {
	Recipient string
	Key       string
	Mode      preferences.Mode
	OpenedAt  time.Time
	ClosesAt  time.Time
	Items     int
	// Sent is false when the batch would be canceled at flush (the
	// recipient has no email address, or the daily email budget folded
	// every item into the held digest).
	Sent bool
}

// ErrOutOfOrder is returned for an event earlier than the one before it:
// batching depends on order, so a replay needs its events sorted.
var ErrOutOfOrder = errors.New("events must be in time order")

// Replay runs policies over one stream of events. Add interns what an
// event names and hands events in blocks to one goroutine per policy, so
// policies compared side by side replay in parallel; Report waits for
// them.
type Replay struct {
	settings *Settings
	runs     []*run
	wg       sync.WaitGroup

	types   []Type
	typeIdx map[string]int32
	recs    []*Recipient
	recIdx  map[string]int32
	// keys interns batch keys, so the state of a run is keyed by two
	// integers rather than by strings built for every notification.
	keys     []string
	keyIdx   map[string]int32
	keyCache map[eventKeys][len(modeOrder)]int32
	// seen[r] lists the types recipient r had an event of: the population
	// that emails-per-recipient figures are taken over, the same for every
	// policy.
	seen [][]int32
	// dedup[r] is the number of the last event that named r, to drop a
	// recipient named twice in one event as ingest does.
	dedup []int
	// horizon bounds how long the time of a key's last notification can
	// matter: the longest cooldown window any policy may resolve to.
	// Slots idle for longer are forgotten, which keeps memory flat over
	// long ranges without changing any outcome.
	horizon int64
	block   *block

	events, pairs int
	first, last   time.Time
	unknownRecs   int
	unknownTypes  []string
	actual        *tally
	onBatch       func(policy int, b Batch)
	started       bool
	finished      bool
}

// block is a run of events as the policies' goroutines receive them; it is
// not written once sent.
type block struct {
	events []blockEvent
	// recs and rcs are the events' recipients: index and settings.
	recs []int32
	rcs  []*Recipient
	// types and keys are the interned types and batch keys as of sending.
	types []Type
	keys  []string
}

// blockEvent is an event with everything interned: its batch key under
// each mode (indexed like modeOrder) and its recipients, recs[from:to].
type blockEvent struct {
	at       int64 // Unix nanoseconds
	typ      int32
	keys     [len(modeOrder)]int32
	from, to int32
}

// blockSize is how many events go to the policies at once: large enough
// that handing over costs nothing, small enough to keep blocks in cache.
const blockSize = 2048

// modeOrder indexes blockEvent.keys.
var modeOrder = [...]preferences.Mode{preferences.Never, preferences.Immediate, preferences.Cooldown, preferences.Daily, preferences.Weekly,
	preferences.Hourly, preferences.Monthly}

func modeIndex(m preferences.Mode) int {
	for i, o := range modeOrder {
		if o == m {
			return i
		}
	}
	return 1 // CloseTime and BatchKey read an unknown mode as Immediate
}

// New prepares a replay of policies over settings. Nothing is read or
// written; events come through Add.
func New(settings *Settings, policies []Policy) *Replay {
	if settings == nil {
		settings = &Settings{}
	}
	r := &Replay{settings: settings, typeIdx: map[string]int32{}, recIdx: map[string]int32{}, keyIdx: map[string]int32{}, keyCache: map[eventKeys][len(modeOrder)]int32{}}
	r.horizon = int64(longestWindow(settings, policies))
	for _, p := range policies {
		r.runs = append(r.runs, newRun(r, p))
	}
	r.block = &block{}
	return r
}

// longestWindow is the longest cooldown window that Effective can resolve
// to under settings and policies (at least the five-minute default).
func longestWindow(s *Settings, policies []Policy) time.Duration {
	w := 5 * time.Minute
	for _, t := range s.Types {
		w = max(w, t.Defaults.Window)
	}
	for _, rc := range s.Recipients {
		for _, o := range rc.Overrides {
			if o != nil && o.Window != nil {
				w = max(w, *o.Window)
			}
		}
	}
	for _, p := range policies {
		for _, c := range p.Types {
			if c.Window != nil {
				w = max(w, *c.Window)
			}
		}
		if p.Everyone != nil && p.Everyone.Window != nil {
			w = max(w, *p.Everyone.Window)
		}
	}
	return max(w, preferences.BurstPolicy.Window)
}

// OnBatch registers fn to be called with every batch as it closes, with
// the index of the policy that formed it. Calls for one policy come in
// order from one goroutine; calls for different policies may run at the
// same time. Register it before the first Add.
func (r *Replay) OnBatch(fn func(policy int, b Batch)) { r.onBatch = fn }

// Add replays one event under every policy. Events must come in time
// order; batches due at or before ev.At close first.
func (r *Replay) Add(ev Event) error {
	if r.finished {
		return errors.New("replay already reported")
	}
	if r.events > 0 && ev.At.Before(r.last) {
		return fmt.Errorf("event at %s after one at %s: %w", ev.At.Format(time.RFC3339Nano), r.last.Format(time.RFC3339Nano), ErrOutOfOrder)
	}
	if !r.started {
		r.start()
	}
	if r.events == 0 {
		r.first = ev.At
	}
	r.last = ev.At
	r.events++
	b := r.block
	be := blockEvent{at: ev.At.UnixNano(), typ: r.typeIndex(ev.Type), from: int32(len(b.recs))}
	be.keys = r.batchKeys(be.typ, ev.Type, ev.BatchKey)
	for _, id := range ev.Recipients {
		ri := r.recipientIndex(id)
		if r.dedup[ri] == r.events {
			continue
		}
		r.dedup[ri] = r.events
		b.recs = append(b.recs, ri)
		b.rcs = append(b.rcs, r.recs[ri])
		r.markSeen(ri, be.typ)
	}
	be.to = int32(len(b.recs))
	r.pairs += int(be.to - be.from)
	b.events = append(b.events, be)
	if len(b.events) == blockSize {
		r.send()
	}
	return nil
}

// start launches one goroutine per policy.
func (r *Replay) start() {
	r.started = true
	for _, rn := range r.runs {
		rn.onBatch = r.onBatch
		rn.in = make(chan *block, 4)
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			for b := range rn.in {
				rn.replay(b)
			}
			rn.finish()
		}()
	}
}

// send hands the current block to every policy.
func (r *Replay) send() {
	b := r.block
	if len(b.events) == 0 {
		return
	}
	b.types, b.keys = r.types, r.keys
	for _, rn := range r.runs {
		rn.in <- b
	}
	r.block = &block{events: make([]blockEvent, 0, blockSize)}
}

// wait sends what is left and waits until every policy has replayed it
// and closed its batches.
func (r *Replay) wait() {
	if r.finished {
		return
	}
	r.finished = true
	if !r.started {
		r.start()
	}
	r.send()
	for _, rn := range r.runs {
		close(rn.in)
	}
	r.wg.Wait()
}

// batchKeys is the interned preferences.BatchKey under each mode for a type
// and an event's batch key, computed once per pair.
func (r *Replay) batchKeys(typ int32, typeKey, eventKey string) [len(modeOrder)]int32 {
	ck := eventKeys{typ, eventKey}
	if ks, ok := r.keyCache[ck]; ok {
		return ks
	}
	var ks [len(modeOrder)]int32
	for i, m := range modeOrder {
		ks[i] = r.internKey(preferences.BatchKey(m, typeKey, eventKey))
	}
	r.keyCache[ck] = ks
	return ks
}

type eventKeys struct {
	typ      int32
	eventKey string
}

func (r *Replay) internKey(key string) int32 {
	id, ok := r.keyIdx[key]
	if !ok {
		id = int32(len(r.keys))
		r.keys = append(r.keys, key)
		r.keyIdx[key] = id
	}
	return id
}

// typeIndex interns a type key.
func (r *Replay) typeIndex(key string) int32 {
	if i, ok := r.typeIdx[key]; ok {
		return i
	}
	t, ok := r.settings.Types[key]
	if !ok {
		t = DefaultType(key)
		r.unknownTypes = append(r.unknownTypes, key)
	}
	t.Key = key
	i := int32(len(r.types))
	r.types = append(r.types, t)
	r.typeIdx[key] = i
	return i
}

// recipientIndex interns a recipient id.
func (r *Replay) recipientIndex(id string) int32 {
	if i, ok := r.recIdx[id]; ok {
		return i
	}
	rc, ok := r.settings.Recipients[id]
	if !ok || rc == nil {
		rc = DefaultRecipient(id)
		r.unknownRecs++
	}
	i := int32(len(r.recs))
	r.recs = append(r.recs, rc)
	r.recIdx[id] = i
	r.seen = append(r.seen, nil)
	r.dedup = append(r.dedup, 0)
	return i
}

func (r *Replay) markSeen(rec, typ int32) {
	for _, t := range r.seen[rec] {
		if t == typ {
			return
		}
	}
	r.seen[rec] = append(r.seen[rec], typ)
}

// run is one policy's replay: the state the engine keeps in its batches
// table, in memory, owned by the policy's goroutine. Times are Unix
// nanoseconds; the rules get time.Time.
type run struct {
	index    int
	policy   Policy
	in       chan *block
	horizon  int64
	onBatch  func(policy int, b Batch)
	types    []runType
	everyone *preferences.Override
	// recs holds each recipient's state, by recipient index; active lists
	// the recipients with any, for the sweep.
	recs    []recState
	active  []int32
	queue   closeQueue
	free    []*batch
	created int // slots made since the last sweep
	// sweepAfter is minSweep; tests lower it to sweep all the time.
	sweepAfter int
	tally      *tally
	// budget is the installation's daily email budget in this policy;
	// typeBudgets says a type has one of its own.
	budget      int
	typeBudgets bool
}

// minSweep is how many slots are made between sweeps at least; with the
// sweep's cost proportional to the recipients holding state, sweeping after
// as many new slots keeps it at a constant cost per notification.
const minSweep = 1 << 16

// recState is what the engine's batches table knows about one recipient.
// A recipient has few keys in use at a time, so short slices searched in
// order beat maps here.
type recState struct {
	// spent counts emails by the recipient's local day (BudgetDay, Unix
	// seconds), and held is their open held digest: the daily email
	// budget's state (budget.go).
	spent []daySpent
	held  *batch
	slots []slot
	// recent holds, per type, the opening times of the immediate batches
	// of the last minute, oldest first.
	recent []recentImmediate
	active bool
}

type recentImmediate struct {
	typ    int32
	opened []int64
}

// runType is a type as one policy has it.
type runType struct {
	key          string
	defaults     preferences.TypeDefaults
	maxItems     int
	displayLimit int
	burstLimit   int
	budget       *int
	catchUpDays  int
	// ignoreChoices replaces recipients' own choices with the type's.
	ignoreChoices bool
}

// slot is what the engine's batches table knows about one recipient and
// batch key (interned): the open batch, if any (batches_one_open), and when
// a notification last joined any batch under the key.
type slot struct {
	key  int32
	open *batch
	last int64
}

// batch is an open batch. Closed batches are reused, so a queue entry
// carries the generation it was made for.
type batch struct {
	policy  preferences.Policy
	rc      *Recipient
	keyName string
	more    []part // the shares of further types, in digests
	first   part   // the first type's share
	opened  int64
	last    int64
	closes  int64
	rec     int32
	key     int32
	slot    int32 // where the slot was last seen in the recipient's slots
	items   int32
	gen     uint32
	inSlot  bool // false for an immediate batch, which nothing joins
	held    bool // the held digest of the daily email budget
	done    bool
	hasPart bool
}

// part is one type's share of a batch: digests mix types.
type part struct {
	typ   int32
	items int32
	first int64
}

func newRun(r *Replay, p Policy) *run {
	rn := &run{index: len(r.runs), policy: p, horizon: r.horizon, sweepAfter: minSweep, tally: newTally(), budget: r.settings.DefaultBudget}
	if p.Budget != nil {
		rn.budget = *p.Budget
	}
	if e := p.Everyone; e != nil {
		rn.everyone = &preferences.Override{Mode: e.Mode, Window: e.Window, MaxWait: e.MaxWait, Lead: e.Lead}
	}
	return rn
}

// addType applies the policy's change, if any, to a newly seen type.
func (rn *run) addType(t Type) {
	rt := runType{key: t.Key, defaults: t.Defaults, maxItems: t.MaxItems, displayLimit: t.DisplayLimit, burstLimit: t.BurstLimit, budget: t.Budget, catchUpDays: t.CatchUpDays}
	rn.typeBudgets = rn.typeBudgets || t.Budget != nil
	if c, ok := rn.policy.Types[t.Key]; ok {
		if c.Mode != "" {
			rt.defaults.Mode = c.Mode
		}
		if c.Window != nil {
			rt.defaults.Window = *c.Window
		}
		if c.MaxWait != nil {
			rt.defaults.MaxWait = *c.MaxWait
		}
		if c.Lead != nil {
			rt.defaults.Lead = *c.Lead
		}
		if c.MaxItems != nil {
			rt.maxItems = *c.MaxItems
		}
		if c.DisplayLimit != nil {
			rt.displayLimit = *c.DisplayLimit
		}
		if c.BurstLimit != nil {
			rt.burstLimit = *c.BurstLimit
		}
		rt.ignoreChoices = c.IgnoreChoices
	}
	rn.types = append(rn.types, rt)
	rn.tally.addType()
}

// replay replays a block of events: for each, close what is due, then
// route each recipient.
func (rn *run) replay(b *block) {
	for i := range b.events {
		ev := &b.events[i]
		for int(ev.typ) >= len(rn.types) {
			rn.addType(b.types[len(rn.types)])
		}
		rn.flushUntil(ev.at)
		if rn.created >= max(rn.sweepAfter, len(rn.active)) {
			rn.sweep(ev.at)
		}
		for j := ev.from; j < ev.to; j++ {
			rn.route(ev, b, b.recs[j], b.rcs[j])
		}
	}
}

func tm(n int64) time.Time { return time.Unix(0, n).UTC() }

// route mirrors the engine's router for one recipient: resolve the policy,
// skip or suppress, apply the rules on recent history, then join the open
// batch under the batch key or open a new one, and settle its close time.
func (rn *run) route(ev *blockEvent, blk *block, ri int32, rc *Recipient) {
	now, typ := ev.at, ev.typ
	t := &rn.types[typ]
	if !rc.Active {
		rn.tally.types[typ].inactive++
		return
	}
	p := preferences.Effective(t.defaults, rn.override(rc, t), rc.Unsubscribed)
	if p.Mode == preferences.Never {
		rn.tally.types[typ].suppressed++
		return
	}
	// The cooldown key is the conversation's: the type and the event's
	// batch key. A required type's cannot be muted.
	if len(rc.Muted) > 0 && !t.defaults.Required && rc.mutes(blk.keys[ev.keys[modeIndex(preferences.Cooldown)]], now) {
		rn.tally.types[typ].suppressed++
		return
	}
	nowT := tm(now)
	for int(ri) >= len(rn.recs) {
		rn.recs = append(rn.recs, recState{})
	}
	st := &rn.recs[ri]
	ck, ci := int32(-1), -1
	if preferences.NeedsHistory(p, t.burstLimit) {
		var h preferences.RouteHistory
		ck = ev.keys[modeIndex(preferences.Cooldown)]
		if ci = st.find(ck); ci >= 0 {
			h.HasOpen = st.slots[ci].open != nil
			if last := st.slots[ci].last; last != 0 {
				h.Last = tm(last)
			}
		}
		if p.Mode == preferences.Immediate {
			h.RecentImmediate = st.recentImmediate(typ, now)
		}
		p = preferences.Route(p, t.burstLimit, h, nowT)
	}
	if !t.defaults.Required && preferences.SlowsDown(p.Mode) && preferences.Absent(rc.SeenAt, nowT, t.catchUpDays) {
		p = preferences.Policy{Mode: preferences.Weekly} // as batching's catchUp
	}
	rn.tally.types[typ].batched++
	sched := rn.schedule(rc)
	key := ev.keys[modeIndex(p.Mode)]
	i := ci
	if key != ck {
		i = st.find(key)
	}
	if i < 0 {
		i = len(st.slots)
		st.slots = append(st.slots, slot{key: key})
		rn.created++
		if !st.active {
			st.active = true
			rn.active = append(rn.active, ri)
		}
	}
	sl := &st.slots[i]
	sl.last = max(sl.last, now)
	if p.Mode != preferences.Immediate && sl.open != nil {
		b := sl.open
		b.items++
		b.last = max(b.last, now)
		b.addPart(typ, now)
		at := preferences.SettleClose(b.policy, sched, tm(b.opened), tm(b.last), nowT, int(b.items), t.maxItems).UnixNano()
		// As with the engine's flush jobs, a close time that slid later
		// needs no new entry: the old one, surfacing early, is put back.
		if at < b.closes {
			rn.queue.push(b, at)
		}
		b.closes = at
		return
	}
	b := rn.newBatch()
	// A batch stores its mode, window and max wait; the lead flag only
	// decided how it was routed.
	b.policy = preferences.Policy{Mode: p.Mode, Window: p.Window, MaxWait: p.MaxWait}
	b.rc, b.keyName = rc, blk.keys[key]
	b.rec, b.key, b.slot, b.opened, b.last, b.items = ri, key, int32(i), now, now, 1
	b.addPart(typ, now)
	b.closes = preferences.SettleClose(b.policy, sched, nowT, nowT, nowT, 1, t.maxItems).UnixNano()
	rn.queue.push(b, b.closes)
	if p.Mode == preferences.Immediate {
		if t.burstLimit > 0 {
			st.noteImmediate(typ, now)
		}
	} else {
		sl.open, b.inSlot = b, true
	}
}

// find returns the index of the slot for key, or -1.
func (st *recState) find(key int32) int {
	for i := range st.slots {
		if st.slots[i].key == key {
			return i
		}
	}
	return -1
}

func (rn *run) newBatch() *batch {
	if n := len(rn.free); n > 0 {
		b := rn.free[n-1]
		rn.free = rn.free[:n-1]
		*b = batch{gen: b.gen + 1, more: b.more[:0]}
		return b
	}
	return &batch{}
}

// override is the recipient's choice for a type as this policy has it:
// "everyone" replaces every choice, a type change may ignore them.
func (rn *run) override(rc *Recipient, t *runType) *preferences.Override {
	switch {
	case rn.everyone != nil:
		return rn.everyone
	case t.ignoreChoices || rc.Overrides == nil:
		return nil
	}
	return rc.Overrides[t.key]
}

// schedule is the recipient's calendar, with the digest times the policy
// sets for everyone.
func (rn *run) schedule(rc *Recipient) preferences.Schedule {
	s := rc.Schedule
	if e := rn.policy.Everyone; e != nil {
		if e.DailyAt != nil {
			s.DailyAt = *e.DailyAt
		}
		if e.WeeklyOn != nil {
			s.WeeklyOn, s.WeeklyDays = *e.WeeklyOn, 0
		}
		if e.WeeklyDays != nil {
			s.WeeklyDays = *e.WeeklyDays
		}
		if e.WeeklyAt != nil {
			s.WeeklyAt = *e.WeeklyAt
		}
		setIf(&s.EveryHours, e.EveryHours)
		setIf(&s.MonthlyDay, e.MonthlyDay)
		setIf(&s.MonthlyAt, e.MonthlyAt)
	}
	return s
}

func setIf[T any](dst *T, v *T) {
	if v != nil {
		*dst = *v
	}
}

// recentImmediate counts the recipient's immediate batches of the type
// opened after now - 1m, as db.RecentImmediate does, forgetting older ones.
func (st *recState) recentImmediate(typ int32, now int64) int {
	since := now - int64(time.Minute)
	for i := range st.recent {
		r := &st.recent[i]
		if r.typ != typ {
			continue
		}
		j := 0
		for j < len(r.opened) && r.opened[j] <= since {
			j++
		}
		r.opened = r.opened[j:]
		return len(r.opened)
	}
	return 0
}

func (st *recState) noteImmediate(typ int32, now int64) {
	for i := range st.recent {
		if st.recent[i].typ == typ {
			st.recent[i].opened = append(st.recent[i].opened, now)
			return
		}
	}
	st.recent = append(st.recent, recentImmediate{typ: typ, opened: []int64{now}})
}

// sweep forgets what can no longer change an outcome: slots with no open
// batch whose last notification is older than the longest window, and
// immediate emails older than a minute. It runs over the recipients that
// have any state, once enough new slots were made.
func (rn *run) sweep(now int64) {
	idle, since := now-rn.horizon, now-int64(time.Minute)
	keep := rn.active[:0]
	for _, ri := range rn.active {
		st := &rn.recs[ri]
		slots := st.slots[:0]
		for _, sl := range st.slots {
			if sl.open != nil || sl.last > idle {
				if sl.open != nil {
					sl.open.slot = int32(len(slots))
				}
				slots = append(slots, sl)
			}
		}
		clear(st.slots[len(slots):])
		st.slots = slots
		recent := st.recent[:0]
		for _, r := range st.recent {
			if len(r.opened) > 0 && r.opened[len(r.opened)-1] > since {
				recent = append(recent, r)
			}
		}
		clear(st.recent[len(recent):])
		st.recent = recent
		st.forgetSpent(now)
		if len(slots) == 0 && len(recent) == 0 && len(st.spent) == 0 && st.held == nil {
			*st = recState{}
			continue
		}
		keep = append(keep, ri)
	}
	rn.active = keep
	rn.created = 0
}

func (b *batch) addPart(typ int32, at int64) {
	if !b.hasPart {
		b.first, b.hasPart = part{typ: typ, items: 1, first: at}, true
		return
	}
	if b.first.typ == typ {
		b.first.items++
		return
	}
	for i := range b.more {
		if b.more[i].typ == typ {
			b.more[i].items++
			return
		}
	}
	b.more = append(b.more, part{typ: typ, items: 1, first: at})
}

// flushUntil closes every batch due at or before now, in close-time order.
func (rn *run) flushUntil(now int64) {
	for {
		b := rn.queue.popDue(now)
		if b == nil {
			return
		}
		rn.close(b)
	}
}

// close flushes one batch: it leaves its slot, and the email is counted
// as sent, or as canceled when the recipient has no address.
func (rn *run) close(b *batch) {
	b.done = true
	if b.inSlot {
		st := &rn.recs[b.rec]
		i := int(b.slot)
		if i >= len(st.slots) || st.slots[i].key != b.key {
			i = st.find(b.key)
		}
		if i >= 0 && st.slots[i].open == b {
			st.slots[i].open = nil
		}
	}
	sends := rn.spendBudget(b) && b.rc.HasEmail
	if b.hasPart {
		rn.tally.email(b.rec, b.closes, b.first, b.more, b.rc.HasEmail)
	}
	if rn.onBatch != nil {
		rn.onBatch(rn.index, Batch{Recipient: b.rc.ID, Key: b.keyName, Mode: b.policy.Mode, OpenedAt: tm(b.opened),
			ClosesAt: tm(b.closes), Items: int(b.items), Sent: sends})
	}
	rn.free = append(rn.free, b)
}

// closeQueue is a min-heap of batches by close time. Like the engine's
// flush jobs, an entry may be early: a batch whose close time slid later
// is put back when its entry surfaces, and one whose close time moved
// earlier gets a second entry; entries of closed batches are dropped.
type closeQueue struct {
	items []queued
	seq   uint64
}

type queued struct {
	at  int64 // Unix nanoseconds
	seq uint64
	b   *batch
	gen uint32
}

func (q *closeQueue) less(i, j int) bool {
	a, b := &q.items[i], &q.items[j]
	return a.at < b.at || (a.at == b.at && a.seq < b.seq)
}

func (q *closeQueue) push(b *batch, at int64) {
	q.seq++
	q.items = append(q.items, queued{at: at, seq: q.seq, b: b, gen: b.gen})
	i := len(q.items) - 1
	for i > 0 {
		parent := (i - 1) / 2
		if !q.less(i, parent) {
			break
		}
		q.items[i], q.items[parent] = q.items[parent], q.items[i]
		i = parent
	}
}

// popDue returns the next batch that closes at or before now, or nil.
func (q *closeQueue) popDue(now int64) *batch {
	for len(q.items) > 0 && q.items[0].at <= now {
		e := q.items[0]
		q.removeTop()
		switch {
		case e.b.gen != e.gen || e.b.done:
		case e.b.closes > e.at:
			q.push(e.b, e.b.closes)
		default:
			return e.b
		}
	}
	return nil
}

func (q *closeQueue) removeTop() {
	n := len(q.items) - 1
	q.items[0] = q.items[n]
	q.items[n] = queued{}
	q.items = q.items[:n]
	i := 0
	for {
		l, r, m := 2*i+1, 2*i+2, i
		if l < n && q.less(l, m) {
			m = l
		}
		if r < n && q.less(r, m) {
			m = r
		}
		if m == i {
			return
		}
		q.items[i], q.items[m] = q.items[m], q.items[i]
		i = m
	}
}

// finish closes every batch still open, at its close time, as the flush
// jobs eventually would.
func (rn *run) finish() { rn.flushUntil(math.MaxInt64) }
