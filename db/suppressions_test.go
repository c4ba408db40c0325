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
