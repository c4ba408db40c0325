package db

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/uptrace/bun"
)

// Recipient is a person lull emails, with their calendar and opt-outs.
// Times of day are minutes after local midnight. It is written only
// through pgx (MergeRecipient, UpsertRecipients, SavePreferences); the
// bun tags serve the pages that read it (GetRecipient).
type Recipient struct {
	bun.BaseModel `bun:"table:recipients" db:"-"`

	ID           string    `bun:"id,pk" db:"id"`
	Email        string    `bun:"email" db:"email"`
	Name         string    `bun:"name" db:"name"`
	Timezone     string    `bun:"timezone" db:"timezone"`
	Locale       string    `bun:"locale" db:"locale"`
	Active       bool      `bun:"active" db:"active"`
	DailyAt      int       `bun:"daily_at" db:"daily_at"`
	WeeklyOn     int       `bun:"weekly_on" db:"weekly_on"`
	WeeklyAt     int       `bun:"weekly_at" db:"weekly_at"`
	WeeklyDays   int       `bun:"weekly_days" db:"weekly_days"` // a bit per weekday, Sunday = 1; 0: WeeklyOn alone
	EveryHours   int       `bun:"every_hours" db:"every_hours"`
	MonthlyDay   int       `bun:"monthly_day" db:"monthly_day"`
	MonthlyAt    int       `bun:"monthly_at" db:"monthly_at"`
	QuietStart   *int      `bun:"quiet_start" db:"quiet_start"`
	QuietEnd     *int      `bun:"quiet_end" db:"quiet_end"`
	Unsubscribed bool      `bun:"unsubscribed" db:"unsubscribed"`
	CreatedAt    time.Time `bun:"created_at,nullzero,default:now()" db:"created_at"`
	UpdatedAt    time.Time `bun:"updated_at,nullzero,default:now()" db:"updated_at"`

	// DailyBudget is the recipient's own cap on emails a local day; nil
	// follows the defaults (preferences.DailyBudget), 0 is no limit.
	DailyBudget *int `bun:"daily_budget" db:"daily_budget"`
}

const recipientColumns = `id, email, name, timezone, locale, active, daily_at, weekly_on, weekly_at,
	weekly_days, every_hours, monthly_day, monthly_at, quiet_start, quiet_end, unsubscribed, created_at, updated_at, daily_budget`

// TypePreference is a recipient's own choice for one type; nil parameters
// follow the type.
type TypePreference struct {
	RecipientID string    `db:"recipient_id"`
	TypeKey     string    `db:"type_key"`
	Mode        string    `db:"mode"`
	WindowMS    *int64    `db:"window_ms"`
	MaxWaitMS   *int64    `db:"max_wait_ms"`
	Lead        *bool     `db:"lead"`
	UpdatedAt   time.Time `db:"updated_at"`
}

// GetRecipient loads one recipient, for a page or an answer that shows it.
func GetRecipient(ctx context.Context, q bun.IDB, id string) (*Recipient, error) {
	r := new(Recipient)
	if err := q.NewSelect().Model(r).Where("id = ?", id).Scan(ctx); err != nil {
		return nil, notFound(err, "recipient "+id)
	}
	return r, nil
}

// LockRecipient loads one recipient and holds its row lock until q's
// transaction ends, so a change merged onto what it read cannot write
// over a change made in between (a one-click unsubscribe).
func LockRecipient(ctx context.Context, q Querier, id string) (*Recipient, error) {
	rows, err := q.Query(ctx, `SELECT `+recipientColumns+` FROM recipients WHERE id = $1 FOR UPDATE`, id)
	if err == nil {
		var r *Recipient
		r, err = pgx.CollectExactlyOneRow(rows, pgx.RowToAddrOfStructByName[Recipient])
		if err == nil {
			return r, nil
		}
	}
	return nil, notFound(err, "recipient "+id)
}

// UpsertRecipient creates a recipient or updates all the contact fields
// of an existing one, leaving their preferences alone.
func UpsertRecipient(ctx context.Context, q Querier, r *Recipient) error {
	return MergeRecipient(ctx, q, r, "email", "name", "timezone", "locale", "active")
}

