package db

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// RecipientSettings is what the engine needs to route one notification:
// the recipient's calendar and their stored choice for the event's type.
type RecipientSettings struct {
	Recipient
	Pref *TypePreference // nil: follow the type's defaults
}

// LoadRecipientSettings loads recipients ids with their preference for
// typeKey, in one query however many recipients an event has. Missing ids
// are simply absent from the result.
func LoadRecipientSettings(ctx context.Context, q Querier, ids []string, typeKey string) (map[string]RecipientSettings, error) {
	out := make(map[string]RecipientSettings, len(ids))
	err := loadSettings(ctx, q, ids, []string{typeKey}, func(s RecipientSettings) { out[s.ID] = s })
	return out, err
}

// LoadSettingsFor loads recipients with their preference for a type of
// their own, typeOf[id], in one query: for several events at once, each
// recipient belonging to one of them. Missing ids are absent from the
// result.
func LoadSettingsFor(ctx context.Context, q Querier, typeOf map[string]string) (map[string]RecipientSettings, error) {
	ids := make([]string, 0, len(typeOf))
	var types []string
	for id, t := range typeOf {
		ids = append(ids, id)
		if !slices.Contains(types, t) {
			types = append(types, t)
		}
	}
	out := make(map[string]RecipientSettings, len(ids))
	// The query returns a recipient's preferences for every type asked
	// for; one for another recipient's type counts as none.
	err := loadSettings(ctx, q, ids, types, func(s RecipientSettings) {
		if s.Pref != nil && s.Pref.TypeKey != typeOf[s.ID] {
			if _, seen := out[s.ID]; seen {
				return
			}
			s.Pref = nil
		}
		out[s.ID] = s
	})
	return out, err
}

// loadSettings calls fn for each recipient in ids, once per stored
// preference for one of typeKeys, or once with a nil Pref when there is none.
func loadSettings(ctx context.Context, q Querier, ids, typeKeys []string, fn func(RecipientSettings)) error {
	rows, err := q.Query(ctx, `SELECT `+settingsColumns+`
		FROM recipients r
		LEFT JOIN type_preferences tp ON tp.recipient_id = r.id AND tp.type_key = ANY($2)
		WHERE r.id = ANY($1)`, ids, typeKeys)
	if err := scanSettings(rows, err, fn); err != nil {
		return fmt.Errorf("load recipients: %w", err)
	}
	return nil
}

const settingsColumns = `r.id, r.email, r.name, r.timezone, r.active, r.daily_at, r.weekly_on, r.weekly_at,
	r.quiet_start, r.quiet_end, r.unsubscribed, tp.type_key, tp.mode, tp.window_ms, tp.max_wait_ms, tp.lead`

// scanSettings calls fn for each row of a query selecting settingsColumns.
func scanSettings(rows pgx.Rows, err error, fn func(RecipientSettings)) error {
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var s RecipientSettings
		var key, mode *string
		var p TypePreference
		r := &s.Recipient
		if err := rows.Scan(&r.ID, &r.Email, &r.Name, &r.Timezone, &r.Active, &r.DailyAt, &r.WeeklyOn, &r.WeeklyAt,
			&r.QuietStart, &r.QuietEnd, &r.Unsubscribed, &key, &mode, &p.WindowMS, &p.MaxWaitMS, &p.Lead); err != nil {
			return err
		}
		if mode != nil {
			p.Mode, p.RecipientID, p.TypeKey = *mode, r.ID, *key
			s.Pref = &p
		}
		fn(s)
	}
	return rows.Err()
}

