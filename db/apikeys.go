package db

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// APIKeyPrefix starts every generated key, so a leaked one is recognisable
// by secret scanners.
const APIKeyPrefix = "lull_"

// CreateAPIKey stores a new random key and returns it; only its hash is kept.
func CreateAPIKey(ctx context.Context, q Querier, name string) (string, error) {
	b := make([]byte, 32)
	rand.Read(b)
	key := APIKeyPrefix + base64.RawURLEncoding.EncodeToString(b)
	if err := AddAPIKey(ctx, q, name, key); err != nil {
		return "", err
	}
	return key, nil
}

// AddAPIKey stores a given key (the bootstrap LULL_API_KEY); adding one
// that exists is not an error.
func AddAPIKey(ctx context.Context, q Querier, name, key string) error {
	sum := sha256.Sum256([]byte(key))
	_, err := q.Exec(ctx, `
		INSERT INTO api_keys (name, hash) VALUES ($1, $2)
		ON CONFLICT (hash) DO NOTHING`, name, sum[:])
	if err != nil {
		return fmt.Errorf("add api key: %w", err)
	}
	return nil
}

// APIKeyID returns the id of the live key matching key. The lookup is by
// SHA-256 digest through a unique index, so the secret itself is never
// compared byte by byte; the digest found is compared once more in
// constant time, so no early exit anywhere depends on the key's bytes.
func APIKeyID(ctx context.Context, q Querier, key string) (int64, error) {
	if strings.TrimSpace(key) == "" {
		return 0, fmt.Errorf("api key: %w", ErrNotFound)
	}
	sum := sha256.Sum256([]byte(key))
	var id int64
	var stored []byte
	err := q.QueryRow(ctx, `SELECT id, hash FROM api_keys WHERE hash = $1 AND revoked_at IS NULL`, sum[:]).Scan(&id, &stored)
	if err != nil {
		return 0, notFound(err, "api key")
	}
	if subtle.ConstantTimeCompare(stored, sum[:]) != 1 {
		return 0, fmt.Errorf("api key: %w", ErrNotFound)
	}
	return id, nil
}

// APIKey is a stored key as operators see it: never the secret.
type APIKey struct {
	ID        int64
	Name      string
	CreatedAt time.Time
	RevokedAt *time.Time
}

// ListAPIKeys returns every key, oldest first, revoked ones included.
func ListAPIKeys(ctx context.Context, q Querier) ([]APIKey, error) {
	rows, err := q.Query(ctx, `SELECT id, name, created_at, revoked_at FROM api_keys ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("list api keys: %w", err)
	}
	keys, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (APIKey, error) {
		var k APIKey
		return k, row.Scan(&k.ID, &k.Name, &k.CreatedAt, &k.RevokedAt)
	})
	if err != nil {
		return nil, fmt.Errorf("list api keys: %w", err)
	}
	return keys, nil
}

// RevokeAPIKey stops a key from working, on every lull process within
// MemoTTL (each remembers live keys that long).
// It is named by its id (from ListAPIKeys) or by the key itself, for when
// all one has is a key that leaked. A revoked key stays revoked: adding
// it again (a bootstrap LULL_API_KEY still in the environment) does not
// bring it back. ErrNotFound means no live key matched.
func RevokeAPIKey(ctx context.Context, q Querier, idOrKey string) (int64, error) {
	sum := sha256.Sum256([]byte(idOrKey))
	var id int64
	err := q.QueryRow(ctx, `
		UPDATE api_keys SET revoked_at = now()
		WHERE (hash = $1 OR id::text = $2) AND revoked_at IS NULL
		RETURNING id`, sum[:], idOrKey).Scan(&id)
	if err != nil {
		return 0, notFound(err, "api key "+strconv.Quote(shortKey(idOrKey)))
	}
	return id, nil
}

// shortKey keeps a key out of error messages and logs: an id is shown
// as it is, anything else by its first characters only.
func shortKey(s string) string {
	if _, err := strconv.ParseInt(s, 10, 64); err == nil || len(s) <= 8 {
		return s
	}
	return s[:8] + "…"
}
