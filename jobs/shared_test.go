package jobs_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/mail"
	"github.com/lull-dev/lull/mail/smtptest"
	"github.com/lull-dev/lull/mailtemplates"
	"github.com/lull-dev/lull/preferences/batching"
)

// team registers a failed-task type (shared or not) and n members, and
// floods events failed tasks to all of them; it returns the batches.
func team(t *testing.T, b *testBundle, shared bool, n, events int) []int64 {
	t.Helper()
	b.saveType(t, db.Type{Key: "task.failed", Name: "Failed tasks", DefaultMode: "cooldown", WindowMS: 60_000,
		ItemText: "{{object.title}} failed", GroupText: "Task failed|{{count}} tasks failed", SkipRead: true,
		SharedDelivery: shared})
	var to []batching.RecipientRef
	for i := range n {
		id := fmt.Sprintf("m%02d", i)
		b.recipient(t, id, "UTC")
		to = append(to, ref(id))
	}
	var ids []int64
	for i := range events {
		res, err := b.engine.Ingest(context.Background(), 1, &batching.Event{Type: "task.failed",
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

func smtpBundle(t *testing.T) (*testBundle, *smtptest.Server) {
	t.Helper()
	b := setup(t)
	srv := smtptest.Start(t, smtptest.KeepAll())
	s, err := mail.NewSMTP(mail.SMTPConfig{URL: srv.URL()}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	b.withSender(s)
	return b, srv
}

// A flood of 300 failed tasks to a 50-person team with a shared-delivery
// type is one email with the 50 members as its envelope recipients,
// listing the 300 failures, and every member's batch ends sent with that
// email's Message-ID. Without the option it is 50 emails.
func TestSharedDeliveryFloodToATeamIsOneEmail(t *testing.T) {
	t.Parallel()
	for _, shared := range []bool{true, false} {
		t.Run(fmt.Sprintf("Shared%v", shared), func(t *testing.T) {
			t.Parallel()
			b, srv := smtpBundle(t)
			ids := team(t, b, shared, 50, 300)
			if len(ids) != 50 {
				t.Fatalf("%d batches, want 50", len(ids))
			}
			b.flushDue(t)
			want := 50
			if shared {
				want = 1
			}
			msgs := srv.WaitFor(t, want, 10*time.Second)
			time.Sleep(200 * time.Millisecond) // anything more would arrive now
			if got := srv.Received(); got != want {
				t.Fatalf("%d emails, want %d", got, want)
			}
			ctx := context.Background()
			first, err := db.GetDeliveryByBatch(ctx, b.db.Pool, ids[0])
			if err != nil {
				t.Fatal(err)
			}
			for _, id := range ids {
				d, err := db.GetDeliveryByBatch(ctx, b.db.Pool, id)
				if err != nil || b.batch(t, id).State != db.StateSent || d.State != db.StateSent {
					t.Fatalf("batch %d: %v, want sent", id, err)
				}
				if shared && d.MessageID != first.MessageID {
					t.Fatalf("batch %d sent as %s, the shared email is %s", id, d.MessageID, first.MessageID)
				}
			}
			if !shared {
				return
			}
			m := msgs[0]
			if len(m.To) != 50 || m.Header.Get("To") != "undisclosed-recipients:;" || m.Header.Get("Message-Id") != "<"+first.MessageID+">" {
				t.Fatalf("%d envelope recipients, To %q, Message-ID %s", len(m.To), m.Header.Get("To"), m.Header.Get("Message-Id"))
			}
			if !strings.Contains(m.Header.Get("List-Unsubscribe"), "/unsubscribe/shared?token=") || m.Header.Get("List-Unsubscribe-Post") != "" {
				t.Fatalf("List-Unsubscribe %q, Post %q: want the shared page, no one-click", m.Header.Get("List-Unsubscribe"), m.Header.Get("List-Unsubscribe-Post"))
			}
			body := string(m.Data)
			if !strings.Contains(body, "300 tasks failed") || strings.Contains(body, "m01@example.com") {
				t.Fatalf("the shared email does not list the 300 failures, or shows an address:\n%s", body[:min(len(body), 3000)])
			}
			together, err := db.SharedWith(ctx, b.db.Pool, ids[7])
			if err != nil || len(together) != 50 {
				t.Fatalf("batch %d went out with %d batches (%v), want 50", ids[7], len(together), err)
			}
		})
	}
}

// A suppressed member is left out of the shared email and logged as
// skipped as a single send would be; a member in another time zone gets
// an email of their own, whose times read in their zone.
func TestSharedDeliveryLeavesOutSuppressedAndOtherZones(t *testing.T) {
	t.Parallel()
	b, srv := smtpBundle(t)
	ctx := context.Background()
	b.recipient(t, "m03", "UTC")
	ids := team(t, b, true, 10, 3)
	if _, _, err := db.AddSuppression(ctx, b.db.Pool, db.Suppression{Address: "m03@example.com", Reason: "operator", Scope: db.ScopeAll, Source: "test"}, b.clock.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := b.db.Pool.Exec(ctx, "UPDATE recipients SET timezone = 'Asia/Tokyo' WHERE id = 'm05'"); err != nil {
		t.Fatal(err)
	}
	b.flushDue(t)
	msgs := srv.WaitFor(t, 2, 10*time.Second)
	time.Sleep(200 * time.Millisecond)
	if got := srv.Received(); got != 2 {
		t.Fatalf("%d emails, want 2 (the team's and m05's)", got)
	}
	slices.SortFunc(msgs, func(a, b smtptest.Received) int { return len(b.To) - len(a.To) })
	if len(msgs[0].To) != 8 || slices.Contains(msgs[0].To, "m03@example.com") || slices.Contains(msgs[0].To, "m05@example.com") {
		t.Fatalf("the shared email went to %v, want 8 members without m03 and m05", msgs[0].To)
	}
	if len(msgs[1].To) != 1 || msgs[1].To[0] != "m05@example.com" {
		t.Fatalf("the second email went to %v, want m05 alone", msgs[1].To)
	}
	if got := b.count(t, "SELECT count(*) FROM skips WHERE recipient_id = 'm03' AND reason = 'suppressed'"); got != 1 {
		t.Fatalf("%d skips logged for the suppressed member, want 1", got)
	}
	if st := b.batch(t, ids[3]).State; st != db.StateCanceled {
		t.Fatalf("the suppressed member's batch is %s, want canceled", st)
	}
}

// errCrash stands for the process dying between SMTP accepting a shared
// email and the flush recording it.
var errCrash = errors.New("crash")

// A shared delivery whose process dies after the send and before the
// outcome is recorded is retried by its job: at-least-once it goes out
// once more, with the same Message-ID to the same members, and every
// batch ends sent; at-most-once it never goes out twice and the members'
// deliveries are flagged possibly lost, to be looked at. The members' own
// jobs, run afterwards, send nothing.
func TestSharedDeliveryCrashBetweenSendAndRecord(t *testing.T) {
	t.Parallel()
	for _, atMostOnce := range []bool{false, true} {
		t.Run(fmt.Sprintf("AtMostOnce%v", atMostOnce), func(t *testing.T) {
			t.Parallel()
			b, srv := smtpBundle(t)
			b.flush.AtMostOnce = atMostOnce
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
			ids := team(t, b, true, 12, 5)
			ctx := context.Background()
			func() {
				defer func() {
					if r := recover(); r != errCrash {
						t.Fatalf("the first attempt did not crash: %v", r)
					}
				}()
				b.workAs(ctx, 500, ids[0], 1)
			}()
			if err := b.workAs(ctx, 500, ids[0], 2); err != nil {
				t.Fatalf("retry: %v", err)
			}
			for i, id := range ids {
				if err := b.workAs(ctx, int64(600+i), id, 1); err != nil {
					t.Fatal(err)
				}
			}
			want := 2
			if atMostOnce {
				want = 1
			}
			srv.WaitFor(t, want, 10*time.Second)
			time.Sleep(200 * time.Millisecond)
			counts := srv.MessageIDCounts()
			if srv.Received() != want || len(counts) != 1 {
				t.Fatalf("%d emails with Message-IDs %v, want %d of one", srv.Received(), counts, want)
			}
			for _, m := range srv.Messages() {
				if len(m.To) != 12 {
					t.Fatalf("an email went to %d members, want 12", len(m.To))
				}
			}
			for _, id := range ids {
				d, err := db.GetDeliveryByBatch(ctx, b.db.Pool, id)
				if err != nil || b.batch(t, id).State != db.StateSent || d.State != db.StateSent {
					t.Fatalf("batch %d not sent: %v", id, err)
				}
				if atMostOnce != d.PossiblyLost {
					t.Fatalf("batch %d possibly lost %v", id, d.PossiblyLost)
				}
			}
		})
	}
}

// A member whose mailbox the server refuses (550 at RCPT) stops a shared
// email for everyone, since the message then goes to nobody: each member
// gets their own email instead, and only the refused one fails, with the
// server's answer.
func TestSharedDeliveryRefusedMemberGetsOthersTheirOwn(t *testing.T) {
	t.Parallel()
	b, srv := smtpBundle(t)
	srv.RefuseRcpt("m02@example.com", 550, "5.1.1 no such user")
	ids := team(t, b, true, 5, 3)
	b.flushDue(t)
	msgs := srv.WaitFor(t, 4, 10*time.Second)
	time.Sleep(200 * time.Millisecond)
	if got := srv.Received(); got != 4 {
		t.Fatalf("%d emails, want 4 (each member but the refused one, alone)", got)
	}
	for _, m := range msgs {
		if len(m.To) != 1 || m.To[0] == "m02@example.com" {
			t.Fatalf("an email went to %v", m.To)
		}
	}
	for i, id := range ids {
		want := db.StateSent
		if i == 2 {
			want = db.StateFailed
		}
		if got := b.batch(t, id); got.State != want || (i == 2 && !strings.Contains(got.Reason, "no such user")) {
			t.Fatalf("batch of m%02d is %s (%q), want %s", i, got.State, got.Reason, want)
		}
	}
}

// A team larger than an email's recipient cap (100) gets several shared
// emails, every member exactly once.
func TestSharedDeliverySplitsAHugeTeam(t *testing.T) {
	t.Parallel()
	b, srv := smtpBundle(t)
	team(t, b, true, 230, 1)
	b.flushDue(t)
	msgs := srv.WaitFor(t, 3, 20*time.Second)
	time.Sleep(200 * time.Millisecond)
	seen := map[string]int{}
	var sizes []int
	for _, m := range srv.Messages() {
		sizes = append(sizes, len(m.To))
		for _, to := range m.To {
			seen[to]++
		}
	}
	slices.Sort(sizes)
	if srv.Received() != 3 || !slices.Equal(sizes, []int{30, 100, 100}) || len(seen) != 230 || len(msgs) != 3 {
		t.Fatalf("%d emails of %v recipients reaching %d members, want 3 of 100, 100 and 30 reaching 230", srv.Received(), sizes, len(seen))
	}
	for to, n := range seen {
		if n != 1 {
			t.Fatalf("%s got %d emails", to, n)
		}
	}
}

// A type switched to shared delivery while its batches are open shares
// them at their flush: the flush reads the type as it is then.
func TestSharedDeliveryTurnedOnWhileBatchesAreOpen(t *testing.T) {
	t.Parallel()
	b, srv := smtpBundle(t)
	ids := team(t, b, false, 6, 2)
	typ, err := db.GetType(context.Background(), b.db.Pool, "task.failed")
	if err != nil {
		t.Fatal(err)
	}
	typ.SharedDelivery = true
	if err := db.SaveType(context.Background(), b.db.Pool, typ); err != nil {
		t.Fatal(err)
	}
	b.flushDue(t)
	msgs := srv.WaitFor(t, 1, 10*time.Second)
	time.Sleep(200 * time.Millisecond)
	if srv.Received() != 1 || len(msgs[0].To) != 6 {
		t.Fatalf("%d emails, the first to %d members; want one to all 6", srv.Received(), len(msgs[0].To))
	}
	for _, id := range ids {
		if st := b.batch(t, id).State; st != db.StateSent {
			t.Fatalf("batch %d is %s", id, st)
		}
	}
}

// Members in several time zones, their batches interleaved, get one
// shared email per zone: each email takes along only its own zone's
// members, not the first batches by id whatever their zone.
func TestSharedDeliveryPacksEachZone(t *testing.T) {
	t.Parallel()
	b, srv := smtpBundle(t)
	team(t, b, true, 400, 1)
	zones := []string{"UTC", "Asia/Tokyo", "Europe/Berlin", "America/New_York"}
	for i, z := range zones {
		if _, err := b.db.Pool.Exec(context.Background(), `UPDATE recipients SET timezone = $1
			WHERE id LIKE 'm%' AND substr(id, 2)::int % 4 = $2`, z, i); err != nil {
			t.Fatal(err)
		}
	}
	b.flushDue(t)
	srv.WaitFor(t, 4, 20*time.Second)
	time.Sleep(300 * time.Millisecond)
	var sizes []int
	for _, m := range srv.Messages() {
		sizes = append(sizes, len(m.To))
	}
	if !slices.Equal(sizes, []int{100, 100, 100, 100}) {
		t.Fatalf("emails of %v recipients, want 4 of 100, one per zone", sizes)
	}
}

// A shared email about one conversation carries no mute link: every
// member's email would offer the first member's, and anyone of the team
// could mute that member's conversation with it.
func TestSharedDeliveryCarriesNoMuteLink(t *testing.T) {
	t.Parallel()
	b, srv := smtpBundle(t)
	b.saveType(t, db.Type{Key: "task.failed", Name: "Failed tasks", DefaultMode: "cooldown", WindowMS: 60_000,
		ItemText: "{{object.title}} failed", SharedDelivery: true})
	var to []batching.RecipientRef
	for i := range 3 {
		id := fmt.Sprintf("m%02d", i)
		b.recipient(t, id, "UTC")
		to = append(to, ref(id))
	}
	_, err := b.engine.Ingest(context.Background(), 1, &batching.Event{Type: "task.failed", BatchKey: "build:7",
		Actor: batching.Actor{ID: "ci", Name: "CI"}, Recipients: to, Object: batching.Object{Type: "task", ID: "1", Title: "task 1"}})
	if err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(2 * time.Minute)
	b.flushDue(t)
	msgs := srv.WaitFor(t, 1, 10*time.Second)
	if len(msgs[0].To) != 3 || strings.Contains(string(msgs[0].Data), "/mute?token=") {
		t.Fatalf("%d envelope recipients; the shared email:\n%s", len(msgs[0].To), msgs[0].Data)
	}
}
