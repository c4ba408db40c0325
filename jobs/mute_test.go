package jobs_test

import (
	"bytes"
	"context"
	"io"
	"mime/quotedprintable"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/mailtemplates"
	"github.com/lull-dev/lull/preferences/batching"
)

// postThread ingests a comment of one thread (the event's batch key).
func (b *testBundle) postThread(t *testing.T, actor, thread string) *batching.IngestResult {
	t.Helper()
	ev := &batching.Event{Type: "comment", Actor: batching.Actor{ID: actor, Name: actor}, BatchKey: thread,
		Object: batching.Object{Type: "doc", ID: thread, Title: "Plan " + thread}, Recipients: batching.Recipients{{ID: "bob"}}}
	res, err := b.engine.Ingest(context.Background(), 1, ev)
	if err != nil {
		t.Fatalf("ingest: %v", err)
	}
	return res
}

// mute mutes thread for bob for d (0: for good), as the mute page does.
func (b *testBundle) mute(t *testing.T, thread string, d time.Duration) {
	t.Helper()
	ctx := context.Background()
	err := b.db.InTx(ctx, func(tx pgx.Tx) error { _, _, err := db.MuteThreadFor(ctx, tx, "bob", thread, d); return err })
	if err != nil {
		t.Fatal(err)
	}
}

var muteLink = regexp.MustCompile(`<(http://lull\.test/mute\?token=[^>]+)>`)

// TestMutedThreadSendsNothingOverSMTP: bob mutes a conversation with the
// link of its first email. A batch of it already open is canceled at its
// flush, a later comment of it opens no batch (both in the skip log),
// and another conversation of the same type still arrives.
func TestMutedThreadSendsNothingOverSMTP(t *testing.T) {
	t.Parallel()
	b, srv := smtpSetup(t)
	b.saveType(t, db.Type{Key: "comment", DefaultMode: "cooldown"})
	b.postThread(t, "Alice", "doc:7")
	b.clock.Advance(6 * time.Minute)
	b.flushDue(t)
	first := srv.WaitFor(t, 1, 5*time.Second)[0]

	// The footer's link names this conversation, signed for bob.
	body, _ := io.ReadAll(quotedprintable.NewReader(bytes.NewReader(first.Data)))
	m := muteLink.FindSubmatch(body)
	if m == nil {
		t.Fatalf("no mute link in the email:\n%s", body)
	}
	u, _ := url.Parse(string(m[1]))
	who, thread, err := b.flush.Links.VerifyData(u.Query().Get("token"), mailtemplates.PurposeMute, b.clock.Now())
	if err != nil || who != "bob" || thread != "comment+doc:7" {
		t.Fatalf("mute link for %q, %q: %v", who, thread, err)
	}

	open := b.postThread(t, "Bea", "doc:7").Batches[0].ID // before the mute
	b.mute(t, thread, 0)
	if res := b.postThread(t, "Chen", "doc:7"); len(res.Batches) != 0 || res.Suppressed != 1 {
		t.Fatalf("a comment of the muted thread: %+v", res)
	}
	b.postThread(t, "Dana", "doc:8")
	b.clock.Advance(6 * time.Minute)
	b.flushDue(t)

	// Each flush returned after the server took its email: what it has
	// now is all there is.
	srv.WaitFor(t, 2, 5*time.Second)
	if msgs := srv.Messages(); len(msgs) != 2 || !strings.Contains(string(msgs[1].Data), "Dana") {
		t.Fatalf("%d emails; the second:\n%s", len(msgs), msgs[len(msgs)-1].Data)
	}
	if got := b.batch(t, open); got.State != db.StateCanceled || got.Reason != db.SkipMutedThread {
		t.Errorf("the batch open when the thread was muted: %s %q", got.State, got.Reason)
	}
	if n := b.count(t, "SELECT count(*) FROM skips WHERE reason = $1 AND batch_id IS NULL AND event_id IS NOT NULL", db.SkipMutedThread); n != 1 {
		t.Errorf("%d ingest skips of the muted thread, want 1", n)
	}
}

// TestEndedMuteIsNotHonoured: a mute for a while stops a thread until it
// ends, at ingest and at flush; after that the thread arrives again.
func TestEndedMuteIsNotHonoured(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.saveType(t, db.Type{Key: "comment", DefaultMode: "cooldown"})
	b.recipient(t, "bob", "UTC")
	b.mute(t, "comment+doc:7", 24*time.Hour)
	if res := b.postThread(t, "Alice", "doc:7"); len(res.Batches) != 0 {
		t.Fatalf("a comment while muted: %+v", res)
	}
	end := func() {
		t.Helper()
		if _, err := b.db.Pool.Exec(context.Background(), `UPDATE muted_threads SET until = now() - interval '1 second'`); err != nil {
			t.Fatal(err)
		}
	}
	end()
	res := b.postThread(t, "Bea", "doc:7")
	if len(res.Batches) != 1 {
		t.Fatalf("a comment after the mute ended: %+v", res)
	}
	// Muted again while the batch waits, and ended again before it
	// flushes: the flush sends it.
	b.mute(t, "comment+doc:7", 24*time.Hour)
	end()
	b.clock.Advance(6 * time.Minute)
	b.flushDue(t)
	if got := b.batch(t, res.Batches[0].ID); got.State != db.StateSent {
		t.Errorf("after the mute ended the batch is %s %q", got.State, got.Reason)
	}
}

// TestRequiredThreadCannotBeMuted: a required type's conversation is not
// muted, whoever asks.
func TestRequiredThreadCannotBeMuted(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.saveType(t, db.Type{Key: "security", Required: true})
	b.recipient(t, "bob", "UTC")
	ctx := context.Background()
	err := b.db.InTx(ctx, func(tx pgx.Tx) error { _, _, err := db.MuteThreadFor(ctx, tx, "bob", "security+login", 0); return err })
	if err != db.ErrRequiredThread {
		t.Fatalf("muting a required type's thread: %v", err)
	}
}

// TestPruneDropsEndedMutes: retention removes mutes past their end and
// keeps those still running and those for good.
func TestPruneDropsEndedMutes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.saveType(t, db.Type{Key: "comment"})
	b.recipient(t, "bob", "UTC")
	b.mute(t, "comment+doc:7", time.Hour)
	b.mute(t, "comment+doc:8", time.Hour)
	b.mute(t, "comment+doc:9", 0)
	if _, err := b.db.Pool.Exec(context.Background(), `UPDATE muted_threads SET until = now() - interval '1 second' WHERE batch_key = 'comment+doc:7'`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Prune(context.Background(), b.db.Pool, b.clock.Now().Add(-720*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if n := b.count(t, "SELECT count(*) FROM muted_threads WHERE batch_key <> 'comment+doc:7'"); n != 2 || b.count(t, "SELECT count(*) FROM muted_threads") != 2 {
		t.Fatalf("%d mutes kept, want the two still running", n)
	}
}
