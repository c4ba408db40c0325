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

// MuteThreadUntil mutes one thread (a batch key "type+event key") for a
// recipient until the given time, or for good when until is nil. Muting
// it again replaces the end time: the latest choice holds. It refuses a
// key of no known type (ErrNotThread) and a required type's
// (ErrRequiredThread), holding the recipient's row lock so that a mute
// and its undo at once end in one order or the other.
func MuteThreadUntil(ctx context.Context, q Querier, recipientID, batchKey string, until *time.Time) (*Recipient, error) {
	typ, key, ok := strings.Cut(batchKey, "+")
	if !ok || typ == "" || key == "" {
		return nil, ErrNotThread
	}
	rec, err := LockRecipient(ctx, q, recipientID)
	if err != nil {
		return nil, err
	}
	var required bool
	err = q.QueryRow(ctx, `SELECT required FROM notification_types WHERE key = $1`, typ).Scan(&required)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, ErrNotThread
	case err != nil:
		return nil, fmt.Errorf("mute thread for %s: %w", recipientID, err)
	case required:
		return nil, ErrRequiredThread
	}
	_, err = q.Exec(ctx, `INSERT INTO muted_threads (recipient_id, batch_key, until) VALUES ($1, $2, $3)
		ON CONFLICT (recipient_id, batch_key) DO UPDATE SET until = excluded.until, created_at = now()`,
		recipientID, batchKey, until)
	if err != nil {
		return nil, fmt.Errorf("mute thread for %s: %w", recipientID, err)
	}
	return rec, nil
}

// MutedFor returns which of the recipients ids have thread batchKey
// muted now: an event of that thread opens or extends no batch of
// theirs. It reads by the table's key, one probe per recipient.
func MutedFor(ctx context.Context, q Querier, ids []string, batchKey string) (map[string]bool, error) {
	rows, err := q.Query(ctx, `SELECT m.recipient_id FROM muted_threads m
		WHERE m.recipient_id = ANY($1) AND m.batch_key = $2 AND `+muteLive, ids, batchKey)
	if err != nil {
		return nil, fmt.Errorf("muted recipients of %s: %w", batchKey, err)
	}
	found, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("muted recipients of %s: %w", batchKey, err)
	}
	out := make(map[string]bool, len(found))
	for _, id := range found {
		out[id] = true
	}
	return out, nil
}
