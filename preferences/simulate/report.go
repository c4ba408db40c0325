package simulate

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/lull-dev/lull/preferences"
)

// Report is the outcome of a replay: one Result per policy, and the
// emails actually sent when they were given (AddSent).
type Report struct {
	// Source is where the events came from: SourceStored or SourceUpload.
	Source string `json:"source"`
	// From and To bound a replay of stored events (to exclusive).
	From *time.Time `json:"from,omitempty"`
	To   *time.Time `json:"to,omitempty"`
	// Events and Notifications count what was replayed: events, and event
	// and recipient pairs.
	Events        int `json:"events"`
	Notifications int `json:"notifications"`
	// Recipients is how many recipients the events named.
	Recipients int `json:"recipients"`
	// FirstEvent and LastEvent bound the replayed events; zero when none.
	FirstEvent time.Time `json:"first_event"`
	LastEvent  time.Time `json:"last_event"`
	Results    []Result  `json:"results"`
	// Notes say what the figures could not take into account.
	Notes []string `json:"notes"`
}

// The sources of events a report can be about.
const (
	SourceStored = "stored"
	SourceUpload = "upload"
)

// Result is what one policy would do, or what was actually done.
type Result struct {
	Name string `json:"name"`
	// Kind is "actual" for the emails lull sent, "policy" for a replay.
	Kind string `json:"kind"`
	// Description says what the policy changes.
	Description string        `json:"description"`
	Overall     Metrics       `json:"overall"`
	Types       []TypeMetrics `json:"types"`
}

// The kinds of Result.
const (
	KindActual = "actual"
	KindPolicy = "policy"
)

// TypeMetrics are the figures of one type. A digest that carries several
// types counts as an email for each of them.
type TypeMetrics struct {
	Type string `json:"type"`
	Name string `json:"name"`
	Metrics
}

// Metrics are the figures of a result, overall or for one type.
type Metrics struct {
	// Emails would be sent (or were).
	Emails int `json:"emails"`
	// Notifications went into batches; Suppressed were dropped by a
	// preference (never, unsubscribed); Inactive went to inactive
	// recipients. Unknown for actual results.
	Notifications int `json:"notifications"`
	Suppressed    int `json:"suppressed"`
	Inactive      int `json:"inactive"`
	// Unsent batches would be canceled at flush: no email address.
	Unsent int `json:"unsent"`
	// Held notifications were over a recipient's daily email budget and
	// went out later, in the held digest of the next day's digest time.
	Held int `json:"held"`
	// Recipients is the population EmailsPerRecipient is taken over: every
	// recipient the events named, whether they got email or not.
	Recipients         int    `json:"recipients"`
	EmailsPerRecipient Spread `json:"emails_per_recipient"`
	// WorstHour is the busiest clock hour (UTC) of the recipient who got
	// the most emails; nil when nobody got any.
	WorstHour *WorstHour `json:"worst_hour"`
	// Delay is the time from a batch's first notification to its email.
	Delay Delay `json:"delay"`
	// HiddenItems are items beyond the display limit: counted in the
	// email's "and N more", not shown.
	HiddenItems int `json:"hidden_items"`
}

// Spread is a distribution of counts: median, 90th percentile, maximum.
type Spread struct {
	Median int `json:"median"`
	P90    int `json:"p90"`
	Max    int `json:"max"`
}

// WorstHour is the hour in which one recipient got the most emails.
type WorstHour struct {
	Recipient string    `json:"recipient"`
	Start     time.Time `json:"start"`
	Emails    int       `json:"emails"`
	// Total is how many emails the recipient got in the whole range.
	Total int `json:"total"`
}

// Delay is a distribution of durations: median and 90th percentile.
type Delay struct {
	Median time.Duration
	P90    time.Duration
}

// MarshalJSON writes the durations both as lull's short form and in
// seconds, for people and for programs.
func (d Delay) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Median        string  `json:"median"`
		P90           string  `json:"p90"`
		MedianSeconds float64 `json:"median_seconds"`
		P90Seconds    float64 `json:"p90_seconds"`
	}{preferences.FormatDuration(d.Median.Round(time.Second)), preferences.FormatDuration(d.P90.Round(time.Second)),
		d.Median.Seconds(), d.P90.Seconds()})
}

