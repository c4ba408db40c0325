package jobs_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/riverqueue/river"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/mail"
	"github.com/lull-dev/lull/mail/smtptest"
	"github.com/lull-dev/lull/mailtemplates"
)

func smtpSetup(t *testing.T) (*testBundle, *smtptest.Server) {
	t.Helper()
	b := setup(t)
	srv := smtptest.Start(t)
	s, err := mail.NewSMTP(mail.SMTPConfig{URL: srv.URL()}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	b.withSender(s)
	b.saveType(t, db.Type{Key: "alert", DefaultMode: "immediate"})
	b.recipient(t, "bob", "UTC")
	return b, srv
}

func TestTemporarySMTPFailureRetriesWithTheSameMessageID(t *testing.T) {
	t.Parallel()
	b, srv := smtpSetup(t)
	id := b.post(t, "alert", "system", "bob").Batches[0].ID
	srv.FailNext(451, "4.3.0 try again later", 1)
	ctx := context.Background()
	err := b.workAs(ctx, 7, id, 1)
	if err == nil || !mail.IsTemporary(err) {
		t.Fatalf("first attempt: %v, want a temporary error for River to retry", err)
	}
	if got := b.batch(t, id).State; got != db.StateFlushing {
		t.Fatalf("after a 451 the batch is %s, want flushing", got)
	}
	if err := b.workAs(ctx, 7, id, 2); err != nil {
		t.Fatalf("retry: %v", err)
	}
	msgs := srv.WaitFor(t, 1, 5*time.Second)
	d, err := db.GetDeliveryByBatch(ctx, b.db.Pool, id)
	if err != nil {
		t.Fatal(err)
	}
	// The delivery recorded the first attempt's Message-ID.
	if got := msgs[0].Header.Get("Message-Id"); len(msgs) != 1 || got != "<"+d.MessageID+">" || !strings.HasPrefix(got, "<batch-"+itoa(id)+".") {
		t.Fatalf("got %d messages, Message-ID %q, want <%s>", len(msgs), got, d.MessageID)
	}
	attempts, _ := db.DeliveryAttempts(ctx, b.db.Pool, d.ID)
	if d.State != "sent" || d.Attempts != 2 || len(attempts) != 2 || !strings.Contains(attempts[0].Answer, "451") {
		t.Fatalf("delivery %s after %d attempts (%+v), want sent after 2 with the 451 logged", d.State, d.Attempts, attempts)
	}
}

func TestPermanentSMTPFailureFailsTheBatchWithTheAnswer(t *testing.T) {
	t.Parallel()
	b, srv := smtpSetup(t)
	id := b.post(t, "alert", "system", "bob").Batches[0].ID
	srv.FailNext(550, "5.1.1 no such user", 1)
	err := b.work(context.Background(), id, 1)
	var cancel *river.JobCancelError
	if !errors.As(err, &cancel) {
		t.Fatalf("a 550 gave %v, want the job canceled (no retry)", err)
	}
	got := b.batch(t, id)
	if got.State != db.StateFailed || !strings.Contains(got.Reason, "no such user") {
		t.Fatalf("batch %s (%q), want failed with the server's answer", got.State, got.Reason)
	}
	d, _ := db.GetDeliveryByBatch(context.Background(), b.db.Pool, id)
	if d.State != "failed" || !strings.Contains(d.LastError, "550") {
		t.Fatalf("delivery %s (%q), want failed with 550", d.State, d.LastError)
	}
}

func TestLastTemporaryFailureFailsVisibly(t *testing.T) {
	t.Parallel()
	b, srv := smtpSetup(t)
	id := b.post(t, "alert", "system", "bob").Batches[0].ID
	srv.FailNext(451, "still down", 1)
	if err := b.workAs(context.Background(), 9, id, 8); err == nil {
		t.Fatal("the eighth failed attempt returned nil")
	}
	if got := b.batch(t, id).State; got != db.StateFailed {
		t.Fatalf("after the last attempt the batch is %s, want failed", got)
	}
}

// senderFunc adapts a function to mail.Sender.
type senderFunc func(context.Context, *mailtemplates.Message) error

func (f senderFunc) Send(ctx context.Context, m *mailtemplates.Message) error { return f(ctx, m) }

// At-most-once, the sweep flags as possibly lost a delivery marked sent
// and not confirmed for longer than RescueAfter, presuming its process
// dead. A live process whose confirmation is merely slow to be recorded
// (the pool busy, the database slow) gets flagged too; once the server's
// acceptance is recorded, the delivery must not stay listed as possibly
// lost, or operators chase emails that arrived.
func TestConfirmedSendIsNotLeftPossiblyLost(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.flush.AtMostOnce = true
	outbox := &mail.Outbox{DB: b.db}
	b.withSender(senderFunc(func(ctx context.Context, m *mailtemplates.Message) error {
		// The sweep runs while the send is in flight and judges it stale.
		if err := db.FlagUnconfirmed(ctx, b.db.Pool, b.clock.Now().Add(time.Hour)); err != nil {
			return err
		}
		return outbox.Send(ctx, m)
	}))
	b.saveType(t, db.Type{Key: "alert", DefaultMode: "immediate"})
	b.recipient(t, "bob", "UTC")
	id := b.post(t, "alert", "system", "bob").Batches[0].ID
	if err := b.work(context.Background(), id, 1); err != nil {
		t.Fatal(err)
	}
	d, err := db.GetDeliveryByBatch(context.Background(), b.db.Pool, id)
	if err != nil {
		t.Fatal(err)
	}
	if !d.Confirmed || d.PossiblyLost {
		t.Fatalf("delivery confirmed %v, possibly lost %v; want confirmed and not lost", d.Confirmed, d.PossiblyLost)
	}
}

// At-most-once, a second flush job for a batch (the sweep's, an
// operator's) that runs while the first is still talking to SMTP finds
// the batch marked sent and unconfirmed. That is no sign of a lost email:
// the send is in flight. Here it then fails with a 451, so the email is
// known not sent and will be retried; it must not be listed as possibly
// lost, and the retry must send it once.
func TestSecondJobDoesNotFlagASendInFlight(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.flush.AtMostOnce = true
	ctx := context.Background()
	outbox := &mail.Outbox{DB: b.db}
	var id int64
	calls := 0
	b.withSender(senderFunc(func(ctx context.Context, m *mailtemplates.Message) error {
		if calls++; calls == 1 {
			if err := b.workAs(ctx, 99, id, 1); err != nil {
				return err
			}
			return &mail.SendError{Temporary: true, Code: 451, Answer: "451 4.3.0 try again later"}
		}
		return outbox.Send(ctx, m)
	}))
	b.saveType(t, db.Type{Key: "alert", DefaultMode: "immediate"})
	b.recipient(t, "bob", "UTC")
	id = b.post(t, "alert", "system", "bob").Batches[0].ID
	if err := b.workAs(ctx, 7, id, 1); !mail.IsTemporary(err) {
		t.Fatalf("first attempt: %v, want the 451 back for River to retry", err)
	}
	d, err := db.GetDeliveryByBatch(ctx, b.db.Pool, id)
	if err != nil {
		t.Fatal(err)
	}
	if d.PossiblyLost {
		t.Fatal("a send known to have failed is listed as possibly lost")
	}
	if err := b.workAs(ctx, 7, id, 2); err != nil {
		t.Fatalf("retry: %v", err)
	}
	if got := len(b.outbox(t)); got != 1 {
		t.Fatalf("%d emails after the retry, want 1", got)
	}
}

// A relay that closes the connection after a message's final dot without
// answering may have accepted it. At least once, the email is retried
// and sent again, never counted sent on no answer; at most once, it is
// not offered again but listed as possibly lost.
func TestUnansweredMessage(t *testing.T) {
	t.Parallel()
	for _, atMostOnce := range []bool{false, true} {
		t.Run(fmt.Sprintf("AtMostOnce%v", atMostOnce), func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			b.flush.AtMostOnce = atMostOnce
			srv := smtptest.Start(t)
			s, err := mail.NewSMTP(mail.SMTPConfig{URL: srv.URL()}, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(s.Close)
			b.withSender(s)
			srv.DropAfterData(1)
			b.saveType(t, db.Type{Key: "alert", DefaultMode: "immediate"})
			b.recipient(t, "bob", "UTC")
			ctx := context.Background()
			id := b.post(t, "alert", "system", "bob").Batches[0].ID
			if err := b.workAs(ctx, 7, id, 1); !mail.IsTemporary(err) {
				t.Fatalf("first attempt: %v, want a temporary failure for River to retry", err)
			}
			if st := b.batch(t, id).State; !atMostOnce && st == db.StateSent {
				t.Fatal("an unanswered message was counted sent")
			}
			if err := b.workAs(ctx, 7, id, 2); err != nil {
				t.Fatalf("retry: %v", err)
			}
			d, err := db.GetDeliveryByBatch(ctx, b.db.Pool, id)
			if err != nil {
				t.Fatal(err)
			}
			want, lost := 2, false
			if atMostOnce {
				want, lost = 1, true
			}
			if n := srv.Received(); n != want || d.PossiblyLost != lost || b.batch(t, id).State != db.StateSent {
				t.Errorf("%d copies arrived, possibly lost %v, batch %s; want %d, %v, sent", n, d.PossiblyLost, b.batch(t, id).State, want, lost)
			}
		})
	}
}

// A notification read in the app while its batch waits to retry a
// temporary failure is left out of the email the retry sends, and so must
// be in the skip log: the retry composes the batch again, and only what
// the first attempt left out was logged.
func TestRetryLogsWhatWasReadSinceTheFirstAttempt(t *testing.T) {
	t.Parallel()
	b, srv := smtpSetup(t)
	b.saveType(t, db.Type{Key: "comment", SkipRead: true})
	id := b.post(t, "comment", "ann", "bob").Batches[0].ID
	b.post(t, "comment", "cy", "bob")
	ctx := context.Background()
	if err := b.engine.FlushNow(ctx, id); err != nil {
		t.Fatal(err)
	}
	srv.FailNext(451, "4.3.0 try again later", 1)
	if err := b.workAs(ctx, 7, id, 1); err == nil || !mail.IsTemporary(err) {
		t.Fatalf("first attempt: %v, want a temporary error", err)
	}
	unread := b.unread(t, "bob")
	if _, err := b.engine.MarkRead(ctx, "bob", unread[:1], nil); err != nil {
		t.Fatal(err)
	}
	if err := b.workAs(ctx, 7, id, 2); err != nil {
		t.Fatalf("retry: %v", err)
	}
	srv.WaitFor(t, 1, 5*time.Second)
	if got := b.count(t, `SELECT coalesce(sum(items), 0)::int FROM skips WHERE batch_id = $1 AND reason = $2`, id, db.SkipRead); got != 1 {
		t.Fatalf("skip log holds %d items read in the app for the batch, want the 1 read between attempts", got)
	}
}
