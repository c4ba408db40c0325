package db

import (
	"context"
	"fmt"
)

// RecipientsByAddress returns the active recipients with address (any
// case) who have had a batch of typeKey, for the shared-unsubscribe page
// that mails each their own link: a recipient who never got the type is
// not mailed about it.
// recipients has no index on lower(email): the page is rate limited and
// rarely used, so a scan is cheaper than an index every write maintains.
// A recipient's batches are in two indexes (anyBatch), each asked on its
// own: as one condition joined to a recipient, their OR was planned as a
// scan of other indexes whole.
func RecipientsByAddress(ctx context.Context, q Querier, address, typeKey string) ([]Recipient, error) {
	rows, err := q.Query(ctx, `SELECT id, email, locale FROM recipients r WHERE lower(email) = $1 AND active
		AND (EXISTS (SELECT 1 FROM batches b WHERE b.recipient_id = r.id AND b.type_key = $2 AND `+joinable+`)
		  OR EXISTS (SELECT 1 FROM batches b WHERE b.recipient_id = r.id AND b.type_key = $2 AND `+notJoinable+`)) LIMIT 10`, NormalizeAddress(address), typeKey)
	if err != nil {
		return nil, fmt.Errorf("recipients of %s: %w", address, err)
	}
	defer rows.Close()
	var out []Recipient
	for rows.Next() {
		var r Recipient
		if err := rows.Scan(&r.ID, &r.Email, &r.Locale); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}