// SentEmail is one email lull actually sent, for the "actual" result.
type SentEmail struct {
	Recipient string
	SentAt    time.Time
	Parts     []SentPart
}

// SentPart is one type's share of a sent email.
type SentPart struct {
	Type  string
	Items int
	// First is when the type's first notification in the email arrived.
	First time.Time
}

// ExpectSent makes the report lead with an "actual" result even if no
// email was sent: for stored events, none sent is an answer too.
func (r *Replay) ExpectSent() {
	if r.actual == nil {
		r.actual = newTally()
	}
}

// AddSent records an email that was actually sent. Once one is added, the
// report leads with an "actual" result.
func (r *Replay) AddSent(e SentEmail) {
	if r.actual == nil {
		r.actual = newTally()
	}
	if len(e.Parts) == 0 {
		return
	}
	ri := r.recipientIndex(e.Recipient)
	parts := make([]part, 0, len(e.Parts))
	for _, p := range e.Parts {
		ti := r.typeIndex(p.Type)
		for len(r.actual.types) <= int(ti) {
			r.actual.addType()
		}
		parts = append(parts, part{typ: ti, items: int32(p.Items), first: p.First.UnixNano()})
	}
	r.actual.email(ri, e.SentAt.UnixNano(), parts[0], parts[1:], true)
}

// tally collects what one result needs to compute its metrics. Emails are
// kept compactly, one record each with its first type's share inline, in
// chunks that never move once written, so a week of a million events fits
// in memory with room to spare and growing costs no copying.
type tally struct {
	emails [][]emailRecord
	// extra holds the shares of further types of digests.
	extra []partRecord
	types []typeCounts
}

// emailChunk is how many email records one chunk holds.
const emailChunk = 1 << 14

type emailRecord struct {
	at    int64 // Unix nanoseconds
	first partRecord
	rec   int32
	extra int32 // index of the further shares in tally.extra
	n     int32 // how many further shares
}

// partRecord is a part as kept: first is in Unix nanoseconds.
type partRecord part

type typeCounts struct {
	batched, suppressed, inactive, unsent, held int
	// emails carrying the type
	emails int
}

func newTally() *tally { return &tally{} }

func (t *tally) addType() { t.types = append(t.types, typeCounts{}) }

// email records a closed batch, its first type's share and the others:
// an email when sent, else a cancellation.
func (t *tally) email(rec int32, at int64, first part, more []part, sent bool) {
	if !sent {
		t.types[first.typ].unsent++
		for _, p := range more {
			t.types[p.typ].unsent++
		}
		return
	}
	if n := len(t.emails); n == 0 || len(t.emails[n-1]) == emailChunk {
		t.emails = append(t.emails, make([]emailRecord, 0, emailChunk))
	}
	e := emailRecord{rec: rec, at: at, first: partRecord(first), extra: int32(len(t.extra)), n: int32(len(more))}
	t.types[first.typ].emails++
	for _, p := range more {
		t.extra = append(t.extra, partRecord(p))
		t.types[p.typ].emails++
	}
	c := &t.emails[len(t.emails)-1]
	*c = append(*c, e)
}

// count is the number of emails recorded.
func (t *tally) count() int {
	n := 0
	for _, c := range t.emails {
		n += len(c)
	}
	return n
}

// each calls fn for every email with its shares; parts is reused.
func (t *tally) each(fn func(rec int32, at int64, parts []partRecord)) {
	var buf []partRecord
	for _, c := range t.emails {
		for i := range c {
			e := &c[i]
			buf = append(buf[:0], e.first)
			buf = append(buf, t.extra[e.extra:e.extra+e.n]...)
			fn(e.rec, e.at, buf)
		}
	}
}

