package db

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Undo is what an unsubscribe changed, enough to put it back.
type Undo struct {
	// All says the recipient unsubscribed from everything; Was is whether
	// they already had.
	All, Was bool
	// Thread is the batch key the recipient unsubscribed from, and
	// MutedAt when that mute was made: an undo turns back on only the
	// mute it was made for, so a link replayed after the recipient muted
	// the thread again leaves the newer mute. A zero MutedAt (the
	// settings page, the API) turns the thread on whatever muted it.
	Thread  string
	MutedAt time.Time
	// Modes maps each type turned to "never" to its mode before: "" when
	// it had none of its own and followed the type's default, and
	// typeDefault when it was "never" already. An email showed the type,
	// so it was on when the email went out; it was most likely turned
	// off by the same link a moment ago (a mail client's one-click, a
	// reload), and undo turns it back on rather than leave it off.
	Modes map[string]string
}

// SkipMutedThread is why a batch of a thread the recipient unsubscribed
// from is not sent.
const SkipMutedThread = "muted thread"

// mutedBatchesQuery finds which of the batches in $1 have a key their
// recipient unsubscribed from (with no notification id), and which
// notifications of other batches belong to such a thread: a digest's key
// is its cadence ("daily"), so a thread muted before the recipient chose
// a digest is found by its items' type and event batch key. Required
// types ignore the mute, and so does a mute past its end (muteLive), and
// an item read in the app stays with the read: it left the count, and was
// logged, when read (counted muted as well, it was logged twice). It
// starts from muted_threads, so a recipient with none costs nothing; a
// flush reads it with the rest.
const mutedBatchesQuery = `SELECT b.id, NULL::bigint FROM batches b
	JOIN muted_threads m ON m.recipient_id = b.recipient_id AND m.batch_key = b.batch_key
	WHERE b.id = ANY($1) AND ` + muteLive + `
	UNION ALL
	SELECT n.batch_id, n.id FROM batches b
	JOIN muted_threads m ON m.recipient_id = b.recipient_id AND m.batch_key <> b.batch_key
	JOIN notifications n ON n.batch_id = b.id AND n.retracted_at IS NULL
	JOIN events e ON e.id = n.event_id AND e.created_at = n.created_at
	JOIN notification_types t ON t.key = n.type_key AND NOT t.required
	  AND (n.read_at IS NULL OR NOT t.skip_read)
	WHERE b.id = ANY($1) AND e.batch_key <> '' AND m.batch_key = n.type_key || '+' || e.batch_key
	  AND ` + muteLive

// readMutedBatches marks the batches mutedBatchesQuery found, and takes
// the muted threads' items out of the others; a batch left with none is
// muted as a whole.
func readMutedBatches(res pgx.BatchResults, out map[int64]*FlushContent) error {
	rows, err := res.Query()
	if err != nil {
		return err
	}
	type row struct {
		Batch int64
		Item  *int64
	}
	found, err := pgx.CollectRows(rows, pgx.RowToStructByPos[row])
	muted := map[int64]map[int64]bool{}
	for _, r := range found {
		c := out[r.Batch]
		switch {
		case c == nil:
		case r.Item == nil:
			c.ThreadMuted = true
		default:
			if muted[r.Batch] == nil {
				muted[r.Batch] = map[int64]bool{}
			}
			muted[r.Batch][*r.Item] = true
		}
	}
	for id, items := range muted {
		c := out[id]
		c.ThreadMutedItems = map[string]int{}
		c.Items = slices.DeleteFunc(c.Items, func(it Item) bool {
			if items[it.NotificationID] {
				c.ThreadMutedItems[it.TypeKey]++
			}
			return items[it.NotificationID]
		})
		c.ThreadMuted = c.ThreadMuted || len(c.Items) == 0
	}
	return err
}

// typeDefault in Undo.Modes sets a type back to its default mode.
const typeDefault = "*"

// Unsubscribed is the outcome of an unsubscribe.
type Unsubscribed struct {
	Undo
	Recipient *Recipient
	// Required are types asked for that cannot be turned off.
	Required []string
}

