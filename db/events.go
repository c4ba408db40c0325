package db

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
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
	claimed, err := ClaimEventKeys(ctx, q, []int64{apiKeyID}, []string{key})
	if err != nil || claimed[0] {
		return nil, err == nil, err
	}
	err = q.QueryRow(ctx, `SELECT response FROM event_keys WHERE api_key_id = $1 AND key = $2`, apiKeyID, key).Scan(&first)
	if err != nil {
		return nil, false, fmt.Errorf("read event key: %w", err)
	}
	return first, false, nil
}

// ClaimEventKeys reserves the idempotency keys of several requests
// (keys[i] of apiKeyIDs[i]) in one statement and reports which were
// claimed; a key used before is left as it is. Keys are claimed in order,
// so that two sets of requests sharing keys cannot deadlock.
func ClaimEventKeys(ctx context.Context, q Querier, apiKeyIDs []int64, keys []string) ([]bool, error) {
	rows, err := q.Query(ctx, `
		INSERT INTO event_keys (api_key_id, key, event_id, response)
		SELECT a, k, 0, 'null' FROM unnest($1::bigint[], $2::text[]) AS v(a, k) ORDER BY a, k COLLATE "C"
		ON CONFLICT DO NOTHING
		RETURNING api_key_id, key`, apiKeyIDs, keys)
	if err != nil {
		return nil, fmt.Errorf("claim event keys: %w", err)
	}
	type claim struct {
		a int64
		k string
	}
	claimed := map[claim]bool{}
	var c claim
	_, err = pgx.ForEachRow(rows, []any{&c.a, &c.k}, func() error {
		claimed[c] = true
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("claim event keys: %w", err)
	}
	out := make([]bool, len(keys))
	for i := range keys {
		out[i] = claimed[claim{apiKeyIDs[i], keys[i]}]
	}
	return out, nil
}

// KeyAnswer is the answer given to the request that claimed an
// idempotency key, kept for its replays.
type KeyAnswer struct {
	APIKeyID int64
	Key      string
	EventID  int64
	// Response is encoded as JSON: by its own JSON method when it has
	// one (the answer as sent, without json.Marshal checking its 11 MB
	// again for a fan-out to 100,000 recipients), else json.Marshal.
	Response any
}

// encoded is a's response as JSON.
func (a KeyAnswer) encoded() ([]byte, error) {
	if r, ok := a.Response.(interface{ JSON() ([]byte, error) }); ok {
		return r.JSON()
	}
	return json.Marshal(a.Response)
}

// RecordEventKeys stores the answers given for claimed keys, in one
// statement.
func RecordEventKeys(ctx context.Context, q Querier, answers []KeyAnswer) error {
	if len(answers) == 0 {
		return nil
	}
	n := len(answers)
	apiKeys, keys, events, responses := make([]int64, n), make([]string, n), make([]int64, n), make([]string, n)
	for i, a := range answers {
		b, err := a.encoded()
		if err != nil {
			return fmt.Errorf("record event key: %w", err)
		}
		apiKeys[i], keys[i], events[i], responses[i] = a.APIKeyID, a.Key, a.EventID, string(b)
	}
	_, err := q.Exec(ctx, `
		UPDATE event_keys k SET event_id = v.event_id, response = v.response
		FROM unnest($1::bigint[], $2::text[], $3::bigint[], $4::text[]) AS v(api_key_id, key, event_id, response)
		WHERE k.api_key_id = v.api_key_id AND k.key = v.key`, apiKeys, keys, events, responses)
	if err != nil {
		return fmt.Errorf("record event keys: %w", err)
	}
	return nil
}

// InsertEvents stores events in one statement and returns their ids, in
// the order given, and the time they were accepted.
func InsertEvents(ctx context.Context, q Querier, es []*Event) ([]int64, time.Time, error) {
	n := len(es)
	apiKeys, keys, types, batchKeys := make([]int64, n), make([]*string, n), make([]string, n), make([]string, n)
	actors, objects, data := make([]string, n), make([]string, n), make([]string, n)
	occurred, counts := make([]time.Time, n), make([]int32, n)
	for i, e := range es {
		if e.Key != "" {
			keys[i] = &es[i].Key
		}
		apiKeys[i], types[i], batchKeys[i], occurred[i], counts[i] = e.APIKeyID, e.TypeKey, e.BatchKey, e.OccurredAt, int32(e.Recipients)
		actors[i], objects[i], data[i] = jsonOr(e.Actor), jsonOr(e.Object), jsonOr(e.Data)
	}
	// Rows are inserted in the order of the list, so the ids drawn from
	// the sequence ascend in that order whatever order RETURNING uses.
	rows, err := q.Query(ctx, `
		INSERT INTO events (api_key_id, key, type_key, actor, object, data, batch_key, occurred_at, recipient_count)
		SELECT a, k, t, ac::jsonb, o::jsonb, d::jsonb, bk, oc, rc
		FROM unnest($1::bigint[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::timestamptz[], $9::int[])
		     WITH ORDINALITY AS v(a, k, t, ac, o, d, bk, oc, rc, n)
		ORDER BY n
		RETURNING id, created_at`,
		apiKeys, keys, types, actors, objects, data, batchKeys, occurred, counts)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("insert events: %w", err)
	}
	ids := make([]int64, 0, n)
	var id int64
	var created time.Time
	if _, err := pgx.ForEachRow(rows, []any{&id, &created}, func() error {
		ids = append(ids, id)
		return nil
	}); err != nil {
		return nil, time.Time{}, fmt.Errorf("insert events: %w", err)
	}
	if len(ids) != n {
		return nil, time.Time{}, fmt.Errorf("insert events: %d of %d stored", len(ids), n)
	}
	slices.Sort(ids)
	return ids, created, nil
}

// EventIDByKey finds the event apiKeyID posted with the idempotency key.
// Keys are per API key: another key's event with the same key is not
// found.
func EventIDByKey(ctx context.Context, q Querier, apiKeyID int64, key string) (int64, error) {
	var id int64
	err := q.QueryRow(ctx, `SELECT event_id FROM event_keys WHERE api_key_id = $1 AND key = $2`, apiKeyID, key).Scan(&id)
	if err != nil {
		return 0, notFound(err, "event with key "+strconv.Quote(key))
	}
	return id, nil
}

// CheckEventOwner finds event id among the events apiKeyID posted: an API
// key sees only its own events.
func CheckEventOwner(ctx context.Context, q Querier, apiKeyID, id int64) error {
	var found int64
	err := q.QueryRow(ctx, `SELECT id FROM events WHERE id = $1 AND api_key_id = $2`, id, apiKeyID).Scan(&found)
	if err != nil {
		return notFound(err, "event "+strconv.FormatInt(id, 10))
	}
	return nil
}

func jsonOr(b json.RawMessage) string {
	if len(b) == 0 {
		return "{}"
	}
	return string(b)
}
