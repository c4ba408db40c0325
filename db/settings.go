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

// brandPrefix namespaces the console's brand fields among the settings.
const brandPrefix = "brand."

// BrandSettings returns the brand fields saved in the console, by name
// ("product_name", "logo_url", ...). A field never saved, or saved empty,
// is absent: the environment's default applies to it.
func BrandSettings(ctx context.Context, q Querier) (map[string]string, error) {
	rows, err := q.Query(ctx, `SELECT key, value FROM settings WHERE starts_with(key, $1)`, brandPrefix)
	if err != nil {
		return nil, fmt.Errorf("load brand: %w", err)
	}
	defer rows.Close()
	fields := map[string]string{}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return nil, fmt.Errorf("load brand: %w", err)
		}
		fields[k[len(brandPrefix):]] = v
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("load brand: %w", err)
	}
	return fields, nil
}

// SaveBrandSettings stores the console's brand fields in one statement;
// an empty value removes the field, so its environment default applies
// again.
func SaveBrandSettings(ctx context.Context, q Querier, fields map[string]string) error {
	var set, unset []string
	var values []string
	for k, v := range fields {
		if v == "" {
			unset = append(unset, brandPrefix+k)
			continue
		}
		set, values = append(set, brandPrefix+k), append(values, v)
	}
	_, err := q.Exec(ctx, `
		WITH gone AS (DELETE FROM settings WHERE key = ANY($3))
		INSERT INTO settings (key, value) SELECT * FROM unnest($1::text[], $2::text[])
		ON CONFLICT (key) DO UPDATE SET value = excluded.value`, set, values, unset)
	if err != nil {
		return fmt.Errorf("save brand: %w", err)
	}
	return nil
}
