package db_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/db/dbtest"
)

// TestConcurrentReportsCountOnce: the same report heard many times at
// once is stored once, and reports of different batches racing on one
// address's score and entry neither fail nor lose a point.
func TestConcurrentReportsCountOnce(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx := context.Background()
	now := time.Now()
	policy := db.SoftBouncePolicy{Threshold: 10, Decay: time.Hour}
	record := func(r db.BounceReport) error {
		return d.InTx(ctx, func(tx pgx.Tx) error { return db.RecordBounce(ctx, tx, r, policy, now) })
	}
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			if err := record(db.BounceReport{Address: "Bob@example.com", Kind: "soft", BatchID: int64(i%10 + 1), Source: "smtp"}); err != nil {
				t.Error(err)
			}
		})
		wg.Go(func() {
			if err := record(db.BounceReport{Address: "carol@example.com", Kind: "complaint", BatchID: 7, Source: "ses"}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	var reports, score int
	if err := d.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM bounce_reports), (SELECT score FROM bounce_scores WHERE address = 'bob@example.com')`).Scan(&reports, &score); err != nil {
		t.Fatal(err)
	}
	if reports != 11 || score != 10 {
		t.Fatalf("%d reports stored and a score of %d, want 11 and 10", reports, score)
	}
	for address, reason := range map[string]string{"bob@example.com": db.ReasonSoftBounce, "carol@example.com": db.ReasonComplaint} {
		s, err := db.GetSuppression(ctx, d.Pool, address)
		if err != nil || s.Reason != reason {
			t.Errorf("%s: %+v, %v; want suppressed for %s", address, s, err, reason)
		}
	}
}

// TestReportWithoutBatchIsKnownByItsTime: a report naming no batch,
// heard again with the time its source gave, counts once; another with
// another time counts.
func TestReportWithoutBatchIsKnownByItsTime(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx := context.Background()
	now := time.Now()
	at := now.Add(-time.Minute)
	soft := func(at time.Time) {
		t.Helper()
		err := d.InTx(ctx, func(tx pgx.Tx) error {
			return db.RecordBounce(ctx, tx, db.BounceReport{Address: "bob@example.com", Kind: "soft", Source: "postmark", At: at},
				db.SoftBouncePolicy{Threshold: 2, Decay: time.Hour}, now)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	soft(at)
	soft(at)
	if _, err := db.GetSuppression(ctx, d.Pool, "bob@example.com"); !errors.Is(err, db.ErrNotFound) {
		t.Fatalf("one soft bounce heard twice suppressed the address (%v)", err)
	}
	soft(at.Add(time.Second))
	if _, err := db.GetSuppression(ctx, d.Pool, "bob@example.com"); err != nil {
		t.Fatalf("two soft bounces at a threshold of 2: %v", err)
	}
}

// TestPruneKeepsBounceReportsForTheRates: retention deletes bounce
// reports older than its cutoff, but never those the rates still count.
func TestPruneKeepsBounceReportsForTheRates(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx := context.Background()
	now := time.Now()
	for _, age := range []time.Duration{40 * 24 * time.Hour, 3 * 24 * time.Hour} {
		err := d.InTx(ctx, func(tx pgx.Tx) error {
			return db.RecordBounce(ctx, tx, db.BounceReport{Address: "bob@example.com", Kind: "hard", BatchID: int64(age), Source: "smtp"},
				db.SoftBouncePolicy{}, now.Add(-age))
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	gone, err := db.Prune(ctx, d.Pool, now.Add(-24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	var left int
	if err := d.Pool.QueryRow(ctx, `SELECT count(*) FROM bounce_reports`).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if gone["bounce_reports"] != 1 || left != 1 {
		t.Fatalf("pruned %d bounce reports and left %d, want 1 and the one of 3 days ago", gone["bounce_reports"], left)
	}
}

// A complaint unsubscribes every recipient with the address in one
// UPDATE (AddSuppression), which locks them in id order, as a fan-out
// saving its recipients does: in the order they sit in the table, the
// two would each hold one row of a pair and wait for the other, and
// PostgreSQL would abort one.
func TestComplaintsLockRecipientsInIDOrder(t *testing.T) {
	d := dbtest.New(t)
	ctx := context.Background()
	if err := saveInTx(t, d, audience("r", 1200), upsert); err != nil {
		t.Fatal(err)
	}
	// Stored, physically in this order: z2, z0, z1, all one address.
	for _, id := range []string{"z2", "z0", "z1"} {
		if _, err := d.Pool.Exec(ctx, `INSERT INTO recipients (id, email) VALUES ($1, 'shared@x.example')`, id); err != nil {
			t.Fatal(err)
		}
	}
	hold, err := d.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer hold.Rollback(ctx)
	if _, err := hold.Exec(ctx, `SELECT 1 FROM recipients WHERE id = 'z0' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	complaint, save := make(chan error, 1), make(chan error, 1)
	go func() { // locks z2, then waits for z0 (hold)
		complaint <- pgx.BeginFunc(ctx, d.Pool, func(tx pgx.Tx) error {
			_, _, err := db.AddSuppression(ctx, tx, db.Suppression{Address: "shared@x.example", Reason: db.ReasonComplaint,
				Scope: db.ScopeNonRequired, Source: "test", CreatedBy: "test"}, time.Now())
			return err
		})
	}()
	dbtest.LockWaiter(t, d)
	list := append(audience("r", 1200), db.InlineRecipient{ID: "z1", Name: "One"}, db.InlineRecipient{ID: "z2", Name: "Two"})
	go func() { save <- saveInTx(t, d, list, db.SaveRecipients) }() // locks z1, then waits for z2
	// Once the save waits too (or is done), let the complaint go on to z0, then z1.
	for deadline := time.Now().Add(10 * time.Second); len(save) == 0 && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		var waiting int
		if err := d.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting >= 2 {
			break
		}
	}
	hold.Rollback(ctx)
	if err := <-save; err != nil {
		t.Errorf("fan-out: %v", err)
	}
	if err := <-complaint; err != nil {
		t.Errorf("complaint: %v", err)
	}
}