// contactColumns are the columns MergeRecipient may be asked to update.
var contactColumns = map[string]bool{"email": true, "name": true, "timezone": true, "locale": true, "active": true}

// MergeRecipient creates r, or updates only the named contact columns of
// the stored recipient, in one statement (so two callers cannot undo each
// other's fields). r is read back: it holds the stored recipient after.
func MergeRecipient(ctx context.Context, q Querier, r *Recipient, columns ...string) error {
	set := "updated_at = EXCLUDED.updated_at"
	for _, c := range columns {
		if !contactColumns[c] {
			return fmt.Errorf("save recipient %s: %q is not a contact column", r.ID, c)
		}
		set += ", " + c + " = EXCLUDED." + c
	}
	rows, err := q.Query(ctx, `
		INSERT INTO recipients (id, email, name, timezone, locale, active, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7)
		ON CONFLICT (id) DO UPDATE SET `+set+`
		RETURNING `+recipientColumns, r.ID, r.Email, r.Name, r.Timezone, r.Locale, r.Active, time.Now())
	if err == nil {
		var stored *Recipient
		if stored, err = pgx.CollectExactlyOneRow(rows, pgx.RowToAddrOfStructByName[Recipient]); err == nil {
			*r = *stored
			return nil
		}
	}
	return fmt.Errorf("save recipient %s: %w", r.ID, err)
}

// SavePreferences stores a recipient's calendar, opt-out and per-type
// choices in one statement; types not in prefs go back to defaults.
func SavePreferences(ctx context.Context, q Querier, r *Recipient, prefs []TypePreference) error {
	r.UpdatedAt = time.Now()
	keys, modes := make([]string, len(prefs)), make([]string, len(prefs))
	windows, waits, leads := make([]*int64, len(prefs)), make([]*int64, len(prefs)), make([]*bool, len(prefs))
	for i, p := range prefs {
		keys[i], modes[i], windows[i], waits[i], leads[i] = p.TypeKey, p.Mode, p.WindowMS, p.MaxWaitMS, p.Lead
	}
	// The delete and the insert touch different rows (the types left out
	// and the types given), so one statement can hold both.
	_, err := q.Exec(ctx, `
		WITH rec AS (
		    UPDATE recipients SET timezone = $2, daily_at = $3, weekly_on = $4, weekly_at = $5,
		        quiet_start = $6, quiet_end = $7, unsubscribed = $8, updated_at = $9,
		        weekly_days = $15, every_hours = $16, monthly_day = $17, monthly_at = $18, daily_budget = $19
		    WHERE id = $1),
		gone AS (DELETE FROM type_preferences WHERE recipient_id = $1 AND type_key <> ALL($10::text[]))
		INSERT INTO type_preferences (recipient_id, type_key, mode, window_ms, max_wait_ms, lead, updated_at)
		SELECT $1, k, m, w, mw, l, $9
		FROM unnest($10::text[], $11::text[], $12::bigint[], $13::bigint[], $14::boolean[]) AS v(k, m, w, mw, l)
		ON CONFLICT (recipient_id, type_key) DO UPDATE SET mode = EXCLUDED.mode, window_ms = EXCLUDED.window_ms,
		    max_wait_ms = EXCLUDED.max_wait_ms, lead = EXCLUDED.lead, updated_at = EXCLUDED.updated_at`,
		r.ID, r.Timezone, r.DailyAt, r.WeeklyOn, r.WeeklyAt, r.QuietStart, r.QuietEnd, r.Unsubscribed, r.UpdatedAt,
		keys, modes, windows, waits, leads, r.WeeklyDays, r.EveryHours, r.MonthlyDay, r.MonthlyAt, r.DailyBudget)
	if err != nil {
		return fmt.Errorf("save preferences: %w", err)
	}
	return nil
}

