package jobs_test

import (
	"context"
	"mime"
	"strings"
	"testing"
	"time"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/mail"
	"github.com/lull-dev/lull/preferences"
)

// skipped sums what the skip log holds for a batch.
func (b *testBundle) skipped(t *testing.T, batchID int64) int {
	t.Helper()
	return b.count(t, `SELECT coalesce(sum(items), 0)::int FROM skips WHERE batch_id = $1`, batchID)
}

// digestOf opens bob's daily digest with a comment of thread doc:1, a
// comment of doc:2 and a like, and returns the digest and the
// notification ids by what they are.
func (b *testBundle) digestOf(t *testing.T) (int64, map[string]int64) {
	t.Helper()
	b.saveType(t, db.Type{Key: "comment", DefaultMode: "daily", SkipRead: true})
	b.saveType(t, db.Type{Key: "like", DefaultMode: "daily", SkipRead: true})
	id := b.postThread(t, "ann", "doc:1").Batches[0].ID
	b.postThread(t, "cy", "doc:2")
	b.post(t, "like", "dee", "bob")
	ids := map[string]int64{}
	rows, err := b.db.Pool.Query(context.Background(), `
		SELECT n.type_key || coalesce(':' || nullif(e.batch_key, ''), ''), n.id, n.batch_id
		FROM notifications n JOIN events e ON e.id = n.event_id AND e.created_at = n.created_at
		WHERE n.recipient_id = 'bob'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var k string
		var n, batch int64
		if err := rows.Scan(&k, &n, &batch); err != nil {
			t.Fatal(err)
		}
		if batch != id {
			t.Fatalf("%s is in batch %d, not the digest %d", k, batch, id)
		}
		ids[k] = n
	}
	return id, ids
}

// A notification read in the app, and so logged as read, whose thread is
// muted before the digest goes out was logged a second time, as muted.
func TestReadItemOfAMutedThreadIsLoggedOnce(t *testing.T) {
	t.Parallel()
	b, srv := smtpSetup(t)
	id, ids := b.digestOf(t)
	ctx := context.Background()
	if _, err := b.engine.MarkRead(ctx, "bob", []int64{ids["comment:doc:1"]}, nil); err != nil {
		t.Fatal(err)
	}
	b.mute(t, "comment+doc:1", 0)
	b.clock.Advance(48 * time.Hour)
	b.flushDue(t)
	srv.WaitFor(t, 1, 5*time.Second)
	if got := b.skipped(t, id); got != 1 {
		t.Fatalf("the skip log holds %d items of the digest, want the 1 read (2 went out)", got)
	}
}

// A retry canceled for what changed since the first attempt logs only
// what the first attempt did not: the like it left out as muted was
// logged again with the whole batch.
func TestRetryCanceledLogsEachItemOnce(t *testing.T) {
	t.Parallel()
	b, srv := smtpSetup(t)
	id, _ := b.digestOf(t)
	ctx := context.Background()
	b.setPref(t, "bob", "like", "never", 0, -1)
	b.clock.Advance(48 * time.Hour)
	srv.FailNext(451, "4.3.0 try again later", 1)
	if err := b.workAs(ctx, 7, id, 1); err == nil || !mail.IsTemporary(err) {
		t.Fatalf("first attempt: %v, want a temporary error", err)
	}
	if _, err := b.engine.MarkRead(ctx, "bob", nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := b.workAs(ctx, 7, id, 2); err != nil {
		t.Fatalf("retry: %v", err)
	}
	if got := b.batch(t, id); got.State != db.StateCanceled {
		t.Fatalf("the retry left the batch %s, want canceled", got.State)
	}
	if got := b.skipped(t, id); got != 3 {
		t.Fatalf("the skip log holds %d items of the canceled digest of 3", got)
	}
}

// A notification left out as muted by the first attempt and read in the
// app before the retry was logged twice: as muted, and as read.
func TestRetryLogsAMutedItemReadSinceOnce(t *testing.T) {
	t.Parallel()
	b, srv := smtpSetup(t)
	id, ids := b.digestOf(t)
	ctx := context.Background()
	b.setPref(t, "bob", "like", "never", 0, -1)
	b.clock.Advance(48 * time.Hour)
	srv.FailNext(451, "4.3.0 try again later", 1)
	if err := b.workAs(ctx, 7, id, 1); err == nil || !mail.IsTemporary(err) {
		t.Fatalf("first attempt: %v, want a temporary error", err)
	}
	if _, err := b.engine.MarkRead(ctx, "bob", []int64{ids["like"]}, nil); err != nil {
		t.Fatal(err)
	}
	if err := b.workAs(ctx, 7, id, 2); err != nil {
		t.Fatalf("retry: %v", err)
	}
	srv.WaitFor(t, 1, 5*time.Second)
	if got := b.skipped(t, id); got != 1 {
		t.Fatalf("the skip log holds %d items of the digest, want the 1 like (2 comments went out)", got)
	}
}

// A notification the first attempt left out as muted, and logged, went
// out with the retry once the recipient unmuted its type in between:
// in the email and in the skip log. The retry leaves it out again.
func TestRetryLeavesOutWhatItLoggedBeforeAnUnmute(t *testing.T) {
	t.Parallel()
	b, srv := smtpSetup(t)
	id, _ := b.digestOf(t)
	ctx := context.Background()
	b.setPref(t, "bob", "like", "never", 0, -1)
	b.clock.Advance(48 * time.Hour)
	srv.FailNext(451, "4.3.0 try again later", 1)
	if err := b.workAs(ctx, 7, id, 1); err == nil || !mail.IsTemporary(err) {
		t.Fatalf("first attempt: %v, want a temporary error", err)
	}
	b.setPref(t, "bob", "like", "daily", 0, -1)
	if err := b.workAs(ctx, 7, id, 2); err != nil {
		t.Fatalf("retry: %v", err)
	}
	subject, err := new(mime.WordDecoder).DecodeHeader(srv.WaitFor(t, 1, 5*time.Second)[0].Header.Get("Subject"))
	if err != nil {
		t.Fatal(err)
	}
	if got := b.skipped(t, id); got != 1 || !strings.Contains(subject, "2 updates") {
		t.Fatalf("the skip log holds %d items of the digest and the email is %q: want the like logged and the 2 comments sent", got, subject)
	}
}

// A notification named to be marked read stays unread if, while the
// mark-read waited for its batch, a flush folded that batch into a held
// digest it opened: the digest was not among the batches locked.
func TestMarkReadByIDRacingAFoldIntoANewHeldDigest(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.saveType(t, db.Type{Key: "comment", SkipRead: true})
	b.recipient(t, "r0", "UTC")
	ctx := context.Background()
	from := b.post(t, "comment", "ann", "r0").Batches[0].ID
	note := b.unread(t, "r0")[0]
	flush, err := b.db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer flush.Rollback(ctx)
	batch, err := db.LockBatch(ctx, flush, from)
	if err != nil {
		t.Fatal(err)
	}
	read := make(chan error, 1)
	go func() { _, err := b.engine.MarkRead(ctx, "r0", []int64{note}, nil); read <- err }()
	if err := (&holdingScheduler{db: b.db}).waitForWaiter(ctx, flush, make(chan struct{})); err != nil {
		t.Fatal(err)
	}
	now := b.clock.Now()
	f, err := db.FoldIntoHeld(ctx, flush, batch, []string{"comment"}, preferences.HeldKey, now.Add(24*time.Hour), now, now)
	if err != nil || !f.Opened {
		t.Fatalf("fold: %+v, %v", f, err)
	}
	if err := flush.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-read; err != nil {
		t.Fatal(err)
	}
	if n := b.unread(t, "r0"); len(n) != 0 {
		t.Fatalf("notification %v is unread after it was marked read", n)
	}
	held := b.batch(t, f.Held)
	if held.State != db.StateCanceled || held.ItemCount != 0 || b.skipped(t, f.Held) != 1 {
		t.Fatalf("the held digest is %s counting %d with %d logged, want canceled as read with its 1 logged", held.State, held.ItemCount, b.skipped(t, f.Held))
	}
}

// A batch over budget whose only items of types that count were read in
// the app folded nothing, but opened an empty held digest, which its
// flush canceled logging one item it never held.
func TestFoldOfNothingLogsNothing(t *testing.T) {
	t.Parallel()
	b, srv := smtpSetup(t)
	b.saveType(t, db.Type{Key: "digestible", DefaultMode: "daily", SkipRead: true})
	b.saveType(t, db.Type{Key: "security.daily", DefaultMode: "daily", Required: true})
	b.setBudget(t, "bob", 1)
	b.post(t, "digestible", "system", "bob")
	b.post(t, "security.daily", "system", "bob")
	var read int64
	if err := b.db.Pool.QueryRow(context.Background(), `SELECT id FROM notifications WHERE type_key = 'digestible'`).Scan(&read); err != nil {
		t.Fatal(err)
	}
	if _, err := b.engine.MarkRead(context.Background(), "bob", []int64{read}, nil); err != nil {
		t.Fatal(err)
	}
	b.clock.Set(time.Date(2026, 11, 24, 7, 0, 0, 0, time.UTC))
	b.post(t, "alert", "system", "bob") // the one email of the day
	b.flushDue(t)
	b.clock.Set(time.Date(2026, 11, 24, 8, 0, 0, 0, time.UTC))
	b.flushDue(t)
	b.clock.Advance(72 * time.Hour)
	b.flushDue(t)
	srv.WaitFor(t, 2, 5*time.Second)
	logged := b.count(t, `SELECT coalesce(sum(s.items), 0)::int FROM skips s JOIN batches b ON b.id = s.batch_id WHERE b.batch_key = $1`, preferences.HeldKey)
	held := b.count(t, `SELECT count(*)::int FROM notifications n JOIN batches b ON b.id = n.batch_id WHERE b.batch_key = $1`, preferences.HeldKey)
	if logged != held {
		t.Fatalf("the skip log holds %d items of held digests holding %d", logged, held)
	}
}

// A notification read in the app while its type kept read notifications
// in emails stayed in its batch's count, unlogged; the type then left
// read notifications out, and the flush left it out of the email without
// logging it: accounted for nowhere.
func TestReadBeforeItsTypeSkipsReadIsLogged(t *testing.T) {
	t.Parallel()
	b, srv := smtpSetup(t)
	b.saveType(t, db.Type{Key: "comment"})
	id := b.post(t, "comment", "ann", "bob").Batches[0].ID
	b.post(t, "comment", "cy", "bob")
	ctx := context.Background()
	if _, err := b.engine.MarkRead(ctx, "bob", b.unread(t, "bob")[:1], nil); err != nil {
		t.Fatal(err)
	}
	b.saveType(t, db.Type{Key: "comment", SkipRead: true})
	b.clock.Advance(6 * time.Minute)
	b.flushDue(t)
	srv.WaitFor(t, 1, 5*time.Second)
	if got := b.skipped(t, id); got != 1 {
		t.Fatalf("the skip log holds %d items of the batch, want the 1 read (1 went out)", got)
	}
}
