package batching

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/mail"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/preferences"
)

// MaxRecipients is the most recipients one event may name. A fan-out to
// 100,000 followers fits; beyond that the host application should split.
const MaxRecipients = 100_000

// Event is one event as the host application posts it.
type Event struct {
	Type       string         `json:"type"`
	Key        string         `json:"key,omitempty"`
	Actor      Actor          `json:"actor"`
	Object     Object         `json:"object"`
	Recipients Recipients     `json:"recipients"`
	BatchKey   string         `json:"batch_key,omitempty"`
	Data       map[string]any `json:"data,omitempty"`
	OccurredAt *time.Time     `json:"occurred_at,omitempty"`
}

// Actor is who did it.
type Actor struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// Object is what it was done to.
type Object struct {
	Type  string `json:"type"`
	ID    string `json:"id"`
	Title string `json:"title"`
	URL   string `json:"url"`
}

// RecipientRef is a bare recipient id ("u_bob"), or an object that creates
// or updates the recipient on the way in.
type RecipientRef struct {
	ID       string `json:"id"`
	Email    string `json:"email,omitempty"`
	Name     string `json:"name,omitempty"`
	Timezone string `json:"timezone,omitempty"`
	Inline   bool   `json:"-"`
}

// UnmarshalJSON accepts a string or an object. Unknown fields in the
// object are refused, like everywhere else in the API, so a misspelt
// "emial" is an error instead of a recipient without an address.
func (r *RecipientRef) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		*r = RecipientRef{}
		return json.Unmarshal(b, &r.ID)
	}
	type plain RecipientRef
	var p plain
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return err
	}
	*r = RecipientRef(p)
	r.Inline = true
	return nil
}

// MarshalJSON writes a bare id for a recipient that was given as one, so
// an event encodes back to what the host application sent.
func (r RecipientRef) MarshalJSON() ([]byte, error) {
	if !r.Inline {
		return json.Marshal(r.ID)
	}
	type plain RecipientRef
	return json.Marshal(plain(r))
}

// Recipients is an event's recipient list. It decodes at most
// MaxRecipients entries and refuses the body as soon as there are more, so
// a request naming millions of recipients costs a scan of its bytes, not
// millions of allocations before validation can say no.
type Recipients []RecipientRef

// UnmarshalJSON decodes the list one entry at a time. Its errors are
// *ValidationError naming the entry ("recipients[3].email"), because the
// JSON decoder would otherwise report every entry's problem as just
// "recipients".
func (rs *Recipients) UnmarshalJSON(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if tok == nil {
		*rs = nil
		return nil
	}
	if d, ok := tok.(json.Delim); !ok || d != '[' {
		return &ValidationError{Errors: []FieldError{{"recipients", "must be an array of recipient ids or objects"}}}
	}
	var list Recipients
	for i := 0; dec.More(); i++ {
		if i == MaxRecipients {
			return &ValidationError{Errors: []FieldError{{"recipients", fmt.Sprintf(
				"has more than %d recipients; at most %d are allowed per event: send the rest in further events", MaxRecipients, MaxRecipients)}}}
		}
		var r RecipientRef
		if err := dec.Decode(&r); err != nil {
			return recipientDecodeError(i, err)
		}
		list = append(list, r)
	}
	*rs = list
	return nil
}

// recipientDecodeError names the entry a decoding error is about.
func recipientDecodeError(i int, err error) error {
	return namedDecodeError(fmt.Sprintf("recipients[%d]", i), "must be a recipient id (a string) or an object", err)
}

// UnmarshalJSON refuses unknown fields and names a wrong one by its path
// ("actor.nick"), which the decoder of the whole event cannot do.
func (a *Actor) UnmarshalJSON(b []byte) error {
	type plain Actor
	return decodeObject(b, (*plain)(a), "actor")
}

// UnmarshalJSON refuses unknown fields and names a wrong one by its path
// ("object.titel").
func (o *Object) UnmarshalJSON(b []byte) error {
	type plain Object
	return decodeObject(b, (*plain)(o), "object")
}

func decodeObject(b []byte, v any, field string) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return namedDecodeError(field, "must be an object", err)
	}
	return nil
}

