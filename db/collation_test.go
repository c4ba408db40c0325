package db_test

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/db/dbtest"
)

// keyColumns are db.KeyColumns (in byte order: the migration's list is
// compared with them sorted).
var keyColumns = db.KeyColumns

// TestKeysCompareAsBytesInALanguagesDatabase: in a database whose default
// collation is a language's (the test databases use ICU's en-US), every
// key column is in collation "C", so its indexes compare bytes and its
// order is Go's.
func TestKeysCompareAsBytesInALanguagesDatabase(t *testing.T) {
	d := dbtest.New(t)
	ctx := context.Background()
	dbtest.RequireICU(t, d.Pool)
	if got := keyCollations(t, d.Pool); !slices.Equal(got, slices.Repeat([]string{"C"}, len(keyColumns))) {
		t.Errorf("key columns' collations %v, want C for each of %v", got, keyColumns)
	}
	if _, err := d.Pool.Exec(ctx, `INSERT INTO recipients (id, email) VALUES ('a', 'a@example.com'), ('B', 'b@example.com'), ('_c', 'c@example.com')`); err != nil {
		t.Fatal(err)
	}
	rows, _ := d.Pool.Query(ctx, `SELECT id FROM recipients ORDER BY id`)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"B", "_c", "a"}; !slices.Equal(ids, want) {
		t.Errorf("recipients ordered by id: %v, want byte order %v", ids, want)
	}
}

// TestKeysMigrationLeavesACDatabaseAlone: a database whose default
// collation is "C" (or "POSIX", the same; PostgreSQL on glibc records it
// as "C") compares keys as bytes already; the migration leaves its
// columns (and indexes) as they are instead of rebuilding them, and lull
// does not warn of them.
func TestKeysMigrationLeavesACDatabaseAlone(t *testing.T) {
	for _, locale := range []string{"C", "POSIX"} {
		t.Run(locale, func(t *testing.T) {
			ctx := context.Background()
			server := dbtest.ServerURL(t)
			conn, err := pgx.Connect(ctx, server)
			if err != nil {
				t.Fatal(err)
			}
			name := fmt.Sprintf("lull_test_%s_%d", strings.ToLower(locale), os.Getpid())
			conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
			// Registered before the database is opened, so it runs after d.Close.
			t.Cleanup(func() {
				conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
				conn.Close(context.Background())
			})
			if _, err := conn.Exec(ctx, "CREATE DATABASE "+name+" TEMPLATE template0 LOCALE '"+locale+"'"); err != nil {
				t.Fatal(err)
			}
			u, _ := url.Parse(server)
			u.Path = "/" + name
			d, err := db.Open(ctx, u.String())
			if err != nil {
				t.Fatal(err)
			}
			defer d.Close()
			if err := d.Migrate(ctx); err != nil {
				t.Fatal(err)
			}
			if got := keyCollations(t, d.Pool); !slices.Equal(got, slices.Repeat([]string{"default"}, len(keyColumns))) {
				t.Errorf("key columns' collations %v in a %s database, want them left at the default", got, locale)
			}
			if cols, err := db.KeysInLanguageCollation(ctx, d.Pool); err != nil || len(cols) > 0 {
				t.Errorf("KeysInLanguageCollation in a %s database: %v, %v; want none (its default compares as bytes)", locale, cols, err)
			}
		})
	}
}

// TestKeyColumnsAreTheMigrations: db.KeyColumns, which lull checks at
// start, are the columns migration keys_compare_as_bytes puts in "C",
// which keeps its own list: a column added to one and not the other would
// be left in a language's collation unnoticed, or named in a warning that
// the migration never fixes.
func TestKeyColumnsAreTheMigrations(t *testing.T) {
	sql, err := os.ReadFile("migrations/20261129010000_keys_compare_as_bytes.up.sql")
	if err != nil {
		t.Fatal(err)
	}
	var inMigration []string
	for _, m := range regexp.MustCompile(`SELECT lull_keys_as_bytes\('(\w+)', '\{([\w,]+)\}'\)`).FindAllStringSubmatch(string(sql), -1) {
		for _, c := range strings.Split(m[2], ",") {
			inMigration = append(inMigration, m[1]+"."+c)
		}
	}
	slices.Sort(inMigration)
	if !slices.Equal(inMigration, keyColumns) {
		t.Errorf("the migration's key columns %v, db.KeyColumns %v", inMigration, keyColumns)
	}
}

