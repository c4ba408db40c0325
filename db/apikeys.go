package db

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strings"
)

// APIKeyPrefix starts every generated key, so a leaked one is recognisable
// by secret scanners.
const APIKeyPrefix = "lull_"

// CreateAPIKey stores a new random key and returns it; only its hash is kept.
func (d *DB) CreateAPIKey(ctx context.Context, name string) (string, error) {
	b := make([]byte, 32)
	rand.Read(b)
	key := APIKeyPrefix + base64.RawURLEncoding.EncodeToString(b)
	if err := d.AddAPIKey(ctx, name, key); err != nil {
		return "", err
	}
	return key, nil
}

// AddAPIKey stores a given key (the bootstrap LULL_API_KEY); adding one
// that exists is not an error.
func (d *DB) AddAPIKey(ctx context.Context, name, key string) error {
	sum := sha256.Sum256([]byte(key))
	_, err := d.Pool.Exec(ctx, `
		INSERT INTO api_keys (name, hash) VALUES ($1, $2)
		ON CONFLICT (hash) DO NOTHING`, name, sum[:])
	if err != nil {
		return fmt.Errorf("add api key: %w", err)
	}
	return nil
}

// APIKeyID returns the id of the live key matching key. The lookup is by
// SHA-256 digest through a unique index, so no secret is compared byte by
// byte and timing reveals nothing about stored keys.
func (d *DB) APIKeyID(ctx context.Context, key string) (int64, error) {
	if strings.TrimSpace(key) == "" {
		return 0, fmt.Errorf("api key: %w", ErrNotFound)
	}
	sum := sha256.Sum256([]byte(key))
	var id int64
	err := d.Pool.QueryRow(ctx, `SELECT id FROM api_keys WHERE hash = $1 AND revoked_at IS NULL`, sum[:]).Scan(&id)
	if err != nil {
		return 0, notFound(err, "api key")
	}
	return id, nil
}

// RevokeAPIKey stops a key from working.
func (d *DB) RevokeAPIKey(ctx context.Context, id int64) error {
	_, err := d.Pool.Exec(ctx, `UPDATE api_keys SET revoked_at = now() WHERE id = $1`, id)
	return err
}
