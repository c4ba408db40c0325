package db_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/lull-dev/lull/db"

	"github.com/lull-dev/lull/db/dbtest"
)

func TestMigrateCreatesPartitions(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	var n int
	err := d.Pool.QueryRow(context.Background(),
		"SELECT count(*) FROM pg_inherits WHERE inhparent = 'notifications'::regclass").Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	if n < 9 {
		t.Fatalf("notifications has %d partitions, want at least 9 (default, yesterday, today and 7 ahead)", n)
	}
}

func TestMigrateTwiceIsANoop(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	if err := d.Migrate(context.Background()); err != nil {
		t.Fatalf("second migrate: %v", err)
	}
}

func TestMaintainPartitionsDropsOldDays(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx := context.Background()
	_, err := d.Pool.Exec(ctx, `CREATE TABLE notifications_p20200101 PARTITION OF notifications
		FOR VALUES FROM ('2020-01-01 00:00+00') TO ('2020-01-02 00:00+00')`)
	if err != nil {
		t.Fatal(err)
	}
	dropped, err := db.MaintainPartitions(ctx, d.Pool, time.Now().Add(-720*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if len(dropped) != 1 || dropped[0] != "notifications_p20200101" {
		t.Fatalf("dropped %v, want the 2020 partition only", dropped)
	}
	var n int
	d.Pool.QueryRow(ctx, "SELECT count(*) FROM pg_inherits WHERE inhparent = 'notifications'::regclass").Scan(&n)
	if n < 9 {
		t.Fatalf("%d partitions left, want today's and the coming week's kept", n)
	}
}

func TestInTxAsyncCommitOnlyAffectsItsTransaction(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx := context.Background()
	show := func(q db.Querier) (v string) {
		if err := q.QueryRow(ctx, "SHOW synchronous_commit").Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	d.Pool.Exec(ctx, "ALTER DATABASE "+d.Pool.Config().ConnConfig.Database+" SET synchronous_commit = on")
	d.Pool.Reset() // new connections take the database's setting
	d.InTxAsyncCommit(ctx, func(tx pgx.Tx) error {
		if v := show(tx); v != "off" {
			t.Errorf("inside: synchronous_commit = %s, want off", v)
		}
		return nil
	})
	if v := show(d.Pool); v != "on" {
		t.Errorf("after: synchronous_commit = %s, want on", v)
	}
}

func TestPipelineIsAllOrNothing(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx := context.Background()
	d.Pool.Exec(ctx, "CREATE TABLE p (n int PRIMARY KEY)")
	err := d.Pipeline(ctx, func(q db.Querier) error {
		q.Exec(ctx, "INSERT INTO p VALUES (1)")
		q.Exec(ctx, "INSERT INTO p VALUES (1)") // duplicate key
		return nil
	})
	if err == nil {
		t.Fatal("a failing statement went unreported")
	}
	var n int
	d.Pool.QueryRow(ctx, "SELECT count(*) FROM p").Scan(&n)
	if n != 0 {
		t.Fatalf("%d rows kept from a failed pipeline, want 0", n)
	}
}

// A notification older than the retention that still waits in an open
// batch (a weekly digest, a cooldown without a maximum wait) must survive
// retention, with its event, until the batch is sent; then its day goes.
func TestMaintainPartitionsKeepsDaysWithUnsentBatches(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx := context.Background()
	for _, sql := range []string{
		`CREATE TABLE events_p20200101 PARTITION OF events FOR VALUES FROM ('2020-01-01 00:00+00') TO ('2020-01-02 00:00+00')`,
		`CREATE TABLE notifications_p20200101 PARTITION OF notifications FOR VALUES FROM ('2020-01-01 00:00+00') TO ('2020-01-02 00:00+00')`,
		`INSERT INTO recipients (id, email) VALUES ('bob', 'bob@example.com')`,
		`INSERT INTO batches (id, recipient_id, batch_key, mode, opened_at, last_event_at, closes_at, item_count)
		 VALUES (1, 'bob', 'digest:weekly', 'weekly', '2020-01-01', '2020-01-01', now() + interval '1 day', 1)`,
		`INSERT INTO events (id, created_at, type_key, occurred_at) VALUES (1, '2020-01-01 12:00+00', 'comment', '2020-01-01')`,
		`INSERT INTO notifications (created_at, event_id, recipient_id, type_key, batch_id, occurred_at)
		 VALUES ('2020-01-01 12:00+00', 1, 'bob', 'comment', 1, '2020-01-01')`,
	} {
		if _, err := d.Pool.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	cutoff := time.Now().Add(-720 * time.Hour)
	if dropped, err := db.MaintainPartitions(ctx, d.Pool, cutoff); err != nil || len(dropped) != 0 {
		t.Fatalf("dropped %v (%v) while the day's notification waits in an open batch", dropped, err)
	}
	if _, err := d.Pool.Exec(ctx, `UPDATE batches SET state = 'sent' WHERE id = 1`); err != nil {
		t.Fatal(err)
	}
	dropped, err := db.MaintainPartitions(ctx, d.Pool, cutoff)
	if err != nil || len(dropped) != 2 {
		t.Fatalf("dropped %v (%v) after the batch was sent, want both 2020 partitions", dropped, err)
	}
}

// TestPruneDeletesOnlyOldFinishedWork: retention deletes batches finished
// before the cutoff (with their deliveries and attempts, across several
// chunks), and old skips, outbox emails and idempotency keys; it keeps an
// old batch still open, an old batch finished after the cutoff, an old key
// whose event is still stored, and everything recent. A second run finds
// nothing more.
func TestPruneDeletesOnlyOldFinishedWork(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx := context.Background()
	const batch = `INSERT INTO batches (id, recipient_id, batch_key, mode, state, opened_at, last_event_at, closes_at, item_count, processed_at) VALUES `
	for _, sql := range []string{
		`INSERT INTO recipients (id, email) VALUES ('bob', 'bob@example.com')`,
		batch + `(1, 'bob', 'digest:daily', 'daily', 'sent', '2020-01-01', '2020-01-01', '2020-01-02', 1, '2020-01-02')`,
		batch + `(2, 'bob', 'digest:weekly', 'weekly', 'open', '2020-01-01', '2020-01-01', now() + interval '1 day', 1, NULL)`,
		batch + `(3, 'bob', 'digest:daily', 'daily', 'sent', '2020-01-01', '2020-01-01', now(), 1, now())`,
		`INSERT INTO batches (id, recipient_id, batch_key, mode, state, opened_at, last_event_at, closes_at, item_count, processed_at)
		 SELECT i, 'bob', 'c:' || i, 'cooldown', 'canceled', '2020-01-03', '2020-01-03', '2020-01-03', 1, '2020-01-03'
		 FROM generate_series(10, 12009) AS i`,
		batch + `(20000, 'bob', 'digest:daily', 'daily', 'sent', now(), now(), now(), 1, now())`,
		`INSERT INTO deliveries (id, batch_id, state, message_id) VALUES (1, 1, 'sent', 'a'), (3, 3, 'sent', 'b')`,
		`INSERT INTO delivery_attempts (delivery_id, ok) VALUES (1, true), (3, true)`,
		`INSERT INTO skips (created_at, recipient_id, reason) VALUES ('2020-01-01', 'bob', 'muted'), (now(), 'bob', 'muted')`,
		`INSERT INTO outbox (created_at, message_id, from_address, to_address, subject) VALUES ('2020-01-01', 'a', 'f', 't', 's'), (now(), 'b', 'f', 't', 's')`,
		`INSERT INTO event_keys (api_key_id, key, event_id, response, created_at) VALUES (1, 'old', 1, '{}', '2020-01-01'), (1, 'new', 2, '{}', now()), (1, 'pending', 3, '{}', '2020-01-01')`,
		`INSERT INTO events (id, type_key, occurred_at) VALUES (3, 'comment', now())`,
	} {
		if _, err := d.Pool.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	cutoff := time.Now().Add(-720 * time.Hour)
	gone, err := db.Prune(ctx, d.Pool, cutoff)
	if err != nil {
		t.Fatal(err)
	}
	if gone["batches"] != 12_001 || gone["skips"] != 1 || gone["outbox"] != 1 || gone["event_keys"] != 1 {
		t.Fatalf("pruned %v, want 12001 batches and one each of skips, outbox, event_keys", gone)
	}
	var ids []int64
	rows, _ := d.Pool.Query(ctx, `SELECT id FROM batches ORDER BY id`)
	if ids, err = pgx.CollectRows(rows, pgx.RowTo[int64]); err != nil {
		t.Fatal(err)
	}
	if len(ids) != 3 || ids[0] != 2 || ids[1] != 3 || ids[2] != 20000 {
		t.Fatalf("batches left %v, want the open one, the one finished after the cutoff and the recent one", ids)
	}
	var deliveries, attempts int
	d.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM deliveries), (SELECT count(*) FROM delivery_attempts)`).Scan(&deliveries, &attempts)
	if deliveries != 1 || attempts != 1 {
		t.Fatalf("%d deliveries and %d attempts left, want batch 3's one of each", deliveries, attempts)
	}
	again, err := db.Prune(ctx, d.Pool, cutoff)
	if err != nil || again["batches"]+again["skips"]+again["outbox"]+again["event_keys"] != 0 {
		t.Fatalf("second run pruned %v (%v), want nothing", again, err)
	}
}

// TestPruneKeepsBatchesOfKeptDays: a finished batch older than the cutoff
// stays while a day partition from before it finished is kept, so stored
// notifications never point at a deleted batch.
func TestPruneKeepsBatchesOfKeptDays(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx := context.Background()
	const batch = `INSERT INTO batches (id, recipient_id, batch_key, mode, state, opened_at, last_event_at, closes_at, item_count, processed_at) VALUES `
	for _, sql := range []string{
		`CREATE TABLE notifications_p20200105 PARTITION OF notifications FOR VALUES FROM ('2020-01-05 00:00+00') TO ('2020-01-06 00:00+00')`,
		`INSERT INTO recipients (id, email) VALUES ('bob', 'bob@example.com')`,
		batch + `(1, 'bob', 'a', 'daily', 'sent', '2020-01-01', '2020-01-01', '2020-01-03', 1, '2020-01-03')`,
		batch + `(2, 'bob', 'b', 'daily', 'sent', '2020-01-05', '2020-01-05', '2020-01-06', 1, '2020-01-06')`,
	} {
		if _, err := d.Pool.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := db.Prune(ctx, d.Pool, time.Now().Add(-720*time.Hour)); err != nil {
		t.Fatal(err)
	}
	rows, _ := d.Pool.Query(ctx, `SELECT id FROM batches ORDER BY id`)
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil || len(ids) != 1 || ids[0] != 2 {
		t.Fatalf("batches left %v (%v), want batch 2, finished after the kept day 2020-01-05 began", ids, err)
	}
}

// TestConnectionsWithoutStandardStringsAreRefused turns
// standard_conforming_strings off on the pool's one connection, as a
// pooler that drops lull's request for it would leave it: the next query
// fails naming the setting instead of running, and the one after runs on
// a fresh connection that has it on.
func TestConnectionsWithoutStandardStringsAreRefused(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx := context.Background()
	c, err := d.Pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Exec(ctx, "SET standard_conforming_strings = off")
	c.Release()
	if err != nil {
		t.Fatal(err)
	}
	var v string
	if err := d.Pool.QueryRow(ctx, "SHOW standard_conforming_strings").Scan(&v); !errors.Is(err, db.ErrNonStandardStrings) {
		t.Fatalf("query on a connection with the setting off: %q, %v; want ErrNonStandardStrings", v, err)
	}
	if err := d.Pool.QueryRow(ctx, "SHOW standard_conforming_strings").Scan(&v); err != nil || v != "on" {
		t.Fatalf("next query: standard_conforming_strings %q, %v; want on", v, err)
	}
}

// Creating a day's partitions takes an exclusive lock on the partitioned
// table. The daily maintenance must not deadlock a read that joins
// notifications to events, as the feed does: the read holds notifications
// and then waits for events, so maintenance that held events while it
// waited for notifications formed a cycle, and PostgreSQL failed one of
// the two (a 500 to the app, or a day without partitions).
func TestCreatingPartitionsDoesNotDeadlockAFeedRead(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx := context.Background()
	day := time.Now().UTC().AddDate(0, 0, 7).Format("20060102")
	for _, table := range []string{"events", "notifications"} {
		if _, err := d.Pool.Exec(ctx, `DROP TABLE IF EXISTS `+pgx.Identifier{table + "_p" + day}.Sanitize()); err != nil {
			t.Fatal(err)
		}
	}
	reader, err := d.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Rollback(ctx)
	if _, err := reader.Exec(ctx, `SELECT 1 FROM notifications LIMIT 0`); err != nil {
		t.Fatal(err)
	}
	maintained := make(chan error, 1)
	go func() {
		_, err := db.MaintainPartitions(ctx, d.Pool, time.Now().Add(-720*time.Hour))
		maintained <- err
	}()
	for waiting := false; !waiting; time.Sleep(5 * time.Millisecond) {
		err := d.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock')`).Scan(&waiting)
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := reader.Exec(ctx, `SELECT 1 FROM events LIMIT 0`); err != nil {
		t.Fatalf("the read: %v", err)
	}
	if err := reader.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-maintained; err != nil {
		t.Fatalf("maintenance: %v", err)
	}
	var n int
	if err := d.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_class WHERE relname = ANY($1)`,
		[]string{"events_p" + day, "notifications_p" + day}).Scan(&n); err != nil || n != 2 {
		t.Fatalf("%d of the day's 2 partitions created (%v)", n, err)
	}
}

// JIT compilation is off on lull's connections (marking 1,000 ids read
// over a month of partitions was compiled for 0.2–5 s first), set after
// connecting, which a pooler lets through, unless DATABASE_URL asks for
// it, in whatever case the operator wrote it.
func TestJITOffUnlessTheURLAsks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u := dbtest.NewURL(t)
	for _, c := range []struct{ query, want string }{{"", "off"}, {"&jit=on", "on"}, {"&JIT=on", "on"}, {"&options=-c%20jit%3Don", "on"}} {
		d, err := db.Open(ctx, u+c.query)
		if err != nil {
			t.Fatal(err)
		}
		// Five connections at once, so that each is a new one.
		var held []*pgxpool.Conn
		for range 5 {
			conn, err := d.Pool.Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			held = append(held, conn)
			var jit, source string
			if err := conn.QueryRow(ctx, "SELECT setting, source FROM pg_settings WHERE name = 'jit'").Scan(&jit, &source); err != nil {
				t.Fatal(err)
			}
			if jit != c.want {
				t.Errorf("DATABASE_URL with %q: jit %s (set by %s), want %s", c.query, jit, source, c.want)
			}
		}
		for _, conn := range held {
			conn.Release()
		}
		d.Close()
	}
}
