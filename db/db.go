// Package db holds lull's storage: the schema and its migrations, the
// models, and the queries, one file per aggregate: recipients.go (people
// and their choices), types.go, events.go, batches.go (batches, their
// items, ingest's joins and the flush's locks), deliveries.go (sends,
// attempts, skips, the outbox), feed.go, simulate.go (what a replay
// reads), and the operator's side: operators.go, operator_sessions.go,
// apikeys.go, settings.go, audit.go, console.go (the dashboard's counts),
// partitions.go and prune.go (retention). db.go, querier.go and
// migrate.go are the connection.
//
// One pgx pool serves everything, with two handles on it, and which one
// a query takes follows one rule:
//
//   - pgx (a Querier: the pool, a pgx.Tx or a Pipeline) for every write,
//     for the set-based hot paths (ingest, flush, feed, batches,
//     deliveries), and for any read made under a write's lock. Values go
//     to the server as parameters, never inside the SQL text, and a write
//     can commit in the same pgx.Tx as the River job that needs it, which
//     bun cannot share. Recipients in particular are written only here,
//     whether one at a time (MergeRecipient) or in sets (UpsertRecipients, SaveRecipients).
//   - bun (a bun.IDB) for reading a model whole for a page or an answer
//     that shows it (ListTypes, GetRecipient), where its struct mapping
//     reads best, and for the migrations.
//
// Either way a query is a function whose first arguments are ctx and its
// handle, so it runs inside or outside a transaction. Methods on *DB are
// about the connection itself: opening and closing it, Ping, Migrate, and
// the transactions and pipelines (InTx and its kin, Pipeline).
package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"
)

// ErrNotFound is returned when a looked-up row does not exist.
var ErrNotFound = errors.New("not found")

// DB is the pool and the bun handle on top of it.
type DB struct {
	Pool *pgxpool.Pool
	Bun  *bun.DB
}

// Open connects to url. Connection attempts time out quickly so that a
// request made while the database is down fails fast instead of hanging.
func Open(ctx context.Context, url string) (*DB, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("parse DATABASE_URL: %w", err)
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = 3 * time.Second
	}
	if cfg.MaxConns < 20 {
		cfg.MaxConns = 20
	}
	// Time zone math happens in Go; the session speaks UTC so that dates the
	// database computes (partition days) do not depend on the server's zone.
	cfg.ConnConfig.RuntimeParams["timezone"] = "UTC"
	// bun writes values into its SQL itself, quoting strings as the SQL
	// standard does (a quote doubled, a backslash as it is). With
	// standard_conforming_strings off, as a database or role may set it,
	// PostgreSQL reads a backslash as an escape, and an id such as
	// `x\' OR true) --` ends its string early. So every connection asks for
	// it on, and one that does not have it (a pooler that drops the
	// request) is refused, when it is made and each time it is taken from
	// the pool: no query runs on it. River shares this pool.
	cfg.ConnConfig.RuntimeParams["standard_conforming_strings"] = "on"
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		if err := standardStrings(c); err != nil {
			return err
		}
		return jitOff(ctx, c)
	}
	cfg.PrepareConn = func(_ context.Context, c *pgx.Conn) (bool, error) {
		err := standardStrings(c)
		return err == nil, err
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", err)
	}
	sqldb := stdlib.OpenDBFromPool(pool)
	return &DB{Pool: pool, Bun: bun.NewDB(sqldb, pgdialect.New())}, nil
}

// ErrNonStandardStrings is returned for a connection on which
// standard_conforming_strings is not on.
var ErrNonStandardStrings = errors.New("standard_conforming_strings is not on")

// standardStrings checks the setting as the server last reported it
// (it reports every change), so the check costs no round trip.
func standardStrings(c *pgx.Conn) error {
	if v := c.PgConn().ParameterStatus("standard_conforming_strings"); v != "on" {
		return fmt.Errorf("%w on this connection (the server says %q): lull asks for it on every connection; "+
			"a connection pooler in between may drop the request", ErrNonStandardStrings, v)
	}
	return nil
}

