package db

import (
	"context"
	"fmt"
)

// RecipientsByAddress returns the active recipients with address (any
// case), for the shared-unsubscribe page that mails each their own link.
// recipients has no index on lower(email): the page is rate limited and
// rarely used, so a scan is cheaper than an index every write maintains.
func RecipientsByAddress(ctx context.Context, q Querier, address string) ([]Recipient, error) {
	rows, err := q.Query(ctx, `SELECT id, email, locale FROM recipients WHERE lower(email) = $1 AND active LIMIT 10`, NormalizeAddress(address))
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