// Unsubscribe stops the given types for a recipient, as the one-click
// link of an email showing them asks (types that are required are left
// on), or, with no types, unsubscribes them from everything. It holds
// the recipient's row lock while it reads what it changes, so the Undo
// it returns is exactly what was there before.
func Unsubscribe(ctx context.Context, q Querier, recipientID string, types []string) (*Unsubscribed, error) {
	rec, err := LockRecipient(ctx, q, recipientID)
	if err != nil {
		return nil, err
	}
	u := &Unsubscribed{Recipient: rec, Undo: Undo{Was: rec.Unsubscribed, Modes: map[string]string{}}}
	if len(types) == 0 {
		u.All = true
		if _, err := q.Exec(ctx, `UPDATE recipients SET unsubscribed = true, updated_at = now() WHERE id = $1`, recipientID); err != nil {
			return nil, fmt.Errorf("unsubscribe %s: %w", recipientID, err)
		}
		return u, nil
	}
	rows, err := q.Query(ctx, `
		SELECT t.key, t.required, coalesce(p.mode, '')
		FROM notification_types t
		LEFT JOIN type_preferences p ON p.type_key = t.key AND p.recipient_id = $1
		WHERE t.key = ANY($2) ORDER BY t.key`, recipientID, types)
	if err != nil {
		return nil, fmt.Errorf("unsubscribe %s: %w", recipientID, err)
	}
	var stop []string
	for rows.Next() {
		var key, mode string
		var required bool
		if err := rows.Scan(&key, &required, &mode); err != nil {
			rows.Close()
			return nil, fmt.Errorf("unsubscribe %s: %w", recipientID, err)
		}
		if required {
			u.Required = append(u.Required, key)
			continue
		}
		if mode == "never" {
			mode = typeDefault
		}
		u.Modes[key] = mode
		stop = append(stop, key)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("unsubscribe %s: %w", recipientID, err)
	}
	// A row of its own keeps the type's window and wait, so an undo that
	// sets the mode back finds them as they were.
	_, err = q.Exec(ctx, `
		WITH rec AS (UPDATE recipients SET updated_at = now() WHERE id = $1)
		INSERT INTO type_preferences (recipient_id, type_key, mode) SELECT $1, unnest($2::text[]), 'never'
		ON CONFLICT (recipient_id, type_key) DO UPDATE SET mode = 'never', updated_at = now()`, recipientID, stop)
	if err != nil {
		return nil, fmt.Errorf("unsubscribe %s: %w", recipientID, err)
	}
	return u, nil
}

// MuteThread unsubscribes a recipient from one thread for good: the
// batch key of an email whose type unsubscribes by thread. Batches with
// that key are then canceled at their flush (SkipMutedThread).
func MuteThread(ctx context.Context, q Querier, recipientID, batchKey string) (*Unsubscribed, error) {
	rec, m, err := MuteThreadFor(ctx, q, recipientID, batchKey, 0)
	if err != nil {
		return nil, err
	}
	return &Unsubscribed{Recipient: rec, Undo: Undo{Thread: batchKey, MutedAt: m.CreatedAt}}, nil
}

// MutedThread is a thread a recipient stopped.
type MutedThread struct {
	BatchKey  string
	CreatedAt time.Time
	// Until is when the mute ends; nil mutes it for good.
	Until *time.Time
}

// MaxMutedShown bounds the threads a settings page lists, and MaxMutes
// the conversations the preferences API lets one recipient have muted at
// once, so that its answer can list every one of them.
const (
	MaxMutedShown = 200
	MaxMutes      = 1000
)

// MutedThreads lists up to limit threads a recipient stopped, newest
// first; a mute past its end stops nothing and is not listed.
func MutedThreads(ctx context.Context, q Querier, recipientID string, limit int) ([]MutedThread, error) {
	rows, err := q.Query(ctx, `SELECT batch_key, created_at, until FROM muted_threads m WHERE recipient_id = $1
		AND `+muteLive+` ORDER BY created_at DESC, batch_key LIMIT $2`, recipientID, limit)
	if err != nil {
		return nil, fmt.Errorf("muted threads of %s: %w", recipientID, err)
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[MutedThread])
}

// LiveMuteCount counts the conversations a recipient has muted now.
func LiveMuteCount(ctx context.Context, q Querier, recipientID string) (int, error) {
	var n int
	err := q.QueryRow(ctx, `SELECT count(*) FROM muted_threads m WHERE recipient_id = $1 AND `+muteLive, recipientID).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("muted threads of %s: %w", recipientID, err)
	}
	return n, nil
}

