package db_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lull-dev/lull/db"
)

// reserveMany takes one id per join from the batches' sequence, in
// ascending order of the joins, as MarkFresh gives them.
func reserveMany(t *testing.T, d *db.DB, joins []db.BatchJoin) {
	t.Helper()
	rows, err := d.Pool.Query(context.Background(), `SELECT nextval('batches_id_seq') FROM generate_series(1, $1)`, len(joins))
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(ids)
	for i := range joins {
		joins[i].Reserved = ids[i]
	}
}

// Two fan-outs whose read-ahead found the same recipients fresh copy their
// batches in at the same moment, one given them in ascending order and
// the other descending. Rows are copied in one order whatever the order
// given, so the second waits for the first and then joins its batches,
// where copying in the order given makes them meet in the middle and
// deadlock.
func TestReservedBatchesRacingInOppositeOrders(t *testing.T) {
	t.Parallel()
	d, ctx, now := freshDB(t), context.Background(), freshNow
	const n = 2000
	for round := range 3 {
		key := fmt.Sprint("thread-", round)
		var up, down []db.BatchJoin
		for i := range n {
			j := freshJoin(fmt.Sprintf("r%04d", i), now, true)
			j.BatchKey = key
			up = append(up, j)
		}
		for i := n - 1; i >= 0; i-- {
			down = append(down, up[i])
		}
		reserveMany(t, d, up)
		reserveMany(t, d, down)
		start := make(chan struct{})
		errs := make([]error, 2)
		var wg sync.WaitGroup
		for k, joins := range [][]db.BatchJoin{up, down} {
			wg.Go(func() {
				<-start
				_, errs[k] = joinInTx(ctx, d, joins, now)
			})
		}
		close(start)
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		var batches, items int
		err := d.Pool.QueryRow(ctx, `SELECT count(*), coalesce(sum(item_count), 0) FROM batches WHERE batch_key = $1 AND state = 'open'`, key).Scan(&batches, &items)
		if err != nil || batches != n || items != 2*n {
			t.Fatalf("round %d: %d open batches holding %d items (%v), want %d holding %d", round, batches, items, err, n, 2*n)
		}
	}
}

// Notifications are copied in from CopyRows on, inside a transaction, and
// inserted by statement below that or in a pipeline: both store the same
// rows, each with its own event's fields.
func TestInsertNotificationsCopiesWhatItWouldInsert(t *testing.T) {
	t.Parallel()
	d, ctx := freshDB(t), context.Background()
	now := time.Now().Truncate(time.Microsecond)
	notifications := func(first int64) db.NewNotifications {
		ns := db.NewNotifications{Events: []db.EventRef{
			{ID: first, Created: now, TypeKey: "task", OccurredAt: now.Add(-time.Hour)},
			{ID: first + 1, Created: now, TypeKey: "other", OccurredAt: now.Add(-time.Minute)},
		}}
		for i := range db.CopyRows + 500 {
			ns.Recipients = append(ns.Recipients, fmt.Sprintf("r%d", i))
			ns.Batches = append(ns.Batches, int64(1000+i))
			ns.Of = append(ns.Of, int32(i%3%2))
		}
		return ns
	}
	err := d.InTx(ctx, func(tx pgx.Tx) error { return db.InsertNotifications(ctx, tx, notifications(900)) })
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Pipeline(ctx, func(q db.Querier) error { return db.InsertNotifications(ctx, q, notifications(800)) }); err != nil {
		t.Fatal(err)
	}
	rows := func(first int64) []string {
		r, err := d.Pool.Query(ctx, `SELECT format('%s %s %s %s %s %s', event_id - $1, created_at, type_key, occurred_at, recipient_id, batch_id)
			FROM notifications WHERE event_id IN ($1, $1 + 1) ORDER BY recipient_id, event_id`, first)
		if err != nil {
			t.Fatal(err)
		}
		out, err := pgx.CollectRows(r, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	copied, inserted := rows(900), rows(800)
	if len(copied) != db.CopyRows+500 || !slices.Equal(copied, inserted) {
		t.Fatalf("copied %d rows, inserted %d; first copied %v, first inserted %v", len(copied), len(inserted), copied[:3], inserted[:3])
	}
}