// TypePreferences returns a recipient's per-type choices by type key.
func TypePreferences(ctx context.Context, q Querier, recipientID string) (map[string]TypePreference, error) {
	rows, err := q.Query(ctx, `
		SELECT recipient_id, type_key, mode, window_ms, max_wait_ms, lead, updated_at
		FROM type_preferences WHERE recipient_id = $1`, recipientID)
	var ps []TypePreference
	if err == nil {
		ps, err = pgx.CollectRows(rows, pgx.RowToStructByName[TypePreference])
	}
	if err != nil {
		return nil, fmt.Errorf("load preferences: %w", err)
	}
	m := make(map[string]TypePreference, len(ps))
	for _, p := range ps {
		m[p.TypeKey] = p
	}
	return m, nil
}

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
		WHERE r.id = ANY(`+probed(1)+`)`, ids, typeKeys)
	if err := scanSettings(rows, err, fn); err != nil {
		return fmt.Errorf("load recipients: %w", err)
	}
	return nil
}

// probed is list parameter $n of ids as PostgreSQL reads it only when
// the statement runs (a subquery's value), so that every plan looks each
// id up in the primary key. Planned for a chunk of 10,000 ids it is
// given (the first five times on each connection, before its statement
// cache settles on one plan for any list), PostgreSQL read the whole
// table of a million recipients instead, in parallel: 106–136 ms and
// three processes' time, against 25–50 ms for the lookups, while the
// fan-out it read for wrote on the other core.
func probed(n int) string { return fmt.Sprintf("(SELECT $%d::text[])::text[]", n) }

const settingsColumns = `r.id, r.email, r.name, r.timezone, r.locale, r.active, r.daily_at, r.weekly_on, r.weekly_at,
	r.weekly_days, r.every_hours, r.monthly_day, r.monthly_at, r.quiet_start, r.quiet_end, r.unsubscribed, r.daily_budget, tp.type_key, tp.mode, tp.window_ms, tp.max_wait_ms, tp.lead`

// scanSettings calls fn for each row of a query selecting settingsColumns.
func scanSettings(rows pgx.Rows, err error, fn func(RecipientSettings)) error {
	if err != nil {
		return err
	}
	defer rows.Close()
	// One set of targets for every row: fn gets a copy of each. Declared
	// in the loop, they were allocated anew for each of a fan-out's
	// 100,000 rows.
	var s RecipientSettings
	var key, mode *string
	var p TypePreference
	r := &s.Recipient
	targets := []any{&r.ID, &r.Email, &r.Name, &r.Timezone, &r.Locale, &r.Active, &r.DailyAt, &r.WeeklyOn, &r.WeeklyAt,
		&r.WeeklyDays, &r.EveryHours, &r.MonthlyDay, &r.MonthlyAt, &r.QuietStart, &r.QuietEnd, &r.Unsubscribed, &r.DailyBudget, &key, &mode, &p.WindowMS, &p.MaxWaitMS, &p.Lead}
	for rows.Next() {
		if err := rows.Scan(targets...); err != nil {
			return err
		}
		row := s
		if mode != nil {
			pref := p
			pref.Mode, pref.RecipientID, pref.TypeKey = *mode, r.ID, *key
			row.Pref = &pref
		}
		fn(row)
	}
	return rows.Err()
}

// UnknownRecipients returns those of ids that are not stored.
func UnknownRecipients(ctx context.Context, q Querier, ids []string) ([]string, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	rows, err := q.Query(ctx, `SELECT id FROM unnest($1::text[]) AS u(id)
		WHERE NOT EXISTS (SELECT 1 FROM recipients r WHERE r.id = u.id)`, ids)
	if err != nil {
		return nil, fmt.Errorf("look up recipients: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// InlineRecipient is a recipient as an event gives it inline: an id and
// the contact fields to create or update it with.
type InlineRecipient struct{ ID, Email, Name, Timezone, Locale string }

// SaveRecipients is UpsertRecipients for a fan-out's list, inside tx,
// with less work. It first reads which of the recipients are stored, and
// writes only those that are not and those a field given would change.
// The upsert locks every row it conflicts with, even where it changes
// nothing, which costs a write-ahead record per recipient when the same
// audience is notified again (0.34 s of PostgreSQL's time for 50,000
// unchanged, against 0.1 s for the read). When every write is a new
// recipient they are inserted without ON CONFLICT, whose speculative
// inserts cost half as much again; a recipient created by another request
// since the read meets the primary key, and the insert is undone
// (PostgreSQL logs the duplicate key) and upserted. Writes that change
// stored recipients are upserted with the new ones, in one statement, so
// rows are locked in the one order every writer of recipients keeps.
//
// A row changed by another request after the read, to no longer match
// what the list gives, is left as that request wrote it, as if the list
// had come first. Unchanged rows are not locked either, so a recipient
// deleted by hand (lull deletes none) while the event is written is
// missing from it, and the event is refused as naming an unknown
// recipient, which the upsert's lock would have made the delete wait for.
func SaveRecipients(ctx context.Context, tx pgx.Tx, rs []InlineRecipient) error {
	_, err := SaveRecipientsFor(ctx, tx, rs, "")
	return err
}

// SaveRecipientsFor is SaveRecipients that also answers what
// LoadRecipientSettings would read of the recipients of rs for typeKey
// afterwards, when it knows without reading them all back (Saved):
//   - every recipient of rs was new and copied in: it reads one back,
//     like, and every other reads the same but for its own given fields
//     (like.Of), since the columns rs does not give come from the
//     table's defaults and no other request can change the rows before
//     tx commits. A fan-out given 100,000 new recipients inline then need
//     not read them back chunk by chunk (a sixth of its time);
//   - every recipient of rs was stored, and rs changes none: what it read
//     to find that out is what a read afterwards gives. The same audience
//     notified again is then read once, not twice.
//
// Nothing is known otherwise: a list of fewer than readRecipientsFrom,
// one with new and stored recipients or changing some; and without a
// typeKey, as SaveRecipients calls it.
func SaveRecipientsFor(ctx context.Context, tx pgx.Tx, rs []InlineRecipient, typeKey string) (Saved, error) {
	if len(rs) < readRecipientsFrom {
		return Saved{}, UpsertRecipients(ctx, tx, rs)
	}
	copied, err := copyIfNew(ctx, tx, rs)
	if err != nil {
		return Saved{}, err
	}
	if !copied {
		writes, changes, read, err := recipientWrites(ctx, tx, rs, typeKey)
		if err != nil {
			return Saved{}, err
		}
		if len(writes) == 0 {
			return Saved{Read: read}, nil
		}
		if changes {
			return Saved{}, UpsertRecipients(ctx, tx, writes)
		}
		if copied, err = copyNew(ctx, tx, writes); err != nil {
			return Saved{}, err
		}
		if !copied {
			return Saved{}, UpsertRecipients(ctx, tx, writes)
		}
		if len(writes) < len(rs) {
			return Saved{}, nil
		}
	}
	if typeKey == "" {
		return Saved{}, nil
	}
	first, err := LoadRecipientSettings(ctx, tx, []string{rs[0].ID}, typeKey)
	if s, ok := first[rs[0].ID]; ok && err == nil {
		return Saved{Like: &s}, nil
	}
	return Saved{}, err
}

// Saved is what SaveRecipientsFor knows of the settings of the recipients
// it saved: like.Of each (Like), or each as read (Read), or nothing.
type Saved struct {
	Like *RecipientSettings
	Read map[string]RecipientSettings
}

// Of is the settings of recipient r as saved, if known.
func (s Saved) Of(r InlineRecipient) (RecipientSettings, bool) {
	if s.Like != nil {
		return s.Like.Of(r), true
	}
	rs, ok := s.Read[r.ID]
	return rs, ok
}

// copyIfNew copies rs in as new recipients, without reading first, when
// none of a sample of them is stored: an audience seen for the first time
// then costs one write instead of a read of every id and a write (a
// fifth of a second of a fan-out to 100,000). copied is false when the
// sample found one stored, or when the copy met one (and was undone):
// the caller then reads and saves as for any list. A list with a few
// stored recipients past the sample pays for a copy that is undone; the
// rows are copied in id order, so the first stored one stops it.
func copyIfNew(ctx context.Context, tx pgx.Tx, rs []InlineRecipient) (copied bool, err error) {
	step := max(1, len(rs)/newSample)
	sample := make([]string, 0, newSample+1)
	for i := 0; i < len(rs); i += step {
		sample = append(sample, rs[i].ID)
	}
	var stored bool
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM recipients WHERE id = ANY($1::text[]))`, sample).Scan(&stored); err != nil {
		return false, fmt.Errorf("read recipients: %w", err)
	}
	if stored {
		return false, nil
	}
	return copyNew(ctx, tx, rs)
}

