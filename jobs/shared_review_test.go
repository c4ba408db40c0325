package jobs_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/mailtemplates"
	"github.com/lull-dev/lull/preferences/batching"
)

// teamOn is team with events about one conversation (batch_key), whose
// emails offer a mute link.
func teamOn(t *testing.T, b *testBundle, n, events int, batchKey string) []int64 {
	t.Helper()
	b.saveType(t, db.Type{Key: "task.failed", Name: "Failed tasks", DefaultMode: "cooldown", WindowMS: 60_000,
		ItemText: "{{object.title}} failed", GroupText: "Task failed|{{count}} tasks failed", SkipRead: true,
		SharedDelivery: true})
	var to []batching.RecipientRef
	for i := range n {
		id := fmt.Sprintf("m%02d", i)
		b.recipient(t, id, "UTC")
		to = append(to, ref(id))
	}
	var ids []int64
	for i := range events {
		res, err := b.engine.Ingest(context.Background(), 1, &batching.Event{Type: "task.failed", BatchKey: batchKey,
			Actor: batching.Actor{ID: "ci", Name: "CI"}, Recipients: to,
			Object: batching.Object{Type: "task", ID: fmt.Sprint(i), Title: fmt.Sprintf("task %d", i)}})
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			for _, bt := range res.Batches {
				ids = append(ids, bt.ID)
			}
		}
	}
	b.clock.Advance(2 * time.Minute)
	return ids
}

// A shared email about one conversation carries no mute link: a mute
// link is signed for one member, and any member (or anyone the email is
// forwarded to) could mute the conversation for them.
func TestSharedDeliveryCarriesNoMembersMuteLink(t *testing.T) {
	t.Parallel()
	b, srv := smtpBundle(t)
	teamOn(t, b, 5, 3, "project:7")
	b.flushDue(t)
	msgs := srv.WaitFor(t, 1, 10*time.Second)
	time.Sleep(200 * time.Millisecond)
	if srv.Received() != 1 || len(msgs[0].To) != 5 {
		t.Fatalf("%d emails, the first to %d members; want one to all 5", srv.Received(), len(msgs[0].To))
	}
	// Quoted-printable may break a line anywhere: join them first.
	if body := strings.ReplaceAll(string(msgs[0].Data), "=\r\n", ""); strings.Contains(body, "/mute?") {
		t.Fatalf("the shared email carries a member's mute link:\n%s", body[:min(len(body), 3000)])
	}
}

// Two members with one address (a shared mailbox, or one person
// registered twice) get the shared email in that mailbox once, not once
// per member: the address is one envelope recipient. Both batches end
// sent.
func TestSharedDeliveryToOneAddressOfTwoMembersSendsItOnce(t *testing.T) {
	t.Parallel()
	b, srv := smtpBundle(t)
	ids := team(t, b, true, 4, 2)
	if _, err := b.db.Pool.Exec(context.Background(), "UPDATE recipients SET email = 'Ops@Example.com' WHERE id IN ('m01', 'm02')"); err != nil {
		t.Fatal(err)
	}
	b.flushDue(t)
	msgs := srv.WaitFor(t, 1, 10*time.Second)
	time.Sleep(200 * time.Millisecond)
	if srv.Received() != 1 {
		t.Fatalf("%d emails, want 1", srv.Received())
	}
	seen := map[string]int{}
	for _, to := range msgs[0].To {
		seen[strings.ToLower(to)]++
	}
	if len(msgs[0].To) != 3 || seen["ops@example.com"] != 1 {
		t.Fatalf("the shared email went to %v, want 3 addresses, the shared mailbox once", msgs[0].To)
	}
	for _, id := range ids {
		if st := b.batch(t, id).State; st != db.StateSent {
			t.Fatalf("batch %d is %s, want sent", id, st)
		}
	}
}

// The skip log of a shared email names the members left out of it and
// why (here m03, suppressed), and only them:
// m05, in another zone, got an email of its own and is not left out.
func TestSharedDeliverySkipLogNamesMembersLeftOut(t *testing.T) {
	t.Parallel()
	b, srv := smtpBundle(t)
	ctx := context.Background()
	ids := team(t, b, true, 8, 2)
	if _, _, err := db.AddSuppression(ctx, b.db.Pool, db.Suppression{Address: "m03@example.com", Reason: "operator", Scope: db.ScopeAll, Source: "test"}, b.clock.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := b.db.Pool.Exec(ctx, "UPDATE recipients SET timezone = 'Asia/Tokyo' WHERE id = 'm05'"); err != nil {
		t.Fatal(err)
	}
	b.flushDue(t)
	srv.WaitFor(t, 2, 10*time.Second)
	time.Sleep(200 * time.Millisecond)
	left, err := db.SharedLeftOut(ctx, b.db.Pool, ids[0], 100)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range left {
		got = append(got, s.RecipientID+":"+s.Reason)
	}
	if len(got) != 1 || got[0] != "m03:suppressed" {
		t.Fatalf("left out of the shared email: %v, want m03 (suppressed) alone", got)
	}
	if left, _ := db.SharedLeftOut(ctx, b.db.Pool, ids[5], 100); len(left) != 0 {
		t.Fatalf("m05's own email lists %d members left out", len(left))
	}
}

// A member suppressed between a shared email's crash and its retry is
// left out of the retry, and their batch is settled (canceled, logged
// suppressed) by the time every job has run, not left flushing under
// the sending job until the sweep reclaims it.
func TestSharedDeliveryRetryAfterCrashSettlesAMemberSuppressedMeanwhile(t *testing.T) {
	t.Parallel()
	b, srv := smtpBundle(t)
	smtp := b.flush.Sender
	crashed := false
	b.withSender(senderFunc(func(ctx context.Context, m *mailtemplates.Message) error {
		if err := smtp.Send(ctx, m); err != nil {
			return err
		}
		if !crashed {
			crashed = true
			panic(errCrash)
		}
		return nil
	}))
	ids := team(t, b, true, 6, 2)
	ctx := context.Background()
	func() {
		defer func() { recover() }()
		b.workAs(ctx, 500, ids[0], 1)
	}()
	if _, _, err := db.AddSuppression(ctx, b.db.Pool, db.Suppression{Address: "m03@example.com", Reason: "operator", Scope: db.ScopeAll, Source: "test"}, b.clock.Now()); err != nil {
		t.Fatal(err)
	}
	if err := b.workAs(ctx, 500, ids[0], 2); err != nil {
		t.Fatalf("retry: %v", err)
	}
	for i, id := range ids {
		if err := b.workAs(ctx, int64(600+i), id, 1); err != nil {
			t.Fatal(err)
		}
	}
	srv.WaitFor(t, 2, 10*time.Second)
	for i, id := range ids {
		want := db.StateSent
		if i == 3 {
			want = db.StateCanceled
		}
		if st := b.batch(t, id).State; st != want {
			t.Errorf("batch of m%02d is %s, want %s", i, st, want)
		}
	}
}
