package db_test

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/db/dbtest"
)

// keyColumns are db.KeyColumns as "table.column", in byte order.
var keyColumns = func() []string {
	var out []string
	for table, cols := range db.KeyColumns {
		for _, c := range cols {
			out = append(out, table+"."+c)
		}
	}
	slices.Sort(out)
	return out
}()

// TestKeysCompareAsBytesInALanguagesDatabase: in a database whose default
// collation is a language's (the test databases use ICU's en-US), every
// key column is in collation "C", so its indexes compare bytes and its
// order is Go's.
func TestKeysCompareAsBytesInALanguagesDatabase(t *testing.T) {
	d := dbtest.New(t)
	ctx := context.Background()
	requireICU(t, d)
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
// collation is "C" compares keys as bytes already; the migration leaves
// its columns (and indexes) as they are instead of rebuilding them.
func TestKeysMigrationLeavesACDatabaseAlone(t *testing.T) {
	ctx := context.Background()
	server := dbtest.ServerURL(t)
	conn, err := pgx.Connect(ctx, server)
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("lull_test_c_%d", os.Getpid())
	conn.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	// Registered before the database is opened, so it runs after d.Close.
	t.Cleanup(func() {
		conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
		conn.Close(context.Background())
	})
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name+" TEMPLATE template0 LOCALE 'C'"); err != nil {
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
		t.Errorf("key columns' collations %v in a C database, want them left at the default", got)
	}
	if cols, err := db.KeysInLanguageCollation(ctx, d.Pool); err != nil || len(cols) > 0 {
		t.Errorf("KeysInLanguageCollation in a C database: %v, %v; want none (its default compares as bytes)", cols, err)
	}
}

// TestKeysInLanguageCollationNamesColumnsLeftInIt: key columns in a
// language's collation (a database restored from a dump of a "C" one) are
// named, in byte order, and the statements KeysAsBytesSQL writes for them
// put them in "C".
func TestKeysInLanguageCollationNamesColumnsLeftInIt(t *testing.T) {
	d := dbtest.New(t)
	ctx := context.Background()
	requireICU(t, d)
	if cols, err := db.KeysInLanguageCollation(ctx, d.Pool); err != nil || len(cols) > 0 {
		t.Fatalf("after the migrations: %v, %v; want none", cols, err)
	}
	if _, err := d.Pool.Exec(ctx, `
		ALTER TABLE skips ALTER COLUMN type_key TYPE text COLLATE "default";
		ALTER TABLE batches ALTER COLUMN recipient_id TYPE text COLLATE "default", ALTER COLUMN batch_key TYPE text COLLATE "en-x-icu"`); err != nil {
		t.Fatal(err)
	}
	cols, err := db.KeysInLanguageCollation(ctx, d.Pool)
	if want := []string{"batches.batch_key", "batches.recipient_id", "skips.type_key"}; err != nil || !slices.Equal(cols, want) {
		t.Fatalf("KeysInLanguageCollation: %v, %v; want %v", cols, err, want)
	}
	fix := db.KeysAsBytesSQL(cols)
	if want := `ALTER TABLE batches ALTER COLUMN batch_key TYPE text COLLATE "C", ALTER COLUMN recipient_id TYPE text COLLATE "C"; ` +
		`ALTER TABLE skips ALTER COLUMN type_key TYPE text COLLATE "C";`; fix != want {
		t.Errorf("KeysAsBytesSQL:\n%s\nwant\n%s", fix, want)
	}
	if _, err := d.Pool.Exec(ctx, fix); err != nil {
		t.Fatal(err)
	}
	if cols, err := db.KeysInLanguageCollation(ctx, d.Pool); err != nil || len(cols) > 0 {
		t.Errorf("after the fix: %v, %v; want none", cols, err)
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

// requireICU skips a test outside CI when the test database is not in an
// ICU collation (a server without ICU), and fails it under CI.
func requireICU(t *testing.T, d *db.DB) {
	t.Helper()
	var provider string
	if err := d.Pool.QueryRow(context.Background(), `SELECT coalesce(to_jsonb(d) ->> 'datlocprovider', 'c')
		FROM pg_database d WHERE datname = current_database()`).Scan(&provider); err != nil {
		t.Fatal(err)
	}
	if provider != "i" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the test database has collation provider %q, want ICU", provider)
		}
		t.Skip("the test server cannot create ICU databases")
	}
}
