package db_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

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
