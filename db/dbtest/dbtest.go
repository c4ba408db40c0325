// Package dbtest gives each test a database of its own on a real PostgreSQL.
//
// The server is TEST_DATABASE_URL's when set, otherwise a local cluster
// started from the machine's PostgreSQL binaries (shared by every test
// binary of a run, and reused by later runs). A template database is
// migrated once per schema version; each test then gets a fresh copy of it
// (CREATE DATABASE ... TEMPLATE), so tests run in parallel, River and all,
// without seeing each other's rows.
package dbtest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/db/localpg"
)

var (
	serverOnce sync.Once
	serverURL  string // URL of the maintenance database, "postgres"
	serverErr  error
)

// ServerURL returns the URL of the test server's maintenance database,
// starting the local cluster if needed.
func ServerURL(t testing.TB) string {
	t.Helper()
	serverOnce.Do(func() {
		if u := os.Getenv("TEST_DATABASE_URL"); u != "" {
			serverURL = u
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		c, err := localpg.Ensure(ctx, localpg.DefaultDir(projectDir(), "testpg"), true)
		if err != nil {
			serverErr = err
			return
		}
		serverURL = c.URL("postgres")
	})
	if serverErr != nil {
		t.Fatalf("test database: %v", serverErr)
	}
	return serverURL
}

// New returns a migrated, empty database of the test's own, dropped when
// the test ends.
func New(t testing.TB) *db.DB {
	t.Helper()
	u := NewURL(t)
	ctx := context.Background()
	d, err := db.Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	return d
}

// NewURL creates a migrated, empty database and returns its URL; the
// database is dropped when the test ends.
func NewURL(t testing.TB) string {
	t.Helper()
	server := ServerURL(t)
	tmpl := template(t, server)
	name := "lull_test_" + randomHex(6)
	ctx := context.Background()
	conn := connect(t, server)
	defer conn.Close(ctx)
	// CREATE DATABASE from a template fails while anyone else copies it;
	// retry briefly rather than serialise every test.
	var err error
	for i := 0; i < 50; i++ {
		_, err = conn.Exec(ctx, fmt.Sprintf("CREATE DATABASE %s TEMPLATE %s", name, tmpl))
		if err == nil || !strings.Contains(err.Error(), "being accessed by other users") {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("create test database: %v", err)
	}
	t.Cleanup(func() {
		c := connect(t, server)
		defer c.Close(ctx)
		c.Exec(ctx, fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", name))
	})
	return withDatabase(server, name)
}

var (
	templateOnce sync.Once
	templateName string
	templateErr  error
)

// template makes sure a migrated template database exists for the current
// migrations. Its name carries a hash of the migration files, so a changed
// schema gets a new template; an advisory lock keeps two test binaries from
// building the same one at once.
func template(t testing.TB, server string) string {
	templateOnce.Do(func() {
		templateName = "lull_template_icu_" + migrationsHash()
		templateErr = buildTemplate(server, templateName, true)
		if errors.Is(templateErr, errNoICU) && os.Getenv("CI") != "true" {
			fmt.Fprintf(os.Stderr, "dbtest: %v; test databases take the server's default collation\n", templateErr)
			templateName = "lull_template_" + migrationsHash()
			templateErr = buildTemplate(server, templateName, false)
		}
	})
	if templateErr != nil {
		t.Fatalf("template database: %v", templateErr)
	}
	return templateName
}

func buildTemplate(server, name string, icu bool) error {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, server)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock(4242)"); err != nil {
		return err
	}
	defer conn.Exec(ctx, "SELECT pg_advisory_unlock(4242)")
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT FROM pg_database WHERE datname = $1 AND datistemplate)", name).Scan(&exists); err != nil || exists {
		return err
	}
	conn.Exec(ctx, fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", name))
	create := "CREATE DATABASE " + name
	if icu {
		create += languageCollation
	}
	if _, err := conn.Exec(ctx, create); err != nil {
		if icu && noICU(err) {
			return fmt.Errorf("%w: %v", errNoICU, err)
		}
		return err
	}
	d, err := db.Open(ctx, withDatabase(server, name))
	if err != nil {
		return err
	}
	err = d.Migrate(ctx)
	if err == nil {
		_, err = d.Pool.Exec(ctx, invariants)
	}
	d.Close()
	if err != nil {
		return err
	}
	_, err = conn.Exec(ctx, fmt.Sprintf("ALTER DATABASE %s WITH IS_TEMPLATE true", name))
	return err
}

