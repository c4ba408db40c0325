package db

import (
	"context"
	"fmt"
	"time"
)

// AuditEntry is one recorded operator action.
type AuditEntry struct {
	At         time.Time
	Operator   string
	Action     string
	ObjectType string
	ObjectID   string
	Detail     string
}

// Audit records an operator action.
func Audit(ctx context.Context, q Querier, e AuditEntry) error {
	_, err := q.Exec(ctx, `INSERT INTO audit_log (operator, action, object_type, object_id, detail) VALUES ($1, $2, $3, $4, $5)`,
		e.Operator, e.Action, e.ObjectType, e.ObjectID, e.Detail)
	if err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	return nil
}

// AuditFor lists the actions on one object, newest first.
func AuditFor(ctx context.Context, q Querier, objectType, objectID string) ([]AuditEntry, error) {
	rows, err := q.Query(ctx, `SELECT at, operator, action, object_type, object_id, detail FROM audit_log
		WHERE object_type = $1 AND object_id = $2 ORDER BY id DESC LIMIT 100`, objectType, objectID)
	if err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	defer rows.Close()
	var out []AuditEntry
	for rows.Next() {
		var e AuditEntry
		if err := rows.Scan(&e.At, &e.Operator, &e.Action, &e.ObjectType, &e.ObjectID, &e.Detail); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}
