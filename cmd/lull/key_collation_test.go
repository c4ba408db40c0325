package main

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/lull-dev/lull/db/dbtest"
)

// TestMigrateWarnsOfKeysInALanguagesCollation: a database restored from
// a dump of a "C" one has its key columns in the language's collation
// and the migration that fixes them recorded as applied; lull says so on
// start, with the statement to run, and is silent once they are fixed.
func TestMigrateWarnsOfKeysInALanguagesCollation(t *testing.T) {
	t.Parallel()
	url := dbtest.NewURL(t)
	env := map[string]string{"DATABASE_URL": url}
	migrate := func() string {
		var out, errOut bytes.Buffer
		if err := run(context.Background(), []string{"migrate"}, func(k string) string { return env[k] }, &out, &errOut); err != nil {
			t.Fatalf("lull migrate: %v\n%s", err, errOut.String())
		}
		return errOut.String()
	}
	if out := migrate(); strings.Contains(out, "key columns") {
		t.Fatalf("a warning after a clean migration:\n%s", out)
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var provider string
	if err := conn.QueryRow(ctx, `SELECT coalesce(to_jsonb(d) ->> 'datlocprovider', 'c') FROM pg_database d WHERE datname = current_database()`).Scan(&provider); err != nil {
		t.Fatal(err)
	}
	if provider != "i" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the test database has collation provider %q, want ICU", provider)
		}
		t.Skip("the test server cannot create ICU databases")
	}
	if _, err := conn.Exec(ctx, `ALTER TABLE notifications ALTER COLUMN recipient_id TYPE text COLLATE "default"`); err != nil {
		t.Fatal(err)
	}
	out := migrate()
	if !strings.Contains(out, "level=WARN") || !strings.Contains(out, "columns=notifications.recipient_id") ||
		!strings.Contains(out, `ALTER TABLE notifications ALTER COLUMN recipient_id TYPE text COLLATE \"C\";`) {
		t.Fatalf("no warning naming notifications.recipient_id and its fix:\n%s", out)
	}
}