// languageCollation creates the template with a language's collation
// (ICU's en-US), as most production databases are (initdb takes the
// system's locale, en_US.UTF-8 or the like), not in "C", which would
// hide any query that sorts or compares keys in dictionary order where
// lull means byte order. A server without ICU (built without it, or
// PostgreSQL 14) gives errNoICU: the tests then take the server's
// default collation, with a line on stderr, except under CI, where they
// must not pass for want of it.
const languageCollation = " TEMPLATE template0 ENCODING 'UTF8' LOCALE_PROVIDER icu ICU_LOCALE 'en-US' LOCALE 'C'"

var errNoICU = errors.New("the test server cannot create a database with an ICU collation")

// noICU says whether CREATE DATABASE failed for want of ICU: a server
// built without it (feature_not_supported), PostgreSQL 14, which knows no
// LOCALE_PROVIDER (syntax_error), or a locale it does not have
// (invalid_parameter_value, undefined_object). Any other failure is the
// test server's and is reported as it is.
func noICU(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && slices.Contains([]string{"0A000", "42601", "22023", "42704"}, pe.Code)
}

// invariants are checks the test databases add to the schema: rules
// lull keeps that production does not enforce, since the previous
// release, running beside the current one during a rolling upgrade,
// does not know them (docs/operations.md). A test whose code breaks one
// fails on the statement that did.
const invariants = `
	-- An open batch is looked at by the sweep no later than it closes.
	ALTER TABLE batches ADD CONSTRAINT batches_wake_by_close CHECK (state <> 'open' OR wake_at <= closes_at);`

func migrationsHash() string {
	h := sha256.New()
	h.Write([]byte(invariants))
	h.Write([]byte(languageCollation))
	root := filepath.Join(projectDir(), "db", "migrations")
	fs.WalkDir(os.DirFS(root), ".", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := os.ReadFile(filepath.Join(root, path))
			h.Write([]byte(path))
			h.Write(b)
		}
		return nil
	})
	return hex.EncodeToString(h.Sum(nil))[:12]
}

func connect(t testing.TB, u string) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(context.Background(), u)
	if err != nil {
		t.Fatalf("connect to test server: %v", err)
	}
	return c
}

func withDatabase(server, name string) string {
	u, err := url.Parse(server)
	if err != nil {
		panic(err)
	}
	u.Path = "/" + name
	return u.String()
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// projectDir is the repository root, found from this file's location.
func projectDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(filepath.Dir(file)))
}

// LockWaiter waits until a backend of d's database waits for a lock, and
// returns its query: a test that races two transactions knows the second
// is blocked before it ends the first. It fails the test after 10 s. The
// moments two writers wait to extend a table or reach a page are not
// counted: they pass on their own, and on a loaded machine a bulk write
// (a COPY of recipients, say) meets them before the wait a test expects.
func LockWaiter(t testing.TB, d *db.DB) string {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		var query string
		err := d.Pool.QueryRow(context.Background(), `SELECT query FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND wait_event NOT IN ('extend', 'page') LIMIT 1`).Scan(&query)
		if err == nil {
			return query
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			t.Fatal(err)
		}
	}
	t.Fatal("no backend waits for a lock after 10 s")
	return ""
}

// EndWhileBlocked runs fn, which must come to wait for a lock that other
// holds; once it waits, other commits (or rolls back when commit is
// false), and EndWhileBlocked returns fn's result and the query that
// waited. It fails the test if fn still runs 30 s after other ended.
func EndWhileBlocked[T any](t testing.TB, d *db.DB, other pgx.Tx, commit bool, fn func() (T, error)) (T, error, string) {
	t.Helper()
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := fn()
		done <- result{v, err}
	}()
	waited := LockWaiter(t, d)
	end := other.Rollback
	if commit {
		end = other.Commit
	}
	if err := end(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-done:
		return r.v, r.err, waited
	case <-time.After(30 * time.Second):
		t.Fatal("still waiting 30 s after the transaction it waited for ended")
	}
	var zero T
	return zero, nil, waited
}

// CancelWhileBlocked runs fn with a context it cancels once fn waits for
// a lock, as a client going away mid-request would, and wants fn to end
// with an error soon after. what names fn in the failures.
func CancelWhileBlocked(t testing.TB, d *db.DB, what string, fn func(context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- fn(ctx) }()
	LockWaiter(t, d)
	cancel()
	select {
	case err := <-done:
		if err == nil {
			t.Fatalf("%s succeeded though its request was canceled", what)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("%s still waits 30 s after its request was canceled", what)
	}
}

// RequireICU skips a test that needs a database in a language's
// collation when q's is not ICU's (a server without ICU), except under
// CI=true, where the test databases must be ICU's, and it fails.
func RequireICU(t testing.TB, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) {
	t.Helper()
	var provider string
	if err := q.QueryRow(context.Background(), `SELECT coalesce(to_jsonb(d) ->> 'datlocprovider', 'c')
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
