package db

import (
	"context"
	"fmt"
	"time"
)

// MaintainPartitions creates day partitions a week ahead and drops the
// day partitions of events and notifications that end before cutoff. It
// returns the names of the dropped tables.
func MaintainPartitions(ctx context.Context, q Querier, cutoff time.Time) ([]string, error) {
	if _, err := q.Exec(ctx, `SELECT lull_ensure_partitions(7)`); err != nil {
		return nil, fmt.Errorf("create partitions: %w", err)
	}
	// Day partitions are named <table>_pYYYYMMDD; the name's date is the
	// partition's first day (UTC), so a partition is wholly older than the
	// cutoff when its day plus one is not after it.
	rows, err := q.Query(ctx, `
		SELECT c.relname FROM pg_inherits i
		JOIN pg_class c ON c.oid = i.inhrelid
		JOIN pg_class p ON p.oid = i.inhparent
		WHERE p.relname IN ('events', 'notifications') AND c.relname ~ '_p[0-9]{8}$'
		  AND to_date(right(c.relname, 8), 'YYYYMMDD') + 1 <= ($1 AT TIME ZONE 'UTC')::date`, cutoff)
	if err != nil {
		return nil, fmt.Errorf("find old partitions: %w", err)
	}
	names, err := collectStrings(rows)
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		if _, err := q.Exec(ctx, fmt.Sprintf(`DROP TABLE IF EXISTS %q`, n)); err != nil {
			return nil, fmt.Errorf("drop %s: %w", n, err)
		}
	}
	return names, nil
}

func collectStrings(rows interface {
	Next() bool
	Scan(...any) error
	Err() error
	Close()
}) ([]string, error) {
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}
