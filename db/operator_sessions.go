package db

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"time"
)

// CreateOperatorSession starts a session for an operator who has just
// logged in and returns its token, for the session cookie. Only the
// token's SHA-256 is stored, so the table cannot be used to take over a
// session. The operator's expired sessions are removed on the way.
func CreateOperatorSession(ctx context.Context, q Querier, operatorID int64, ttl time.Duration) (string, error) {
	b := make([]byte, 32)
	rand.Read(b)
	token := base64.RawURLEncoding.EncodeToString(b)
	sum := sha256.Sum256([]byte(token))
	_, err := q.Exec(ctx, `
		WITH gone AS (DELETE FROM operator_sessions WHERE operator_id = $1 AND expires_at <= now())
		INSERT INTO operator_sessions (token_hash, operator_id, expires_at) VALUES ($2, $1, now() + $3::interval)`,
		operatorID, sum[:], fmt.Sprintf("%d milliseconds", ttl.Milliseconds()))
	if err != nil {
		return "", fmt.Errorf("create operator session: %w", err)
	}
	return token, nil
}

// OperatorBySession returns the operator of a live session, or ErrNotFound
// for a token that was never issued, has expired, or was ended.
func OperatorBySession(ctx context.Context, q Querier, token string) (Operator, error) {
	if token == "" {
		return Operator{}, fmt.Errorf("operator session: %w", ErrNotFound)
	}
	sum := sha256.Sum256([]byte(token))
	var op Operator
	err := q.QueryRow(ctx, `
		SELECT o.id, o.email FROM operator_sessions s JOIN operators o ON o.id = s.operator_id
		WHERE s.token_hash = $1 AND s.expires_at > now()`, sum[:]).Scan(&op.ID, &op.Email)
	if err != nil {
		return Operator{}, notFound(err, "operator session")
	}
	return op, nil
}

// EndOperatorSession ends one session (logout). Ending one that does not
// exist is not an error.
func EndOperatorSession(ctx context.Context, q Querier, token string) error {
	sum := sha256.Sum256([]byte(token))
	if _, err := q.Exec(ctx, `DELETE FROM operator_sessions WHERE token_hash = $1`, sum[:]); err != nil {
		return fmt.Errorf("end operator session: %w", err)
	}
	return nil
}
