package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/lull-dev/lull/db/dbtest"
)

// TestMigrateWarnsOfKeysInALanguagesCollation: a database restored from
// a dump of a "C" one has its key columns in the language's collation
// and the migration that fixes them recorded as applied; lull migrate
// says so, with the statements to run written as they are (a text log
// quotes them, and psql reads the quoted \"C\" as a command), and is
// silent once they have run.
func TestMigrateWarnsOfKeysInALanguagesCollation(t *testing.T) {
	t.Parallel()
	url := dbtest.NewURL(t)
	env := map[string]string{"DATABASE_URL": url}
	migrate := func() (stdout, stderr string) {
		var out, errOut bytes.Buffer
		if err := run(context.Background(), []string{"migrate"}, func(k string) string { return env[k] }, &out, &errOut); err != nil {
			t.Fatalf("lull migrate: %v\n%s", err, errOut.String())
		}
		return out.String(), errOut.String()
	}
	if out, logs := migrate(); strings.Contains(logs, "key columns") || out != "migrations applied\n" {
		t.Fatalf("a warning after a clean migration:\n%s\n%s", out, logs)
	}
	conn := downgradeRecipientIDs(t, url)
	out, logs := migrate()
	if !strings.Contains(logs, "level=WARN") || !strings.Contains(logs, "columns=notifications.recipient_id") {
		t.Fatalf("no warning naming notifications.recipient_id:\n%s", logs)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	var stmts []string
	for _, l := range lines[1:] {
		if !strings.HasPrefix(l, "--") {
			stmts = append(stmts, l)
		}
	}
	if want := `ALTER TABLE notifications ALTER COLUMN recipient_id TYPE text COLLATE "C";`; len(stmts) != 2 || stmts[1] != want {
		t.Fatalf("lull migrate printed\n%s\nwant a lock timeout, then %s", out, want)
	}
	ctx := context.Background()
	for _, stmt := range stmts {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	if out, logs := migrate(); strings.Contains(logs, "key columns") || out != "migrations applied\n" {
		t.Fatalf("a warning once the statements ran:\n%s\n%s", out, logs)
	}
}

// TestServeWarnsOfKeysInALanguagesCollation: lull serve gives the same
// warning at start, and starts; in a JSON log, "fix" reads back as the
// statements to run.
func TestServeWarnsOfKeysInALanguagesCollation(t *testing.T) {
	t.Parallel()
	url := dbtest.NewURL(t)
	downgradeRecipientIDs(t, url)
	_, logs := bootLogged(t, "serve", map[string]string{"DATABASE_URL": url, "LULL_ADDR": "127.0.0.1:0", "LULL_LOG_FORMAT": "json"})
	for _, line := range strings.Split(logs.String(), "\n") {
		var rec struct{ Level, Msg, Columns, Fix string }
		if json.Unmarshal([]byte(line), &rec) != nil || !strings.HasPrefix(rec.Msg, "key columns") {
			continue
		}
		if want := `SET lock_timeout = '2s'; ALTER TABLE notifications ALTER COLUMN recipient_id TYPE text COLLATE "C";`; rec.Level != "WARN" ||
			rec.Columns != "notifications.recipient_id" || rec.Fix != want {
			t.Errorf("warning %+v, want columns notifications.recipient_id and fix %s", rec, want)
		}
		return
	}
	t.Fatalf("no warning of the key columns at start:\n%s", logs.String())
}

// downgradeRecipientIDs puts notifications.recipient_id back in the
// database's collation, as a restore from a dump of a "C" database
// leaves it, and returns a connection to the database. The test is
// skipped outside CI when the database's collation is not ICU's.
func downgradeRecipientIDs(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	dbtest.RequireICU(t, conn)
	if _, err := conn.Exec(ctx, `ALTER TABLE notifications ALTER COLUMN recipient_id TYPE text COLLATE "default"`); err != nil {
		t.Fatal(err)
	}
	return conn
}
