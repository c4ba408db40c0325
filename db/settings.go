package db

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
)

// Secret returns the key for sessions and signed links stored in the
// database, creating it on first use. Every lull process on one database
// thus signs with the same key without anyone configuring one.
func Secret(ctx context.Context, q Querier) (string, error) {
	b := make([]byte, 32)
	rand.Read(b)
	var secret string
	// The no-op update makes RETURNING yield the stored value on conflict.
	err := q.QueryRow(ctx, `
		INSERT INTO settings (key, value) VALUES ('secret', $1)
		ON CONFLICT (key) DO UPDATE SET value = settings.value
		RETURNING value`, hex.EncodeToString(b)).Scan(&secret)
	if err != nil {
		return "", fmt.Errorf("load secret: %w", err)
	}
	return secret, nil
}