// namedDecodeError turns a decoding error inside field into a
// *ValidationError naming the field, or the field within it; whole says
// what field must be when its value is of the wrong kind altogether.
// Errors that are not about one field (malformed JSON) are returned as
// they are.
func namedDecodeError(field, whole string, err error) error {
	var typ *json.UnmarshalTypeError
	if errors.As(err, &typ) {
		if typ.Field == "" {
			return &ValidationError{Errors: []FieldError{{field, whole + ", not " + typ.Value}}}
		}
		return &ValidationError{Errors: []FieldError{{field + "." + typ.Field, "must be a string, not " + typ.Value}}}
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return &ValidationError{Errors: []FieldError{{field + "." + strings.Trim(name, `"`), "is not a known field"}}}
	}
	return err
}

// IngestResult is the API's answer to an event; it is also what a replay
// of the same idempotency key gets back.
type IngestResult struct {
	ID            int64      `json:"id"`
	Notifications int        `json:"notifications"`
	Suppressed    int        `json:"suppressed"`
	Batches       []BatchRef `json:"batches"`
	// opened counts the batches this event opened, for metrics.
	opened int
}

// BatchRef says where one recipient's notification went.
type BatchRef struct {
	ID        int64     `json:"id"`
	Recipient string    `json:"recipient"`
	BatchKey  string    `json:"batch_key"`
	ClosesAt  time.Time `json:"closes_at"`
}

