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

// keyColumns are dbtest.KeyColumns as "table.column", in byte order.
var keyColumns = func() []string {
	var out []string
	for table, cols := range dbtest.KeyColumns {
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
	var provider, collate string
	if err := d.Pool.QueryRow(ctx, `SELECT coalesce(to_jsonb(d) ->> 'datlocprovider', 'c'), datcollate
		FROM pg_database d WHERE datname = current_database()`).Scan(&provider, &collate); err != nil {
		t.Fatal(err)
	}
	if provider != "i" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the test database has collation provider %q, want ICU", provider)
		}
		t.Skip("the test server cannot create ICU databases")
	}
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