// jitOff turns JIT compilation off on a new connection unless the
// client set jit when it connected (?jit=on in DATABASE_URL, in any case,
// or -c jit=on in ?options= or PGOPTIONS). JIT pays off for long analytic
// queries, which lull does not run; its statements run in milliseconds,
// and one the planner costs high, as a list of ids over a month of day
// partitions, was compiled first for 0.2–5 s (marking 1,000
// notifications read). A SET, not a startup parameter: PgBouncer, in
// session mode as docs/operations.md allows, refuses a connection whose
// startup packet names a parameter it does not track (jit is not one),
// and DISCARD ALL, its server_reset_query, undoes the SET before the
// server connection is handed to another client.
func jitOff(ctx context.Context, c *pgx.Conn) error {
	_, err := c.PgConn().Exec(ctx, `SELECT set_config('jit', 'off', false) FROM pg_settings WHERE name = 'jit' AND source <> 'client'`).ReadAll()
	if err != nil {
		return fmt.Errorf("turn JIT off: %w", err)
	}
	return nil
}

// Close closes bun's handle and the pool.
func (d *DB) Close() {
	d.Bun.Close()
	d.Pool.Close()
}

// Ping reports whether the database answers within the context's deadline.
func (d *DB) Ping(ctx context.Context) error {
	var one int
	return d.Pool.QueryRow(ctx, "SELECT 1").Scan(&one)
}

// InTx runs fn in a pgx transaction, committing if fn returns nil.
func (d *DB) InTx(ctx context.Context, fn func(pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, d.Pool, fn)
}

// InTxAsyncCommit is InTx for a transaction whose loss in a crash is
// harmless because later work redoes it: its COMMIT does not wait for the
// disk. Any later synchronous commit on the server makes it durable too,
// as the write-ahead log is flushed in order.
func (d *DB) InTxAsyncCommit(ctx context.Context, fn func(pgx.Tx) error) error {
	return pgx.BeginTxFunc(ctx, d.Pool, pgx.TxOptions{BeginQuery: AsyncCommitBegin}, fn)
}

// AsyncCommitBegin begins a transaction as InTxAsyncCommit does, for one
// on a connection acquired already.
const AsyncCommitBegin = "BEGIN; SET LOCAL synchronous_commit = off"

// InTxWaitingAtMost is InTx for a transaction that gives up rather than
// wait longer than wait for a row another transaction holds: its statement
// then fails with a lock timeout (see IsLockTimeout).
func (d *DB) InTxWaitingAtMost(ctx context.Context, wait time.Duration, fn func(pgx.Tx) error) error {
	begin := fmt.Sprintf("BEGIN; SET LOCAL lock_timeout = %d", wait.Milliseconds())
	return pgx.BeginTxFunc(ctx, d.Pool, pgx.TxOptions{BeginQuery: begin}, fn)
}

// IsLockTimeout reports whether err is a statement that gave up waiting
// for a lock.
func IsLockTimeout(err error) bool {
	return serverCode(err) == "55P03"
}

// IsServerError reports whether err is PostgreSQL refusing a statement,
// which leaves the transaction undone, as opposed to a failure to hear
// its answer, after which it may or may not have committed.
func IsServerError(err error) bool {
	return serverCode(err) != ""
}

// serverCode is the SQLSTATE of an error PostgreSQL reported, or "".
func serverCode(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

// notFound turns "no rows" into ErrNotFound and wraps other errors.
func notFound(err error, what string) error {
	if errors.Is(err, pgx.ErrNoRows) || errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%s: %w", what, ErrNotFound)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// IsUnavailable reports whether err means the database cannot be reached,
// as opposed to a query that failed.
func IsUnavailable(err error) bool {
	if code := serverCode(err); code != "" {
		// Class 08: connection exceptions; 57P01-03: shutdown in progress.
		return code[:2] == "08" || code == "57P01" || code == "57P02" || code == "57P03"
	}
	var connErr *pgconn.ConnectError
	return errors.As(err, &connErr) || pgconn.SafeToRetry(err) || errors.Is(err, context.DeadlineExceeded)
}