// newSample is how many of a list copyIfNew looks up before copying it.
const newSample = 16

// copyNew copies rs in as new recipients. A recipient stored already (or
// created by another request meanwhile) meets the primary key, the copy is
// undone (PostgreSQL logs the duplicate key), and copied is false.
func copyNew(ctx context.Context, tx pgx.Tx, rs []InlineRecipient) (copied bool, err error) {
	return insertElse(ctx, tx, "recipients_pkey", func() (bool, error) {
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"recipients"}, []string{"id", "email", "name", "timezone", "locale"}, newRecipientRows(rs)); err != nil {
			return false, fmt.Errorf("save recipients: %w", err)
		}
		return true, nil
	}, func() (bool, error) { return false, nil })
}

// Of is the settings of new recipient r, saved with the one like was read
// of: like but for r's own fields.
func (like RecipientSettings) Of(r InlineRecipient) RecipientSettings {
	s := like
	s.ID, s.Email, s.Name, s.Timezone, s.Locale = r.ID, r.Email, r.Name, r.zone(), r.Locale
	return s
}

// zone is the time zone a new recipient r is saved with: UTC when r gives
// none.
func (r InlineRecipient) zone() string { return cmp.Or(r.Timezone, "UTC") }

// newRecipientRows are new recipients as COPY writes them, in byte order
// of their ids (the order every writer of recipients locks them in) and
// in UTC when no time zone is given. COPY writes them for less than an
// INSERT from arrays would.
func newRecipientRows(rs []InlineRecipient) pgx.CopyFromSource {
	sorted := slices.SortedFunc(slices.Values(rs), func(a, b InlineRecipient) int { return strings.Compare(a.ID, b.ID) })
	row := make([]any, 5) // filled in turn, as in copyNotifications
	return pgx.CopyFromSlice(len(sorted), func(i int) ([]any, error) {
		r := sorted[i]
		row[0], row[1], row[2], row[3], row[4] = r.ID, r.Email, r.Name, r.zone(), r.Locale
		return row, nil
	})
}