// Report closes what is still open in every replay and computes the
// figures. It may be called once; the replay is finished afterwards.
func (r *Replay) Report() *Report {
	r.wait()
	rep := &Report{Events: r.events, Notifications: r.pairs, Recipients: len(r.recs), Results: []Result{}, Notes: []string{}}
	if r.events > 0 {
		rep.FirstEvent, rep.LastEvent = r.first, r.last
	}
	if r.actual != nil {
		rep.Results = append(rep.Results, r.result("Actually sent", KindActual, "what lull sent for these events", r.actual, nil))
	}
	for i, rn := range r.runs {
		name := rn.policy.Name
		if name == "" {
			name = fmt.Sprintf("Policy %d", i+1)
		}
		rep.Results = append(rep.Results, r.result(name, KindPolicy, rn.policy.Describe(), rn.tally, rn))
	}
	if r.unknownRecs > 0 {
		rep.Notes = append(rep.Notes, fmt.Sprintf("%d recipients are not stored; they were replayed as active, in UTC, with digests at 08:00 on Mondays.", r.unknownRecs))
	}
	if len(r.unknownTypes) > 0 {
		rep.Notes = append(rep.Notes, fmt.Sprintf("Types not registered were replayed as new types (immediate, burst limit 5): %v.", r.unknownTypes))
	}
	return rep
}

// result computes one column of the report.
func (r *Replay) result(name, kind, desc string, t *tally, rn *run) Result {
	res := Result{Name: name, Kind: kind, Description: desc, Types: []TypeMetrics{}}
	for len(t.types) < len(r.types) {
		t.addType()
	}
	// Populations: everyone the events named, overall and per type.
	pop := make([][]int32, len(r.types))
	overallPop := make([]int32, 0, len(r.recs))
	for ri, types := range r.seen {
		if len(types) == 0 {
			continue
		}
		overallPop = append(overallPop, int32(ri))
		for _, ti := range types {
			pop[ti] = append(pop[ti], int32(ri))
		}
	}
	display := func(ti int32) int {
		if rn != nil && int(ti) < len(rn.types) {
			return rn.types[ti].displayLimit
		}
		return r.types[ti].DisplayLimit
	}

	// Overall.
	var all metricsBuilder
	all.init(len(r.recs), t.count())
	t.each(func(rec int32, at int64, parts []partRecord) {
		first := parts[0].first
		for _, p := range parts {
			first = min(first, p.first)
			all.hidden += hidden(int(p.items), display(p.typ))
			all.items += int(p.items)
		}
		all.add(rec, at-first)
	})
	var noisiest int32
	res.Overall, noisiest = all.metrics(r, overallPop)
	if noisiest >= 0 {
		var sends []int64
		t.each(func(rec int32, at int64, _ []partRecord) {
			if rec == noisiest {
				sends = append(sends, at)
			}
		})
		res.Overall.WorstHour = worstHour(r.recs[noisiest].ID, sends)
	}
	for _, c := range t.types {
		res.Overall.Notifications += c.batched
		res.Overall.Suppressed += c.suppressed
		res.Overall.Inactive += c.inactive
		res.Overall.Unsent += c.unsent
		res.Overall.Held += c.held
	}
	if kind == KindActual {
		res.Overall.Notifications = all.items
	}

	// Per type, in key order.
	per := make([]metricsBuilder, len(r.types))
	for i := range per {
		per[i].init(0, t.types[i].emails)
	}
	t.each(func(rec int32, at int64, parts []partRecord) {
		for _, p := range parts {
			m := &per[p.typ]
			m.hidden += hidden(int(p.items), display(p.typ))
			m.items += int(p.items)
			m.add(rec, at-p.first)
		}
	})
	metrics := make([]Metrics, len(r.types))
	noisy := make([]int32, len(r.types))
	sends := make([][]int64, len(r.types))
	for ti := range per {
		metrics[ti], noisy[ti] = per[ti].metrics(r, pop[ti])
	}
	t.each(func(rec int32, at int64, parts []partRecord) {
		for _, p := range parts {
			if noisy[p.typ] == rec {
				sends[p.typ] = append(sends[p.typ], at)
			}
		}
	})
	order := make([]int, len(r.types))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool { return r.types[order[a]].Key < r.types[order[b]].Key })
	for _, ti := range order {
		m := metrics[ti]
		if noisy[ti] >= 0 {
			m.WorstHour = worstHour(r.recs[noisy[ti]].ID, sends[ti])
		}
		c := t.types[ti]
		m.Notifications, m.Suppressed, m.Inactive, m.Unsent, m.Held = c.batched, c.suppressed, c.inactive, c.unsent, c.held
		if kind == KindActual {
			m.Notifications = per[ti].items
		}
		name := r.types[ti].Name
		if name == "" {
			name = r.types[ti].Key
		}
		res.Types = append(res.Types, TypeMetrics{Type: r.types[ti].Key, Name: name, Metrics: m})
	}
	return res
}

