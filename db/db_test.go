package db_test

import (
	"context"
	"testing"

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