// readRecipientsFrom is the shortest list SaveRecipients reads first:
// below it, the read would cost more than it saves.
const readRecipientsFrom = 1000

// recipientWrites are those of rs that are not stored, or that a field
// given would change (a field left empty changes nothing), and whether
// any of them is stored. Given a typeKey, it reads the stored recipients'
// settings for it (read), and their fields from those.
func recipientWrites(ctx context.Context, q Querier, rs []InlineRecipient, typeKey string) (writes []InlineRecipient, changes bool, read map[string]RecipientSettings, err error) {
	ids := make([]string, len(rs))
	for i, r := range rs {
		ids[i] = r.ID
	}
	// stored is what is stored of recipient id: from read when the
	// settings were read, not copied into a map of its own.
	var stored func(id string) (InlineRecipient, bool)
	var found int
	if typeKey != "" {
		if read, err = LoadRecipientSettings(ctx, q, ids, typeKey); err != nil {
			return nil, false, nil, err
		}
		stored = func(id string) (InlineRecipient, bool) {
			s, ok := read[id]
			return InlineRecipient{ID: id, Email: s.Email, Name: s.Name, Timezone: s.Timezone, Locale: s.Locale}, ok
		}
		found = len(read)
	} else {
		fields, err := readInline(ctx, q, ids)
		if err != nil {
			return nil, false, nil, err
		}
		stored = func(id string) (InlineRecipient, bool) { r, ok := fields[id]; return r, ok }
		found = len(fields)
	}
	if found == 0 {
		return rs, false, read, nil
	}
	for _, r := range rs {
		was, ok := stored(r.ID)
		if ok && !r.alters(was) {
			continue
		}
		writes = append(writes, r)
		changes = changes || ok
	}
	return writes, changes, read, nil
}

