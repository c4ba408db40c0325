package db

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Event is one thing that happened, as the host application posted it.
type Event struct {
	ID          int64
	APIKeyID    int64
	Key         string
	TypeKey     string
	Actor       json.RawMessage
	Object      json.RawMessage
	Data        json.RawMessage
	BatchKey    string
	OccurredAt  time.Time
	Recipients  int
	RetractedAt *time.Time
}

// ClaimEventKey reserves an idempotency key for this request. When the key
// was used before it returns the first answer and ok = false. Two requests
// with the same key at once serialise on the primary key: the second waits
// for the first to commit, then receives its answer.
func ClaimEventKey(ctx context.Context, q Querier, apiKeyID int64, key string) (first json.RawMessage, ok bool, err error) {
	tag, err := q.Exec(ctx, `
		INSERT INTO event_keys (api_key_id, key, event_id, response) VALUES ($1, $2, 0, 'null')
		ON CONFLICT DO NOTHING`, apiKeyID, key)
	if err != nil {
		return nil, false, fmt.Errorf("claim event key: %w", err)
	}
	if tag.RowsAffected() == 1 {
		return nil, true, nil
	}
	err = q.QueryRow(ctx, `SELECT response FROM event_keys WHERE api_key_id = $1 AND key = $2`, apiKeyID, key).Scan(&first)
	if err != nil {
		return nil, false, fmt.Errorf("read event key: %w", err)
	}
	return first, false, nil
}

// RecordEventKey stores the answer given for a claimed key.
func RecordEventKey(ctx context.Context, q Querier, apiKeyID int64, key string, eventID int64, response any) error {
	_, err := q.Exec(ctx, `UPDATE event_keys SET event_id = $3, response = $4 WHERE api_key_id = $1 AND key = $2`,
		apiKeyID, key, eventID, response)
	if err != nil {
		return fmt.Errorf("record event key: %w", err)
	}
	return nil
}

// InsertEvent stores an event and returns its id and acceptance time.
func InsertEvent(ctx context.Context, q Querier, e *Event) (int64, time.Time, error) {
	var id int64
	var created time.Time
	var key *string
	if e.Key != "" {
		key = &e.Key
	}
	err := q.QueryRow(ctx, `
		INSERT INTO events (api_key_id, key, type_key, actor, object, data, batch_key, occurred_at, recipient_count)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
		RETURNING id, created_at`,
		e.APIKeyID, key, e.TypeKey, jsonOr(e.Actor), jsonOr(e.Object), jsonOr(e.Data), e.BatchKey, e.OccurredAt, e.Recipients,
	).Scan(&id, &created)
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("insert event: %w", err)
	}
	return id, created, nil
}

// FindEvent resolves an id or an idempotency key of apiKeyID to an event id.
func FindEvent(ctx context.Context, q Querier, apiKeyID int64, idOrKey string) (int64, error) {
	var id int64
	err := q.QueryRow(ctx, `SELECT event_id FROM event_keys WHERE api_key_id = $1 AND key = $2`, apiKeyID, idOrKey).Scan(&id)
	if err == nil {
		return id, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("find event: %w", err)
	}
	err = q.QueryRow(ctx, `SELECT id FROM events WHERE id::text = $1 AND api_key_id = $2`, idOrKey, apiKeyID).Scan(&id)
	if err != nil {
		return 0, notFound(err, "event "+idOrKey)
	}
	return id, nil
}

func jsonOr(b json.RawMessage) any {
	if len(b) == 0 {
		return "{}"
	}
	return string(b)
}
