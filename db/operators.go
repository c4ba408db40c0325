package db

import (
	"context"
	"fmt"
	"strings"

	"golang.org/x/crypto/bcrypt"
)

// Operator is someone who may use the operator console.
type Operator struct {
	ID    int64
	Email string
}

// UpsertOperator creates an operator or sets a new password for one. A
// new password ends the operator's sessions everywhere, so someone who
// learnt the old one and logged in is out.
func UpsertOperator(ctx context.Context, q Querier, email, password string) error {
	if len(password) < 8 {
		return fmt.Errorf("operator password must be at least 8 characters")
	}
	// The bootstrap operator's password is set again at every start; when
	// it is unchanged, nothing is written and nobody is logged out.
	if passwordUnchanged(ctx, q, email, password) {
		return nil
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.DefaultCost)
	if err != nil {
		return fmt.Errorf("hash password: %w", err)
	}
	_, err = q.Exec(ctx, `
		WITH op AS (
			INSERT INTO operators (email, password_hash) VALUES ($1, $2)
			ON CONFLICT (email) DO UPDATE SET password_hash = EXCLUDED.password_hash
			RETURNING id)
		DELETE FROM operator_sessions WHERE operator_id = (SELECT id FROM op)`,
		strings.ToLower(strings.TrimSpace(email)), string(hash))
	if err != nil {
		return fmt.Errorf("save operator: %w", err)
	}
	return nil
}

// Authenticate checks an operator's password. An unknown email costs the
// same bcrypt comparison as a wrong password, so timing does not reveal
// which operators exist.
func Authenticate(ctx context.Context, q Querier, email, password string) (Operator, error) {
	op := Operator{Email: strings.ToLower(strings.TrimSpace(email))}
	hash := "$2a$10$7EqJtq98hPqEX7fNZaFWoOhi5BWX4Z2xq0Z0Hc5xY0nQ2fF0m9u1C"
	err := q.QueryRow(ctx, `SELECT id, password_hash FROM operators WHERE email = $1`, op.Email).Scan(&op.ID, &hash)
	if err != nil && !strings.Contains(err.Error(), "no rows") {
		return Operator{}, fmt.Errorf("authenticate: %w", err)
	}
	if bcrypt.CompareHashAndPassword([]byte(hash), []byte(password)) != nil || op.ID == 0 {
		return Operator{}, fmt.Errorf("authenticate: %w", ErrNotFound)
	}
	return op, nil
}

// passwordUnchanged reports whether email's operator already has password.
func passwordUnchanged(ctx context.Context, q Querier, email, password string) bool {
	var hash string
	err := q.QueryRow(ctx, `SELECT password_hash FROM operators WHERE email = $1`, strings.ToLower(strings.TrimSpace(email))).Scan(&hash)
	return err == nil && bcrypt.CompareHashAndPassword([]byte(hash), []byte(password)) == nil
}