// Ingest validates ev, stores it, and puts one notification per recipient
// into the right batch, all in one transaction with the batches' flush
// jobs. Work is set-based: a fan-out to many recipients costs a handful of
// statements, not one per recipient.
func (e *Engine) Ingest(ctx context.Context, apiKeyID int64, ev *Event) (*IngestResult, error) {
	typ, err := e.validate(ctx, ev)
	if err != nil {
		return nil, err
	}
	var res *IngestResult
	replayed := false
	err = e.DB.InTx(ctx, func(tx pgx.Tx) error {
		if ev.Key != "" {
			first, ok, err := db.ClaimEventKey(ctx, tx, apiKeyID, ev.Key)
			if err != nil {
				return err
			}
			if !ok {
				replayed = true
				res = new(IngestResult)
				return json.Unmarshal(first, res)
			}
		}
		res, err = e.ingestTx(ctx, tx, apiKeyID, typ, ev)
		if err != nil {
			return err
		}
		if ev.Key != "" {
			return db.RecordEventKey(ctx, tx, apiKeyID, ev.Key, res.ID, res)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if !replayed && e.Metrics != nil {
		e.Metrics.Ingested(res.Notifications, res.Suppressed, res.opened)
	}
	return res, nil
}

// fanOutChunk is how many recipients of one event are routed and written
// at a time. The whole event is still one transaction; chunks only bound
// the memory a fan-out to 100,000 recipients holds at once.
const fanOutChunk = 10_000

func (e *Engine) ingestTx(ctx context.Context, tx pgx.Tx, apiKeyID int64, typ *db.Type, ev *Event) (*IngestResult, error) {
	var inline []db.Recipient
	ids := make([]string, len(ev.Recipients))
	for i, r := range ev.Recipients {
		ids[i] = r.ID
		if r.Inline {
			inline = append(inline, db.Recipient{ID: r.ID, Email: r.Email, Name: r.Name, Timezone: r.Timezone})
		}
	}
	if err := db.UpsertRecipients(ctx, tx, inline); err != nil {
		return nil, err
	}
	stored := &db.Event{APIKeyID: apiKeyID, Key: ev.Key, TypeKey: typ.Key, BatchKey: ev.BatchKey, OccurredAt: *ev.OccurredAt, Recipients: len(ids)}
	stored.Actor, _ = json.Marshal(ev.Actor)
	stored.Object, _ = json.Marshal(ev.Object)
	stored.Data, _ = json.Marshal(ev.Data)
	eventID, created, err := db.InsertEvent(ctx, tx, stored)
	if err != nil {
		return nil, err
	}
	res := &IngestResult{ID: eventID, Batches: make([]BatchRef, 0, len(ids))}
	// Batch rows are locked in recipient order, in every chunk and across
	// them, so that two events with overlapping recipients cannot deadlock.
	slices.Sort(ids)
	in := ingestion{Engine: e, tx: tx, typ: typ, ev: ev, eventID: eventID, created: created, now: e.now(), res: res}
	if len(ids) > fanOutChunk {
		// Refuse an unknown recipient before writing any chunk, naming the
		// first in the request.
		unknown, err := db.UnknownRecipients(ctx, tx, ids)
		if err != nil {
			return nil, err
		}
		if len(unknown) > 0 {
			return nil, in.unknownRecipient(unknown)
		}
	}
	for start := 0; start < len(ids); start += fanOutChunk {
		if err := in.part(ctx, ids[start:min(start+fanOutChunk, len(ids))]); err != nil {
			return nil, err
		}
	}
	// One announcement for the whole event, after its last chunk: past a
	// thousand watched feeds it is a single "*", not a thousand per chunk.
	notified := make([]string, len(res.Batches))
	for i, b := range res.Batches {
		notified[i] = b.Recipient
	}
	if err := db.NotifyFeed(ctx, tx, notified); err != nil {
		return nil, err
	}
	return res, nil
}

// ingestion is one event being written, chunk by chunk.
type ingestion struct {
	*Engine
	tx      pgx.Tx
	typ     *db.Type
	ev      *Event
	eventID int64
	created time.Time
	now     time.Time
	res     *IngestResult
}

// unknownRecipient is the error for an event naming recipients that do
// not exist: it names the first of them in the request.
func (in *ingestion) unknownRecipient(unknown []string) error {
	set := make(map[string]bool, len(unknown))
	for _, id := range unknown {
		set[id] = true
	}
	for i, r := range in.ev.Recipients {
		if set[r.ID] {
			return &ValidationError{Errors: []FieldError{{fmt.Sprintf("recipients[%d]", i), fmt.Sprintf("unknown recipient %q: create it first, or give it as an object with an email", r.ID)}}}
		}
	}
	return fmt.Errorf("unknown recipients %v", unknown)
}

// part routes the recipients in ids into their batches and writes their
// notifications, skips and flush jobs.
func (in *ingestion) part(ctx context.Context, ids []string) error {
	tx, typ := in.tx, in.typ
	settings, err := db.LoadRecipientSettings(ctx, tx, ids, typ.Key)
	if err != nil {
		return err
	}
	var unknown []string
	for _, id := range ids {
		if _, ok := settings[id]; !ok {
			unknown = append(unknown, id)
		}
	}
	if len(unknown) > 0 {
		return in.unknownRecipient(unknown)
	}
	r := router{typ: typ, eventBatchKey: in.ev.BatchKey, now: in.now}
	if err := r.route(ctx, tx, ids, settings); err != nil {
		return err
	}
	joined, err := db.JoinBatches(ctx, tx, r.joins, in.now)
	if err != nil {
		return err
	}
	res := in.res
	res.Suppressed += len(r.skips)
	res.Notifications += len(joined)
	rids, bids := make([]string, len(joined)), make([]int64, len(joined))
	for i, b := range joined {
		rids[i], bids[i] = b.RecipientID, b.ID
		if b.Inserted {
			res.opened++
		}
	}
	for i := range r.skips {
		r.skips[i].EventID = &in.eventID
	}
	// The writes that follow need no answer from each other: they go to
	// the server together, one round trip instead of up to three.
	var flushes []Flush
	err = db.PipelineTx(ctx, tx, func(q db.Querier) error {
		if flushes, err = in.settleCloseTimes(ctx, q, typ, joined, settings, in.now); err != nil {
			return err
		}
		if err := db.InsertNotifications(ctx, q, in.eventID, in.created, typ.Key, *in.ev.OccurredAt, rids, bids); err != nil {
			return err
		}
		return db.InsertSkips(ctx, q, r.skips)
	})
	if err != nil {
		return err
	}
	for _, b := range joined {
		res.Batches = append(res.Batches, BatchRef{ID: b.ID, Recipient: b.RecipientID, BatchKey: b.BatchKey, ClosesAt: b.ClosesAt})
	}
	if err := in.Scheduler.ScheduleFlushes(ctx, tx, flushes); err != nil {
		return fmt.Errorf("schedule flushes: %w", err)
	}
	return nil
}

// settleCloseTimes recomputes each joined batch's close time from its
// opening, its latest event and the type's max_items, stores the ones that
// moved, and returns the flushes to schedule: one for every new batch and
// one for every batch that must now close earlier than its job expects. A
// batch whose window slid later needs no new job: its job, waking early,
// snoozes until the new time.
func (e *Engine) settleCloseTimes(ctx context.Context, q db.Querier, typ *db.Type, joined []db.JoinedBatch, settings map[string]db.RecipientSettings, now time.Time) ([]Flush, error) {
	var ids []int64
	var closes []time.Time
	var flushes []Flush
	for i := range joined {
		b := &joined[i]
		rs := settings[b.RecipientID]
		at := preferences.SettleClose(
			preferences.Policy{Mode: preferences.Mode(b.Mode), Window: b.Window, MaxWait: b.MaxWait},
			Schedule(&rs.Recipient), b.OpenedAt, b.LastEventAt, now, b.ItemCount, typ.MaxItems)
		if !at.Equal(b.ClosesAt) {
			ids, closes = append(ids, b.ID), append(closes, at)
		}
		if b.Inserted || at.Before(b.ClosesAt) {
			flushes = append(flushes, Flush{BatchID: b.ID, At: at})
		}
		b.ClosesAt = at
	}
	return flushes, db.SetClosesAt(ctx, q, ids, closes)
}

// router decides, recipient by recipient, which batch a notification joins
// or why it is skipped.
type router struct {
	typ           *db.Type
	eventBatchKey string
	now           time.Time
	joins         []db.BatchJoin
	skips         []db.Skip
}

func (r *router) route(ctx context.Context, tx pgx.Tx, ids []string, settings map[string]db.RecipientSettings) error {
	defaults := TypeDefaults(r.typ)
	policies := make(map[string]preferences.Policy, len(ids))
	var historic []string
	for _, id := range ids {
		s := settings[id]
		p := preferences.Effective(defaults, Override(s.Pref), s.Unsubscribed)
		switch {
		case !s.Active:
			r.skip(id, db.SkipInactive)
			continue
		case p.Mode == preferences.Never && s.Unsubscribed:
			r.skip(id, db.SkipUnsubscribed)
			continue
		case p.Mode == preferences.Never:
			r.skip(id, db.SkipMuted)
			continue
		}
		if preferences.NeedsHistory(p, r.typ.BurstLimit) {
			historic = append(historic, id)
		}
		policies[id] = p
	}
	if err := r.applyHistory(ctx, tx, historic, policies); err != nil {
		return err
	}
	for _, id := range ids {
		p, ok := policies[id]
		if !ok {
			continue
		}
		s := settings[id]
		j := db.BatchJoin{
			RecipientID: id,
			BatchKey:    preferences.BatchKey(p.Mode, r.typ.Key, r.eventBatchKey),
			Mode:        string(p.Mode),
			Window:      p.Window,
			MaxWait:     p.MaxWait,
			ClosesAt:    preferences.CloseTime(p, Schedule(&s.Recipient), r.now, r.now),
		}
		if p.Mode == preferences.Immediate || p.Mode == preferences.Cooldown {
			j.TypeKey = r.typ.Key
		}
		r.joins = append(r.joins, j)
	}
	sort.Slice(r.joins, func(a, b int) bool { return r.joins[a].RecipientID < r.joins[b].RecipientID })
	return nil
}

func (r *router) skip(id, reason string) {
	r.skips = append(r.skips, db.Skip{RecipientID: id, TypeKey: r.typ.Key, Reason: reason})
}

// applyHistory applies the rules that look at a recipient's recent past
// (the burst guard and the leading item, preferences.Route) to the
// recipients that need it, reading that past from their batches in two
// set-based queries.
func (r *router) applyHistory(ctx context.Context, tx pgx.Tx, ids []string, policies map[string]preferences.Policy) error {
	if len(ids) == 0 {
		return nil
	}
	act, err := db.LastActivity(ctx, tx, ids, preferences.BatchKey(preferences.Cooldown, r.typ.Key, r.eventBatchKey))
	if err != nil {
		return err
	}
	var immediate []string
	for _, id := range ids {
		if policies[id].Mode == preferences.Immediate {
			immediate = append(immediate, id)
		}
	}
	recent := map[string]int{}
	if len(immediate) > 0 {
		if recent, err = db.RecentImmediate(ctx, tx, immediate, r.typ.Key, r.now.Add(-time.Minute)); err != nil {
			return err
		}
	}
	for _, id := range ids {
		h := preferences.RouteHistory{RecentImmediate: recent[id], HasOpen: act[id].HasOpen, Last: act[id].Last}
		policies[id] = preferences.Route(policies[id], r.typ.BurstLimit, h, r.now)
	}
	return nil
}

// validate checks an event before anything is stored and loads its type.
func (e *Engine) validate(ctx context.Context, ev *Event) (*db.Type, error) {
	if err := ev.Check(e.now()); err != nil {
		return nil, err
	}
	typ, err := db.GetType(ctx, e.DB.Pool, ev.Type)
	if err != nil {
		if isNotFound(err) {
			v := &ValidationError{}
			v.Add("type", fmt.Sprintf("unknown notification type %q: create it with PUT /api/v1/types/%s", ev.Type, ev.Type))
			return nil, v
		}
		return nil, err
	}
	return typ, nil
}

// Check applies every rule that needs no stored data, and returns a
// *ValidationError listing each failing field. It also normalises ev:
// a recipient named twice is kept once (an object wins over a bare id,
// since it carries the details), and a missing occurred_at becomes now.
// It is separate from the type lookup so it can be fuzzed without a
// database.
func (ev *Event) Check(now time.Time) error {
	v := &ValidationError{}
	if ev.Type == "" {
		v.Add("type", "is required")
	}
	if len(ev.Key) > 255 {
		v.Add("key", "is longer than 255 characters")
	}
	if len(ev.BatchKey) > 255 {
		v.Add("batch_key", "is longer than 255 characters")
	}
	switch n := len(ev.Recipients); {
	case n == 0:
		v.Add("recipients", "needs at least one recipient")
	case n > MaxRecipients:
		v.Add("recipients", fmt.Sprintf("has %d recipients; at most %d are allowed per event: send the rest in further events", n, MaxRecipients))
	}
	seen := make(map[string]int, len(ev.Recipients))
	dedup := ev.Recipients[:0]
	zones := map[string]bool{}
	for i, r := range ev.Recipients {
		validateRecipientRef(v, i, r, zones)
		if j, ok := seen[r.ID]; ok {
			if r.Inline {
				dedup[j] = r
			}
			continue
		}
		seen[r.ID] = len(dedup)
		dedup = append(dedup, r)
	}
	ev.Recipients = dedup
	if ev.OccurredAt == nil {
		t := now
		ev.OccurredAt = &t
	}
	return v.Err()
}

// validateRecipientRef checks recipient i. zones remembers which time
// zone names were found valid: loading a zone reads a file, and a fan-out
// to 100,000 recipients names the same few zones over and over.
func validateRecipientRef(v *ValidationError, i int, r RecipientRef, zones map[string]bool) {
	field := func(name string) string { return fmt.Sprintf("recipients[%d].%s", i, name) }
	switch {
	case strings.TrimSpace(r.ID) == "":
		v.Add(field("id"), "is required")
	case len(r.ID) > 255:
		v.Add(field("id"), "is longer than 255 characters")
	}
	if !r.Inline {
		return
	}
	if r.Email != "" {
		if msg := CheckEmail(r.Email); msg != "" {
			v.Add(field("email"), msg)
		}
	}
	if r.Timezone != "" {
		ok, known := zones[r.Timezone]
		if !known {
			_, err := time.LoadLocation(r.Timezone)
			ok = err == nil && r.Timezone != "Local"
			zones[r.Timezone] = ok
		}
		if !ok {
			v.Add(field("timezone"), fmt.Sprintf("unknown time zone %q: use an IANA name such as Europe/Berlin", r.Timezone))
		}
	}
}

// maxEmailLen is the longest address SMTP can carry (RFC 5321's path
// limit less the angle brackets).
const maxEmailLen = 254

// CheckEmail returns why s is not a plain email address, or "".
func CheckEmail(s string) string {
	if len(s) > maxEmailLen {
		return fmt.Sprintf("is longer than %d characters", maxEmailLen)
	}
	a, err := mail.ParseAddress(s)
	if err != nil || a.Address != s || strings.ContainsAny(s, "\r\n") {
		return fmt.Sprintf("%q is not an email address", s)
	}
	return ""
}
