package db

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// dayPartitions is the FROM clause of a query over the day partitions (c)
// of partitioned tables (p), and partitionDay a partition's first day.
const (
	dayPartitions = `FROM pg_inherits i
		JOIN pg_class c ON c.oid = i.inhrelid
		JOIN pg_class p ON p.oid = i.inhparent
		WHERE c.relname ~ '_p[0-9]{8}$'`
	partitionDay = `to_date(right(c.relname, 8), 'YYYYMMDD')`
)

// MaintainPartitions creates day partitions a week ahead and drops the
// day partitions of events and notifications that end before cutoff. It
// returns the names of the dropped tables.
//
// A day whose notifications still wait in an open or flushing batch is
// kept, whatever its age: a weekly digest, or a cooldown without a
// maximum wait, can hold a notification longer than the retention, and
// dropping it would lose an acknowledged event without a trace. The day
// goes at the first run after its last batch is sent or canceled.
//
// Each table's partitions are created by a statement, and so (q being
// the pool) a transaction, of its own: creating a partition locks its table
// exclusively until the transaction ends, and holding events while
// waiting for notifications deadlocked with a read joining notifications
// to events (the feed), which holds notifications while it waits for
// events.
func MaintainPartitions(ctx context.Context, q Querier, cutoff time.Time) ([]string, error) {
	for _, table := range []string{"events", "notifications"} {
		if _, err := q.Exec(ctx, `SELECT lull_ensure_partitions_of($1, 7)`, table); err != nil {
			return nil, fmt.Errorf("create partitions of %s: %w", table, err)
		}
	}
	// Day partitions are named <table>_pYYYYMMDD; the name's date is the
	// partition's first day (UTC), so a partition is wholly older than the
	// cutoff when its day plus one is not after it.
	rows, err := q.Query(ctx, `SELECT c.relname `+dayPartitions+`
		  AND p.relname IN ('events', 'notifications') AND `+partitionDay+` + 1 <= ($1 AT TIME ZONE 'UTC')::date`, cutoff)
	if err != nil {
		return nil, fmt.Errorf("find old partitions: %w", err)
	}
	names, err := collectStrings(rows)
	if err != nil {
		return nil, err
	}
	pinned, err := pinnedDays(ctx, q, names)
	if err != nil {
		return nil, err
	}
	var dropped []string
	// The names come from pg_class; pgx.Identifier quotes them as SQL
	// identifiers, which no server setting reads differently.
	for _, n := range names {
		if pinned[n[len(n)-8:]] {
			continue
		}
		dropped = append(dropped, n)
		if _, err := q.Exec(ctx, `DROP TABLE IF EXISTS `+pgx.Identifier{n}.Sanitize()); err != nil {
			return nil, fmt.Errorf("drop %s: %w", n, err)
		}
	}
	return dropped, nil
}

// pinnedDays returns the days (YYYYMMDD) among the partitions named whose
// notifications are in a batch not yet sent or canceled. The query starts
// from the unsent batches, which are few, and probes each day's partition
// by its batch_id index. The states are two conditions, not an IN list:
// open batches have an index of their own (batches_open) and the others
// are in batches_state, and PostgreSQL matches partial indexes' conditions
// to an OR of the two, not to a list.
func pinnedDays(ctx context.Context, q Querier, names []string) (map[string]bool, error) {
	pinned := map[string]bool{}
	for _, n := range names {
		if !strings.HasPrefix(n, "notifications_p") {
			continue
		}
		var held bool
		err := q.QueryRow(ctx, fmt.Sprintf(`
			SELECT EXISTS (
			    SELECT 1 FROM batches b
			    WHERE (b.state = 'open' OR b.state = 'flushing')
			      AND EXISTS (SELECT 1 FROM %s n WHERE n.batch_id = b.id))`, pgx.Identifier{n}.Sanitize())).Scan(&held)
		if err != nil {
			return nil, fmt.Errorf("check %s for unsent notifications: %w", n, err)
		}
		if held {
			pinned[n[len(n)-8:]] = true
		}
	}
	return pinned, nil
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