// readInline reads the stored fields of the recipients ids, by id.
func readInline(ctx context.Context, q Querier, ids []string) (map[string]InlineRecipient, error) {
	rows, err := q.Query(ctx, `SELECT id, email, name, timezone, locale FROM recipients WHERE id = ANY(`+probed(1)+`)`, ids)
	if err != nil {
		return nil, fmt.Errorf("read recipients: %w", err)
	}
	stored := map[string]InlineRecipient{}
	var r InlineRecipient
	if _, err := pgx.ForEachRow(rows, []any{&r.ID, &r.Email, &r.Name, &r.Timezone, &r.Locale}, func() error {
		stored[r.ID] = r
		return nil
	}); err != nil {
		return nil, fmt.Errorf("read recipients: %w", err)
	}
	return stored, nil
}

// alters says whether saving r over was would change it: a field given,
// not empty, that differs from the stored one.
func (r InlineRecipient) alters(was InlineRecipient) bool {
	differs := func(given, stored string) bool { return given != "" && given != stored }
	return differs(r.Email, was.Email) || differs(r.Name, was.Name) || differs(r.Timezone, was.Timezone) || differs(r.Locale, was.Locale)
}

// inlineColumns is rs as one array per column.
func inlineColumns(rs []InlineRecipient) (ids, emails, names, zones, locales []string) {
	n := len(rs)
	ids, emails, names, zones, locales = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	for i, r := range rs {
		ids[i], emails[i], names[i], zones[i], locales[i] = r.ID, r.Email, r.Name, r.Timezone, r.Locale
	}
	return ids, emails, names, zones, locales
}

// UpsertRecipients creates or updates recipients given inline in an event,
// in one statement. Empty fields do not overwrite stored ones, and a row
// is rewritten only when a field given changes it, so notifying the same
// inline audience again costs a lookup per recipient, not a new row
// version and its index entries.
//
// A locale follows the same rule: an omitted one keeps the stored one.
//
// A new recipient without a time zone gets UTC while an existing one keeps
// theirs, which EXCLUDED.timezone (already defaulted to UTC) cannot tell
// apart: the update looks the zone given up in a jsonb object keyed by id,
// built once per statement, which is a binary search. Looking each
// conflicting id up in the list instead made the statement quadratic (22 s
// to notify 20,000 inline recipients a second time). Conflicts with a
// concurrent insert of the same recipient are resolved by ON CONFLICT.
//
// Rows are written, and so locked, in the byte order of their ids
// (COLLATE "C"), the order Go sorts strings in, so that SaveRecipients'
// copy keeps the same order whatever the database's collation.
func UpsertRecipients(ctx context.Context, q Querier, rs []InlineRecipient) error {
	if len(rs) == 0 {
		return nil
	}
	ids, emails, names, zones, locales := inlineColumns(rs)
	// The locale column defaults to '', so EXCLUDED.locale is what was
	// given and needs no lookup, unlike the zone.
	_, err := q.Exec(ctx, `
		WITH given AS (SELECT jsonb_object($1::text[], $4::text[]) AS zones)
		INSERT INTO recipients AS r (id, email, name, timezone, locale)
		SELECT id, email, name, coalesce(nullif(tz, ''), 'UTC'), locale
		FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[]) AS v(id, email, name, tz, locale) ORDER BY id COLLATE "C"
		ON CONFLICT (id) DO UPDATE SET
		    email = coalesce(nullif(EXCLUDED.email, ''), r.email),
		    name = coalesce(nullif(EXCLUDED.name, ''), r.name),
		    timezone = coalesce(nullif((SELECT zones FROM given) ->> EXCLUDED.id, ''), r.timezone),
		    locale = coalesce(nullif(EXCLUDED.locale, ''), r.locale),
		    updated_at = now()
		WHERE nullif(EXCLUDED.email, '') <> r.email OR nullif(EXCLUDED.name, '') <> r.name
		   OR nullif((SELECT zones FROM given) ->> EXCLUDED.id, '') <> r.timezone
		   OR nullif(EXCLUDED.locale, '') <> r.locale`, ids, emails, names, zones, locales)
	if err != nil {
		return fmt.Errorf("save recipients: %w", err)
	}
	return nil
}