func hidden(items, limit int) int {
	if limit <= 0 || items <= limit {
		return 0
	}
	return items - limit
}

// metricsBuilder accumulates one set of metrics.
type metricsBuilder struct {
	emails int
	items  int
	hidden int
	// perRec counts emails by recipient: a slice when most recipients are
	// expected (overall), a map otherwise (per type).
	perRec  []int32
	perRecM map[int32]int32
	delays  []int64
}

func (m *metricsBuilder) init(recs, emails int) {
	m.delays = make([]int64, 0, emails)
	if recs > 0 {
		m.perRec = make([]int32, recs)
	} else {
		m.perRecM = map[int32]int32{}
	}
}

func (m *metricsBuilder) add(rec int32, delay int64) {
	m.emails++
	if m.perRec != nil {
		m.perRec[rec]++
	} else {
		m.perRecM[rec]++
	}
	m.delays = append(m.delays, delay)
}

func (m *metricsBuilder) count(rec int32) int {
	if m.perRec != nil {
		return int(m.perRec[rec])
	}
	return int(m.perRecM[rec])
}

// metrics computes the figures over population pop and returns the
// recipient who got the most emails (-1 if nobody got any; the smallest id
// wins a tie). Recipients who got email but were never named by an event
// (possible only for actual results) join the population.
func (m *metricsBuilder) metrics(r *Replay, pop []int32) (Metrics, int32) {
	out := Metrics{Emails: m.emails, HiddenItems: m.hidden}
	inPop := make(map[int32]bool, len(pop))
	for _, ri := range pop {
		inPop[ri] = true
	}
	for ri, c := range m.perRec {
		if c > 0 && !inPop[int32(ri)] {
			pop = append(pop, int32(ri))
		}
	}
	for ri := range m.perRecM {
		if !inPop[ri] {
			pop = append(pop, ri)
		}
	}
	counts := make([]int, len(pop))
	noisiest, top := int32(-1), 0
	for i, ri := range pop {
		c := m.count(ri)
		counts[i] = c
		if c > 0 && (c > top || (c == top && r.recs[ri].ID < r.recs[noisiest].ID)) {
			noisiest, top = ri, c
		}
	}
	out.Recipients = len(pop)
	slices.Sort(counts)
	out.EmailsPerRecipient = Spread{Median: percentile(counts, 0.5), P90: percentile(counts, 0.9), Max: percentile(counts, 1)}
	slices.Sort(m.delays)
	out.Delay = Delay{Median: time.Duration(percentile(m.delays, 0.5)), P90: time.Duration(percentile(m.delays, 0.9))}
	return out, noisiest
}

// worstHour finds the clock hour (UTC) with the most sends; the earliest
// wins a tie.
func worstHour(id string, sends []int64) *WorstHour {
	const hour = int64(time.Hour)
	byHour := map[int64]int{}
	best, bestN := int64(0), 0
	for _, at := range sends {
		h := at - ((at%hour)+hour)%hour
		byHour[h]++
		if n := byHour[h]; n > bestN || (n == bestN && h < best) {
			best, bestN = h, n
		}
	}
	return &WorstHour{Recipient: id, Start: time.Unix(0, best).UTC(), Emails: bestN, Total: len(sends)}
}

// percentile is the nearest-rank percentile of sorted values; 0 for none.
func percentile[T int | int64](sorted []T, p float64) T {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*p+0.999999999) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}
