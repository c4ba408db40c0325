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
