package db_test

import (
	"context"
	"testing"
	"time"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/db/dbtest"
)

// One call records a set of outcomes of every kind, each as the flush
// worker recorded it alone: a send, a final failure, and a temporary
// failure at most once (the batch back to flushing, owned by the retry).
func TestRecordOutcomesWritesEachKind(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx := context.Background()
	err := db.SaveType(ctx, d.Pool, &db.Type{Key: "task", Name: "Task", DefaultMode: "cooldown", WindowMS: 3_600_000, MaxItems: 10,
		DisplayLimit: 10, ItemOrder: "latest", ItemText: "{{actor.name}}", GroupText: "{{count}} tasks"})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)
	var joins []db.BatchJoin
	for _, rid := range []string{"ann", "ben", "cat"} {
		joins = append(joins, db.BatchJoin{RecipientID: rid, BatchKey: "task", Mode: "cooldown", TypeKey: "task", Window: time.Hour,
			ClosesAt: start, MaxItems: 10})
	}
	bs, err := db.JoinBatches(ctx, d.Pool, joins, start)
	if err != nil {
		t.Fatal(err)
	}
	var starts []db.DeliveryStart
	for i, b := range bs {
		starts = append(starts, db.DeliveryStart{BatchID: b.ID, JobID: int64(10 + i), MessageID: b.RecipientID + "@x", To: b.RecipientID + "@example.com", Subject: "s"})
	}
	ds, err := db.StartDeliveries(ctx, d.Pool, starts, false, start)
	if err != nil {
		t.Fatal(err)
	}
	at := start.Add(time.Minute)
	ann, ben, cat := bs[0].ID, bs[1].ID, bs[2].ID
	// Given out of order: the batches are locked in id order whatever
	// order the set arrives in.
	outs := []db.Outcome{
		{BatchID: cat, DeliveryID: ds[cat].ID, BatchState: db.StateFlushing, JobID: 99, Answer: "451 later", State: "sending", At: at},
		{BatchID: ann, DeliveryID: ds[ann].ID, BatchState: db.StateSent, OK: true, Answer: "ok", State: db.StateSent, At: at},
		{BatchID: ben, DeliveryID: ds[ben].ID, BatchState: db.StateFailed, Reason: "550 no", Answer: "550 no", State: db.StateFailed, At: at},
	}
	if err := d.Pipeline(ctx, func(q db.Querier) error { return db.RecordOutcomes(ctx, q, outs) }); err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		batch          int64
		state, reason  string
		processed      bool
		job            int64
		delivery       string
		confirmed      bool
		lastError      string
		sentAt, failed bool
	}{
		{ann, db.StateSent, "", true, 10, db.StateSent, true, "", true, false},
		{ben, db.StateFailed, "550 no", true, 11, db.StateFailed, false, "550 no", false, true},
		{cat, db.StateFlushing, "", false, 99, "sending", false, "451 later", false, false},
	} {
		b, err := db.GetBatch(ctx, d.Pool, c.batch)
		if err != nil {
			t.Fatal(err)
		}
		if b.State != c.state || b.Reason != c.reason || (b.ProcessedAt != nil) != c.processed || b.FlushJobID == nil || *b.FlushJobID != c.job {
			t.Errorf("batch %d: %s %q processed %v job %v; want %s %q processed %v job %d", c.batch, b.State, b.Reason, b.ProcessedAt, b.FlushJobID, c.state, c.reason, c.processed, c.job)
		}
		if c.state == db.StateFlushing && (b.FlushingAt == nil || !b.FlushingAt.Equal(at)) {
			t.Errorf("batch %d flushing since %v, want %v", c.batch, b.FlushingAt, at)
		}
		dv, err := db.GetDeliveryByBatch(ctx, d.Pool, c.batch)
		if err != nil {
			t.Fatal(err)
		}
		if dv.State != c.delivery || dv.Confirmed != c.confirmed || dv.LastError != c.lastError || (dv.SentAt != nil) != c.sentAt || (dv.FailedAt != nil) != c.failed || dv.Attempts != 1 {
			t.Errorf("delivery of batch %d: %+v", c.batch, dv)
		}
		as, err := db.DeliveryAttempts(ctx, d.Pool, dv.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(as) != 1 || as[0].OK != c.confirmed || !as[0].At.Equal(at) {
			t.Errorf("attempts of batch %d: %+v", c.batch, as)
		}
	}
}
