package db

import (
	"context"
	"fmt"
	"slices"
	"strings"
)

// KeyColumns are the columns holding recipient ids, type keys and batch
// keys, as "table.column" in byte order: migration keys_compare_as_bytes
// gives them collation "C" in a database whose default collation is a
// language's (the migration keeps its own list, as a migration must).
var KeyColumns = []string{
	"batches.batch_key", "batches.recipient_id", "batches.type_key",
	"event_keys.key",
	"events.batch_key", "events.key", "events.type_key",
	"feed_watchers.recipient_id",
	"muted_threads.batch_key", "muted_threads.recipient_id",
	"notification_types.key",
	"notifications.recipient_id", "notifications.type_key",
	"recipient_seen.recipient_id",
	"recipients.id",
	"skips.recipient_id", "skips.type_key",
	"type_preferences.recipient_id", "type_preferences.type_key",
}

// KeysInLanguageCollation returns the key columns that compare through a
// language's collation, as "table.column" in byte order: none once the
// migration has run, unless the database was restored from a dump of one
// whose default collation was "C" (the dump names no collation for them,
// and the migration, recorded as applied, does not run again). Such
// columns work, but every fan-out pays 15–25% more for their indexes.
func KeysInLanguageCollation(ctx context.Context, q Querier) ([]string, error) {
	// pg_database is read as JSON since PostgreSQL 14 has no
	// datlocprovider; a database whose default compares as bytes has
	// nothing to change.
	rows, err := q.Query(ctx, `
		SELECT k.tc
		FROM unnest($1::text[]) AS k(tc)
		JOIN pg_attribute a ON a.attrelid = to_regclass(split_part(k.tc, '.', 1)) AND a.attname = split_part(k.tc, '.', 2)
		WHERE a.attcollation NOT IN ('pg_catalog."C"'::regcollation, 'pg_catalog."POSIX"'::regcollation)
		  AND NOT EXISTS (SELECT FROM pg_database d WHERE datname = current_database()
		      AND (to_jsonb(d) ->> 'datlocprovider' = 'b'
		           OR coalesce(to_jsonb(d) ->> 'datlocprovider', 'c') = 'c' AND datcollate IN ('C', 'POSIX')))`, KeyColumns)
	if err != nil {
		return nil, fmt.Errorf("key collations: %w", err)
	}
	out, err := collectStrings(rows)
	if err != nil {
		return nil, fmt.Errorf("key collations: %w", err)
	}
	slices.Sort(out)
	return out, nil
}

// KeysAsBytesSQL is the statements that give columns ("table.column", as
// KeysInLanguageCollation returns them) collation "C", one a line, to be
// run one by one (psql -f, or pasted into psql; not psql -c, which runs
// them as one transaction holding every table at once, where an event
// ingested meanwhile can deadlock with them, as migration
// keys_compare_as_bytes found). First a lock timeout, as in the
// migration: an ALTER TABLE waiting for its lock holds up every request
// that touches the table, so one that cannot have it within 2 s fails
// instead, and is run again later. Then one ALTER TABLE a table, each
// rebuilding that table's indexes on them (and, for a partitioned table,
// its partitions') while it holds the table.
func KeysAsBytesSQL(columns []string) []string {
	if len(columns) == 0 {
		return nil
	}
	stmts := []string{"SET lock_timeout = '2s';"}
	var table string
	var alters []string
	flush := func() {
		if len(alters) > 0 {
			stmts = append(stmts, "ALTER TABLE "+table+" "+strings.Join(alters, ", ")+";")
		}
	}
	for _, tc := range columns {
		t, c, _ := strings.Cut(tc, ".")
		if t != table {
			flush()
			table, alters = t, nil
		}
		alters = append(alters, fmt.Sprintf(`ALTER COLUMN %s TYPE text COLLATE "C"`, c))
	}
	flush()
	return stmts
}