// TestKeysInLanguageCollationNamesColumnsLeftInIt: key columns in a
// language's collation (a database restored from a dump of a "C" one) are
// named, in byte order, whether in the database's default or a language
// named outright, and not those in "POSIX", which compares bytes as "C"
// does; the statements KeysAsBytesSQL writes for them, run one by one as
// psql would, put them in "C".
func TestKeysInLanguageCollationNamesColumnsLeftInIt(t *testing.T) {
	d := dbtest.New(t)
	ctx := context.Background()
	dbtest.RequireICU(t, d.Pool)
	if cols, err := db.KeysInLanguageCollation(ctx, d.Pool); err != nil || len(cols) > 0 {
		t.Fatalf("after the migrations: %v, %v; want none", cols, err)
	}
	if _, err := d.Pool.Exec(ctx, `
		ALTER TABLE skips ALTER COLUMN type_key TYPE text COLLATE "default";
		ALTER TABLE batches ALTER COLUMN recipient_id TYPE text COLLATE "default", ALTER COLUMN batch_key TYPE text COLLATE "en-x-icu";
		ALTER TABLE notifications ALTER COLUMN recipient_id TYPE text COLLATE "default";
		ALTER TABLE recipients ALTER COLUMN id TYPE text COLLATE "POSIX"`); err != nil {
		t.Fatal(err)
	}
	cols, err := db.KeysInLanguageCollation(ctx, d.Pool)
	if want := []string{"batches.batch_key", "batches.recipient_id", "notifications.recipient_id", "skips.type_key"}; err != nil || !slices.Equal(cols, want) {
		t.Fatalf("KeysInLanguageCollation: %v, %v; want %v", cols, err, want)
	}
	fix := db.KeysAsBytesSQL(cols)
	if want := []string{
		`SET lock_timeout = '2s';`,
		`ALTER TABLE batches ALTER COLUMN batch_key TYPE text COLLATE "C", ALTER COLUMN recipient_id TYPE text COLLATE "C";`,
		`ALTER TABLE notifications ALTER COLUMN recipient_id TYPE text COLLATE "C";`,
		`ALTER TABLE skips ALTER COLUMN type_key TYPE text COLLATE "C";`,
	}; !slices.Equal(fix, want) {
		t.Errorf("KeysAsBytesSQL:\n%s\nwant\n%s", strings.Join(fix, "\n"), strings.Join(want, "\n"))
	}
	conn, err := d.Pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	for _, stmt := range fix {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	if cols, err := db.KeysInLanguageCollation(ctx, d.Pool); err != nil || len(cols) > 0 {
		t.Errorf("after the fix: %v, %v; want none", cols, err)
	}
	// The partitions follow their table: PostgreSQL alters them with it
	// and refuses to attach one whose collation differs, so checking the
	// partitioned table is checking them.
	var partitions int
	if err := d.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_inherits i JOIN pg_attribute a ON a.attrelid = i.inhrelid
		WHERE i.inhparent = 'notifications'::regclass AND a.attname = 'recipient_id' AND a.attcollation <> 'pg_catalog."C"'::regcollation`).Scan(&partitions); err != nil || partitions > 0 {
		t.Errorf("%d partitions of notifications not in \"C\" after the fix (%v)", partitions, err)
	}
	if fix := db.KeysAsBytesSQL(nil); fix != nil {
		t.Errorf("KeysAsBytesSQL of no columns: %q, want nothing to run", fix)
	}
}

// keyCollations reads the collation of each of keyColumns.
func keyCollations(t *testing.T, q db.Querier) []string {
	t.Helper()
	var out []string
	for _, c := range keyColumns {
		var coll string
		err := q.QueryRow(context.Background(), `
			SELECT co.collname FROM pg_attribute a JOIN pg_collation co ON co.oid = a.attcollation
			WHERE a.attrelid = split_part($1, '.', 1)::regclass AND a.attname = split_part($1, '.', 2)`, c).Scan(&coll)
		if err != nil {
			t.Fatalf("%s: %v", c, err)
		}
		out = append(out, coll)
	}
	return out
}
