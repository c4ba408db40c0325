package web_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/lull-dev/lull/db"
)

// TestMutedThreadStaysOutOfDigests: a recipient stops one thread, then
// moves the type to a daily digest. The digest's batch has its own key
// ("daily"), so the thread's mute, read by batch key, let its comments
// back in. Items of a muted thread are now left out of a digest, and a
// digest of nothing else is canceled as "muted thread".
func TestMutedThreadStaysOutOfDigests(t *testing.T) {
	t.Parallel()
	a := brandSetup(t)
	ctx := context.Background()
	a.mustCall(t, "PUT", "/api/v1/types/comment", `{"name":"Comments","default_mode":"immediate","unsubscribe":"thread"}`, 200)
	// The thread is muted after its comment arrived: a comment arriving
	// after the mute never enters a batch (see TestMuteAtIngest).
	mute := func() {
		t.Helper()
		err := a.db.InTx(ctx, func(tx pgx.Tx) error { _, err := db.MuteThread(ctx, tx, "u_bob", "comment+doc:7"); return err })
		if err != nil {
			t.Fatal(err)
		}
	}
	a.mustCall(t, "PUT", "/api/v1/recipients/u_bob/preferences", `{"types":{"comment":{"mode":"daily"}}}`, 200)

	muted := a.postEvent(t, "comment", "Alice", "doc:7")
	if other := a.postEvent(t, "comment", "Fatima", "doc:8"); other != muted {
		t.Fatalf("two digests: %d and %d", muted, other)
	}
	mute()
	due := func(id int64) {
		t.Helper()
		if _, err := a.db.Pool.Exec(ctx, `UPDATE batches SET closes_at = now() - interval '1 second', wake_at = now() - interval '1 second' WHERE id = $1`, id); err != nil {
			t.Fatal(err)
		}
		a.workFlush(t, id)
	}
	due(muted)
	sent, err := db.ListOutbox(ctx, a.db.Pool, muted, 0, 1)
	if err != nil || len(sent) != 1 {
		t.Fatal(sent, err)
	}
	if !strings.Contains(sent[0].Text, "Fatima") || strings.Contains(sent[0].Text, "Alice") {
		t.Errorf("digest:\n%s", sent[0].Text)
	}
	// What the digest left out is in the skip log, as everything an
	// email leaves out is.
	var skipped int
	if err := a.db.Pool.QueryRow(ctx, `SELECT coalesce(sum(items), 0) FROM skips WHERE batch_id = $1 AND reason = $2`, muted, db.SkipMutedThread).Scan(&skipped); err != nil || skipped != 1 {
		t.Errorf("skip log has %d muted-thread items of the digest (%v), want 1", skipped, err)
	}

	if _, err := a.db.Pool.Exec(ctx, `DELETE FROM muted_threads`); err != nil {
		t.Fatal(err)
	}
	only := a.postEvent(t, "comment", "Alice", "doc:7")
	mute()
	due(only)
	var state, reason string
	if err := a.db.Pool.QueryRow(ctx, `SELECT state, reason FROM batches WHERE id = $1`, only).Scan(&state, &reason); err != nil {
		t.Fatal(err)
	}
	if state+" "+reason != "canceled muted thread" {
		t.Errorf("a digest of the muted thread alone: %s %s", state, reason)
	}
}