// UnknownRecipients returns those of ids that are not stored.
func UnknownRecipients(ctx context.Context, q Querier, ids []string) ([]string, error) {
	rows, err := q.Query(ctx, `SELECT id FROM unnest($1::text[]) AS u(id)
		WHERE NOT EXISTS (SELECT 1 FROM recipients r WHERE r.id = u.id)`, ids)
	if err != nil {
		return nil, fmt.Errorf("look up recipients: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// InlineRecipient is a recipient as an event gives it inline: an id and
// the contact fields to create or update it with.
type InlineRecipient struct{ ID, Email, Name, Timezone string }

// UpsertRecipients creates or updates recipients given inline in an event,
// in one statement. Empty fields do not overwrite stored ones, and a row
// is rewritten only when a field given changes it, so notifying the same
// inline audience again costs a lookup per recipient, not a new row
// version and its index entries.
//
// A new recipient without a time zone gets UTC while an existing one keeps
// theirs, which EXCLUDED.timezone (already defaulted to UTC) cannot tell
// apart: the update looks the zone given up in a jsonb object keyed by id,
// built once per statement, which is a binary search. Looking each
// conflicting id up in the list instead made the statement quadratic (22 s
// to notify 20,000 inline recipients a second time). Conflicts with a
// concurrent insert of the same recipient are resolved by ON CONFLICT.
func UpsertRecipients(ctx context.Context, q Querier, rs []InlineRecipient) error {
	if len(rs) == 0 {
		return nil
	}
	n := len(rs)
	ids, emails, names, zones := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	for i, r := range rs {
		ids[i], emails[i], names[i], zones[i] = r.ID, r.Email, r.Name, r.Timezone
	}
	_, err := q.Exec(ctx, `
		WITH given AS (SELECT jsonb_object($1::text[], $4::text[]) AS zones)
		INSERT INTO recipients AS r (id, email, name, timezone)
		SELECT id, email, name, coalesce(nullif(tz, ''), 'UTC')
		FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) AS v(id, email, name, tz) ORDER BY id
		ON CONFLICT (id) DO UPDATE SET
		    email = coalesce(nullif(EXCLUDED.email, ''), r.email),
		    name = coalesce(nullif(EXCLUDED.name, ''), r.name),
		    timezone = coalesce(nullif((SELECT zones FROM given) ->> EXCLUDED.id, ''), r.timezone),
		    updated_at = now()
		WHERE nullif(EXCLUDED.email, '') <> r.email OR nullif(EXCLUDED.name, '') <> r.name
		   OR nullif((SELECT zones FROM given) ->> EXCLUDED.id, '') <> r.timezone`, ids, emails, names, zones)
	if err != nil {
		return fmt.Errorf("save recipients: %w", err)
	}
	return nil
}

// RecentImmediate counts, per recipient, the immediate batches of typeKey
// opened since since: the burst guard's measure.
func RecentImmediate(ctx context.Context, q Querier, ids []string, typeKey string, since time.Time) (map[string]int, error) {
	rows, err := q.Query(ctx, `
		SELECT recipient_id, count(*) FROM batches
		WHERE mode = 'immediate' AND type_key = $2 AND recipient_id = ANY($1) AND opened_at > $3
		GROUP BY recipient_id`, ids, typeKey, since)
	if err != nil {
		return nil, fmt.Errorf("count recent emails: %w", err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			return nil, err
		}
		out[id] = n
	}
	return out, rows.Err()
}

// Activity is the last time a recipient had a notification under a batch
// key, and whether a batch for it is open now.
type Activity struct {
	Last    time.Time
	HasOpen bool
}

// LastActivity reports Activity for recipients ids under batchKey:
// whether a batch (not an immediate one) is open to join, and, for those
// also in lead, when they last had a notification under the key (for the
// leading-item rule; for the others Last is zero). The open batches are
// read from batches_one_open, one index entry per recipient. Only the
// leading-item rule reads the recipients' past batches, so the burst
// guard, which every immediate fan-out applies, costs the same however
// long their histories are; asking every recipient for the last
// notification made it read every batch they ever had, or the whole table.
func LastActivity(ctx context.Context, q Querier, ids, lead []string, batchKey string) (map[string]Activity, error) {
	rows, err := q.Query(ctx, `
		SELECT recipient_id, true, NULL::timestamptz FROM batches
		WHERE recipient_id = ANY($1) AND batch_key = $3 AND state = 'open' AND mode <> 'immediate'
		UNION ALL
		SELECT recipient_id, false, max(last_event_at) FROM batches
		WHERE recipient_id = ANY($2) AND batch_key = $3
		GROUP BY recipient_id`, ids, lead, batchKey)
	if err != nil {
		return nil, fmt.Errorf("last activity: %w", err)
	}
	defer rows.Close()
	out := map[string]Activity{}
	for rows.Next() {
		var id string
		var open bool
		var last *time.Time
		if err := rows.Scan(&id, &open, &last); err != nil {
			return nil, err
		}
		a := out[id]
		a.HasOpen = a.HasOpen || open
		if last != nil {
			a.Last = *last
		}
		out[id] = a
	}
	return out, rows.Err()
}

// BatchJoin asks for one notification to go into a batch: the open one for
// (RecipientID, BatchKey) if there is one, else a new one. Immediate joins
// always open a batch of their own.
type BatchJoin struct {
	RecipientID string
	BatchKey    string
	Mode        string
	TypeKey     string // empty for digests, which mix types
	Window      time.Duration
	MaxWait     time.Duration
	ClosesAt    time.Time // for a new batch
}

// JoinedBatch is a batch after a join, with what the engine needs to
// recompute when it closes.
type JoinedBatch struct {
	ID          int64
	RecipientID string
	BatchKey    string
	Mode        string
	OpenedAt    time.Time
	LastEventAt time.Time
	ClosesAt    time.Time
	Window      time.Duration
	MaxWait     time.Duration
	ItemCount   int
	Inserted    bool
}

// JoinBatches puts one notification per join into its batch, in one
// statement. The partial unique index batches_one_open makes concurrent
// ingests for one recipient and key meet in a single batch: the upsert
// either inserts it or locks and updates the existing open row, and the
// lock is held until the caller's transaction commits. Joins are sorted so
// that concurrent fan-outs lock rows in one order and cannot deadlock: by
// bytes (COLLATE "C"), the order Go sorts strings in, because a large
// event is written in chunks cut in Go's order.
func JoinBatches(ctx context.Context, q Querier, joins []BatchJoin, now time.Time) ([]JoinedBatch, error) {
	if len(joins) == 0 {
		return nil, nil
	}
	n := len(joins)
	rids, keys, modes, types := make([]string, n), make([]string, n), make([]string, n), make([]*string, n)
	windows, waits, closes := make([]int64, n), make([]int64, n), make([]time.Time, n)
	for i, j := range joins {
		rids[i], keys[i], modes[i] = j.RecipientID, j.BatchKey, j.Mode
		if j.TypeKey != "" {
			types[i] = &joins[i].TypeKey
		}
		windows[i], waits[i], closes[i] = j.Window.Milliseconds(), j.MaxWait.Milliseconds(), j.ClosesAt
	}
	rows, err := q.Query(ctx, `
		INSERT INTO batches AS b (recipient_id, batch_key, mode, type_key, window_ms, max_wait_ms, closes_at,
		                          opened_at, last_event_at, item_count)
		SELECT rid, key, mode, type_key, window_ms, max_wait_ms, closes_at, $8, $8, 1
		FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[], $6::bigint[], $7::timestamptz[])
		     AS v(rid, key, mode, type_key, window_ms, max_wait_ms, closes_at)
		ORDER BY rid COLLATE "C", key COLLATE "C"
		ON CONFLICT (recipient_id, batch_key) WHERE state = 'open' AND mode <> 'immediate'
		DO UPDATE SET item_count = b.item_count + 1,
		              last_event_at = greatest(b.last_event_at, EXCLUDED.last_event_at)
		RETURNING id, recipient_id, batch_key, mode, opened_at, last_event_at, closes_at,
		          window_ms, max_wait_ms, item_count, xmax = 0`,
		rids, keys, modes, types, windows, waits, closes, now)
	if err != nil {
		return nil, fmt.Errorf("join batches: %w", err)
	}
	defer rows.Close()
	out := make([]JoinedBatch, 0, n)
	for rows.Next() {
		var b JoinedBatch
		var w, m int64
		if err := rows.Scan(&b.ID, &b.RecipientID, &b.BatchKey, &b.Mode, &b.OpenedAt, &b.LastEventAt, &b.ClosesAt,
			&w, &m, &b.ItemCount, &b.Inserted); err != nil {
			return nil, fmt.Errorf("join batches: %w", err)
		}
		b.Window, b.MaxWait = time.Duration(w)*time.Millisecond, time.Duration(m)*time.Millisecond
		out = append(out, b)
	}
	return out, rows.Err()
}

// SetClosesAt moves batches' close times, in one statement.
func SetClosesAt(ctx context.Context, q Querier, ids []int64, closes []time.Time) error {
	if len(ids) == 0 {
		return nil
	}
	_, err := q.Exec(ctx, `
		UPDATE batches b SET closes_at = v.closes_at
		FROM unnest($1::bigint[], $2::timestamptz[]) AS v(id, closes_at)
		WHERE b.id = v.id`, ids, closes)
	if err != nil {
		return fmt.Errorf("set close times: %w", err)
	}
	return nil
}

// EventRef is what each notification of an event repeats from it.
type EventRef struct {
	ID         int64
	Created    time.Time
	TypeKey    string
	OccurredAt time.Time
}

// NewNotifications are the notifications of one or more events: row i
// puts Events[Of[i]]'s notification for Recipients[i] into Batches[i]. Of
// may be nil when there is one event, which spares a fan-out to 100,000
// recipients a list of 100,000 zeros.
type NewNotifications struct {
	Events     []EventRef
	Of         []int32
	Recipients []string
	Batches    []int64
}

// InsertNotifications stores notifications, set-based.
func InsertNotifications(ctx context.Context, q Querier, ns NewNotifications) error {
	if len(ns.Recipients) == 0 {
		return nil
	}
	n := len(ns.Events)
	ids, created, types, occurred := make([]int64, n), make([]time.Time, n), make([]string, n), make([]time.Time, n)
	for i, e := range ns.Events {
		ids[i], created[i], types[i], occurred[i] = e.ID, e.Created, e.TypeKey, e.OccurredAt
	}
	// unnest pads a shorter array with NULLs: a nil Of reads as event 0.
	_, err := q.Exec(ctx, `
		INSERT INTO notifications (event_id, created_at, type_key, occurred_at, recipient_id, batch_id)
		SELECT e.id, e.created, e.type_key, e.occurred, v.rid, v.bid
		FROM unnest($1::text[], $2::bigint[], $3::int[]) AS v(rid, bid, ev)
		JOIN unnest($4::bigint[], $5::timestamptz[], $6::text[], $7::timestamptz[]) WITH ORDINALITY
		     AS e(id, created, type_key, occurred, n) ON e.n = coalesce(v.ev, 0) + 1`,
		ns.Recipients, ns.Batches, ns.Of, ids, created, types, occurred)
	if err != nil {
		return fmt.Errorf("insert notifications: %w", err)
	}
	return nil
}

// Skip is one entry of the skip log: something not sent, and why.
type Skip struct {
	RecipientID string
	TypeKey     string
	EventID     *int64
	BatchID     *int64
	Items       int
	Reason      string
}

// Skip reasons, as operators see them.
const (
	SkipMuted        = "muted"
	SkipUnsubscribed = "unsubscribed"
	SkipInactive     = "recipient inactive"
	SkipNoEmail      = "no email address"
	SkipRetracted    = "retracted"
	SkipOperator     = "canceled by an operator"
	SkipBounced      = "bounced"
	SkipRead         = "read in app"
)

// InsertSkips records skip log entries, set-based.
func InsertSkips(ctx context.Context, q Querier, skips []Skip) error {
	if len(skips) == 0 {
		return nil
	}
	n := len(skips)
	rids, types, reasons := make([]string, n), make([]string, n), make([]string, n)
	events, batches, items := make([]*int64, n), make([]*int64, n), make([]int32, n)
	for i, s := range skips {
		rids[i], types[i], reasons[i], events[i], batches[i], items[i] = s.RecipientID, s.TypeKey, s.Reason, s.EventID, s.BatchID, int32(max(s.Items, 1))
	}
	_, err := q.Exec(ctx, `
		INSERT INTO skips (recipient_id, type_key, reason, event_id, batch_id, items)
		SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::bigint[], $6::int[])`,
		rids, types, reasons, events, batches, items)
	if err != nil {
		return fmt.Errorf("record skips: %w", err)
	}
	return nil
}
