package db

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// muteLive is the condition on muted_threads m that the mute still
// holds: for good, or until a time not yet reached. The database's clock
// decides, at ingest and at flush alike, so both agree when it ends.
const muteLive = `(m.until IS NULL OR m.until > now())`

// ErrRequiredThread is returned for a mute of a required type's thread:
// required types (security alerts) cannot be turned off, not even one
// conversation of them.
var ErrRequiredThread = errors.New("a required type's conversation cannot be muted")

// ErrNotThread is returned for a mute of a batch key that names no
// conversation: not "type+key" of a known type.
var ErrNotThread = errors.New("not a conversation")

// MuteThreadFor mutes one thread (a batch key "type+event key") for a
// recipient for d from now, or for good when d is 0, and returns the
// mute: when it was made, and when it ends (nil: never). The end is
// reckoned on the database's clock, the one ingest and flush check it
// against. Muting again replaces the
// end: the latest choice holds. It refuses a key of no known type
// (ErrNotThread) and a required type's (ErrRequiredThread), and holds the
// recipient's row lock, so that a mute and its undo at once end in one
// order or the other.
func MuteThreadFor(ctx context.Context, q Querier, recipientID, batchKey string, d time.Duration) (*Recipient, MutedThread, error) {
	if d < 0 {
		return nil, MutedThread{}, ErrNotThread
	}
	return muteThread(ctx, q, recipientID, batchKey, `date_trunc('second', now()) + $3 * interval '1 second'`, int64(d/time.Second), d > 0)
}

// MuteThreadUntil is MuteThreadFor with the end given as a time, as the
// API takes it.
func MuteThreadUntil(ctx context.Context, q Querier, recipientID, batchKey string, until time.Time) error {
	_, _, err := muteThread(ctx, q, recipientID, batchKey, `$3::timestamptz`, until, true)
	return err
}

// muteThread writes a mute ending at the SQL expression until (of $3,
// which is arg) when ends, else for good.
func muteThread(ctx context.Context, q Querier, recipientID, batchKey, until string, arg any, ends bool) (*Recipient, MutedThread, error) {
	m := MutedThread{BatchKey: batchKey}
	typ, ok := ThreadType(batchKey)
	if !ok {
		return nil, m, ErrNotThread
	}
	rec, err := LockRecipient(ctx, q, recipientID)
	if err != nil {
		return nil, m, err
	}
	var required bool
	err = q.QueryRow(ctx, `SELECT required FROM notification_types WHERE key = $1`, typ).Scan(&required)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, m, ErrNotThread
	case err != nil:
		return nil, m, fmt.Errorf("mute thread for %s: %w", recipientID, err)
	case required:
		return nil, m, ErrRequiredThread
	}
	// created_at is the clock's time, not the transaction's start, which
	// two mutes could share: an undo tells a mute by it.
	err = q.QueryRow(ctx, `INSERT INTO muted_threads (recipient_id, batch_key, until, created_at)
		VALUES ($1, $2, CASE WHEN $4 THEN `+until+` END, clock_timestamp())
		ON CONFLICT (recipient_id, batch_key) DO UPDATE SET until = excluded.until, created_at = excluded.created_at
		RETURNING created_at, until`, recipientID, batchKey, arg, ends).Scan(&m.CreatedAt, &m.Until)
	if err != nil {
		return nil, m, fmt.Errorf("mute thread for %s: %w", recipientID, err)
	}
	return rec, m, nil
}

// UnmuteAll turns every conversation a recipient muted back on.
func UnmuteAll(ctx context.Context, q Querier, recipientID string) error {
	if _, err := q.Exec(ctx, `DELETE FROM muted_threads WHERE recipient_id = $1`, recipientID); err != nil {
		return fmt.Errorf("unmute all of %s: %w", recipientID, err)
	}
	return nil
}

// maxThreadKey is the longest batch key a thread can have: a type key
// (100 bytes) and an event's batch key (255), as events are checked.
const maxThreadKey = 100 + 1 + 255

// ThreadType returns the type of a thread's batch key ("comment" for
// "comment+document:7"); ok is false for a key that names no thread.
func ThreadType(batchKey string) (typ string, ok bool) {
	typ, key, ok := strings.Cut(batchKey, "+")
	return typ, ok && typ != "" && key != "" && len(batchKey) <= maxThreadKey
}

// MutedFor returns which of the recipients ids have thread batchKey
// muted now: an event of that thread opens or extends no batch of
// theirs. For a few recipients it reads by the table's key, one probe
// each. For more (a fan-out's chunk) it reads the thread's live mutes
// through muted_threads_thread, at most mutedReadAtMost of them, and
// picks the recipients among them here: a list of 10,000 ids cost the
// server 5–9 ms a chunk to plan and hash, for a thread that nobody (or a
// handful) muted. A thread muted by more is read by the key as before.
func MutedFor(ctx context.Context, q Querier, ids []string, batchKey string) (map[string]bool, error) {
	if len(ids) > mutedReadFrom {
		found, err := mutedBy(ctx, q, batchKey, `SELECT m.recipient_id FROM muted_threads m
			WHERE m.batch_key = $1 AND `+muteLive+` LIMIT $2`, batchKey, mutedReadAtMost+1)
		if err != nil || len(found) <= mutedReadAtMost {
			return among(found, ids), err
		}
	}
	found, err := mutedBy(ctx, q, batchKey, `SELECT m.recipient_id FROM muted_threads m
		WHERE m.recipient_id = ANY($1) AND m.batch_key = $2 AND `+muteLive, ids, batchKey)
	return among(found, ids), err
}

const (
	// mutedReadFrom is how many recipients MutedFor probes one by one.
	mutedReadFrom = 1000
	// mutedReadAtMost is how many live mutes of a thread MutedFor reads
	// before it goes back to probing the recipients.
	mutedReadAtMost = 1000
)

// mutedBy runs a query of MutedFor's: the recipients it finds.
func mutedBy(ctx context.Context, q Querier, batchKey, query string, args ...any) ([]string, error) {
	rows, err := q.Query(ctx, query, args...)
	if err == nil {
		var found []string
		if found, err = pgx.CollectRows(rows, pgx.RowTo[string]); err == nil {
			return found, nil
		}
	}
	return nil, fmt.Errorf("muted recipients of %s: %w", batchKey, err)
}

// among is the set of found that are in ids.
func among(found, ids []string) map[string]bool {
	out := make(map[string]bool, len(found))
	for _, id := range found {
		out[id] = true
	}
	if len(out) == 0 {
		return out
	}
	in := make(map[string]bool, len(out))
	for _, id := range ids {
		if out[id] {
			in[id] = true
		}
	}
	return in
}

// LiveMutes returns the conversations each of the recipients ids has
// muted now, with when each mute ends (the zero time: never), for a
// simulation to honour as the engine does.
func LiveMutes(ctx context.Context, q Querier, ids []string) (map[string]map[string]time.Time, error) {
	rows, err := q.Query(ctx, `SELECT m.recipient_id, m.batch_key, m.until FROM muted_threads m
		WHERE m.recipient_id = ANY($1) AND `+muteLive, ids)
	if err != nil {
		return nil, fmt.Errorf("muted threads to simulate: %w", err)
	}
	out := map[string]map[string]time.Time{}
	var id, key string
	var until *time.Time
	_, err = pgx.ForEachRow(rows, []any{&id, &key, &until}, func() error {
		if out[id] == nil {
			out[id] = map[string]time.Time{}
		}
		out[id][key] = time.Time{}
		if until != nil {
			out[id][key] = *until
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("muted threads to simulate: %w", err)
	}
	return out, nil
}