// ErrMutedSince is returned by UndoUnsubscribe for the undo of a thread
// mute when the recipient has muted the thread again since: the later
// mute holds.
var ErrMutedSince = errors.New("the conversation was muted again since")

// UndoUnsubscribe puts back what an unsubscribe changed. A type the
// recipient has set to something else since is left as they set it, and
// a thread muted again since stays muted (ErrMutedSince).
func UndoUnsubscribe(ctx context.Context, q Querier, recipientID string, u Undo) error {
	if _, err := LockRecipient(ctx, q, recipientID); err != nil {
		return err
	}
	if u.Thread != "" {
		// A thread muted again by a later click is left muted: that
		// mute's created_at is not the one this undo was made for.
		var kept bool
		err := q.QueryRow(ctx, `
			WITH gone AS (DELETE FROM muted_threads WHERE recipient_id = $1 AND batch_key = $2
			              AND ($3::timestamptz IS NULL OR created_at = $3) RETURNING 1)
			SELECT NOT EXISTS (SELECT 1 FROM gone)
			   AND EXISTS (SELECT 1 FROM muted_threads m WHERE recipient_id = $1 AND batch_key = $2 AND `+muteLive+`)`,
			recipientID, u.Thread, nullTime(u.MutedAt)).Scan(&kept)
		switch {
		case err != nil:
			return fmt.Errorf("undo unsubscribe %s: %w", recipientID, err)
		case kept:
			return ErrMutedSince
		}
		return nil
	}
	if u.All {
		_, err := q.Exec(ctx, `UPDATE recipients SET unsubscribed = $2, updated_at = now() WHERE id = $1`, recipientID, u.Was)
		if err != nil {
			return fmt.Errorf("undo unsubscribe %s: %w", recipientID, err)
		}
		return nil
	}
	var keys, modes []string
	for k, m := range u.Modes {
		keys, modes = append(keys, k), append(modes, m)
	}
	_, err := q.Exec(ctx, `
		WITH prev AS (SELECT * FROM unnest($2::text[], $3::text[]) AS v(key, mode)),
		gone AS (
		    DELETE FROM type_preferences p USING prev
		    WHERE p.recipient_id = $1 AND p.type_key = prev.key AND prev.mode = '' AND p.mode = 'never')
		UPDATE type_preferences p
		SET mode = CASE WHEN prev.mode = $4 THEN t.default_mode ELSE prev.mode END, updated_at = now()
		FROM prev JOIN notification_types t ON t.key = prev.key
		WHERE p.recipient_id = $1 AND p.type_key = prev.key AND prev.mode <> '' AND p.mode = 'never'`,
		recipientID, keys, modes, typeDefault)
	if err != nil {
		return fmt.Errorf("undo unsubscribe %s: %w", recipientID, err)
	}
	return nil
}

// Encode writes u for a signed undo link.
func (u Undo) Encode() string {
	v := url.Values{}
	if u.Thread != "" {
		v.Set("thread", u.Thread)
	}
	if !u.MutedAt.IsZero() {
		v.Set("muted_at", strconv.FormatInt(u.MutedAt.UnixMicro(), 10))
	}
	if u.All {
		v.Set("all", "1")
		if u.Was {
			v.Set("was", "1")
		}
	}
	keys := make([]string, 0, len(u.Modes))
	for k := range u.Modes {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		v.Add("t", k+"="+u.Modes[k])
	}
	return v.Encode()
}

// DecodeUndo reads what Encode wrote.
func DecodeUndo(s string) (Undo, error) {
	v, err := url.ParseQuery(s)
	if err != nil {
		return Undo{}, err
	}
	at, err := parseMutedAt(v.Get("muted_at"))
	if err != nil {
		return Undo{}, err
	}
	u := Undo{All: v.Get("all") == "1", Was: v.Get("was") == "1", Thread: v.Get("thread"), MutedAt: at, Modes: map[string]string{}}
	for _, t := range v["t"] {
		k, m, _ := strings.Cut(t, "=")
		u.Modes[k] = m
	}
	return u, nil
}

// parseMutedAt reads a mute's time as an undo link carries it
// (microseconds since 1970); "", as in a link made before links carried
// it, is the zero time.
func parseMutedAt(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	us, err := strconv.ParseInt(s, 10, 64)
	if err != nil || us <= 0 {
		return time.Time{}, fmt.Errorf("bad mute time %q", s)
	}
	return time.UnixMicro(us), nil
}
