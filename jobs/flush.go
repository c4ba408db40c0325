package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/jobs/mailer"
	"github.com/lull-dev/lull/jobs/metrics"
	"github.com/lull-dev/lull/mailtemplates"
	"github.com/lull-dev/lull/preferences"
	"github.com/lull-dev/lull/preferences/batching"
)

// FlushArgs asks for one batch to be flushed.
type FlushArgs struct {
	BatchID int64 `json:"batch_id"`
}

// Kind is River's name for the job.
func (FlushArgs) Kind() string { return "flush_batch" }

// InsertOpts gives a flush eight tries: temporary SMTP failures retry with
// the backoff of FlushWorker.NextRetry, about half an hour in all.
func (FlushArgs) InsertOpts() river.InsertOpts { return river.InsertOpts{MaxAttempts: 8} }

// FlushWorker turns a due batch into one email.
//
// A flush runs in three steps. First, in one transaction holding the
// batch's row lock: check the batch is still open and due, check the
// recipient still wants it, render it, and move it to "flushing" owned by
// this job. Then send, with no lock held. Then record the outcome. Because
// the state moves away from "open" in the first step, events arriving
// during the send open a new batch, and a second job for the same batch
// finds nothing to do: each batch is sent by exactly one job.
type FlushWorker struct {
	river.WorkerDefaults[FlushArgs]
	DB     *db.DB
	Sender mailer.Sender
	Links  mailtemplates.Links
	From   string
	// AtMostOnce marks a delivery sent before SMTP is asked, so a crash
	// mid-send can lose an email but never send one twice.
	AtMostOnce bool
	Logger     *slog.Logger
	Now        func() time.Time
	// Metrics counts flushes and deliveries; nil counts nothing.
	Metrics *metrics.Metrics
	// RetryBase is the wait before the first retry after a temporary
	// failure, doubled at every later one (15 s when zero). Tests shorten
	// it to watch a whole outage and its backoff in seconds.
	RetryBase time.Duration
}

func (w *FlushWorker) now() time.Time {
	if w.Now != nil {
		return w.Now()
	}
	return time.Now()
}

// NextRetry backs off exponentially from RetryBase (15 s) with ±20%
// jitter: eight attempts span about half an hour, and many failed
// deliveries do not retry in lockstep against a recovering mail server.
func (w *FlushWorker) NextRetry(job *river.Job[FlushArgs]) time.Time {
	base := w.RetryBase
	if base <= 0 {
		base = 15 * time.Second
	}
	d := base << min(job.Attempt-1, 10)
	jitter := 0.8 + 0.4*rand.Float64()
	return time.Now().Add(time.Duration(float64(d) * jitter))
}

// sendPlan is what the first step decided to send.
type sendPlan struct {
	batchID  int64
	closesAt time.Time
	delivery *db.Delivery
	msg      *mailtemplates.Message
	// canceled says the batch was canceled instead: nothing to send.
	canceled bool
}

// Work flushes the batch.
func (w *FlushWorker) Work(ctx context.Context, job *river.Job[FlushArgs]) error {
	var plan *sendPlan
	var snooze time.Duration
	// In at-least-once mode losing this step in a crash only means the
	// batch is flushed again, so its commit need not wait for the disk;
	// the outcome recorded after sending is durable. In at-most-once mode
	// this step marks the email sent and must be durable before SMTP.
	inTx := w.DB.InTxAsyncCommit
	if w.AtMostOnce {
		inTx = w.DB.InTx
	}
	err := inTx(ctx, func(tx pgx.Tx) (err error) {
		plan, snooze, err = w.prepare(ctx, tx, job)
		return err
	})
	switch {
	case err != nil:
		w.Metrics.Flushed(metrics.FlushError)
		return fmt.Errorf("flush batch %d: %w", job.Args.BatchID, err)
	case snooze > 0:
		w.Metrics.Flushed(metrics.FlushSnoozed)
		return river.JobSnooze(snooze)
	case plan == nil:
		w.Metrics.Flushed(metrics.FlushSkipped)
		return nil
	case plan.canceled:
		w.Metrics.Flushed(metrics.FlushCanceled)
		return nil
	}
	return w.send(ctx, job, plan)
}

// prepare is step one. It returns a plan to send, a snooze when the batch
// is not due yet, or neither when there is nothing to do.
func (w *FlushWorker) prepare(ctx context.Context, tx pgx.Tx, job *river.Job[FlushArgs]) (*sendPlan, time.Duration, error) {
	now := w.now()
	fc, err := db.LockForFlush(ctx, tx, job.Args.BatchID)
	if errors.Is(err, db.ErrNotFound) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	b := fc.Batch
	switch b.State {
	case db.StateOpen:
		if b.ClosesAt.After(now) {
			// The window slid since this job was scheduled: wake up again
			// when the batch now closes.
			return nil, b.ClosesAt.Sub(now), nil
		}
	case db.StateFlushing:
		// Only the job that took the batch may resend it (after a crash or
		// a temporary failure); any other job for it is a duplicate. The
		// sweep clears the owner of a batch whose process died.
		if b.FlushJobID != nil && *b.FlushJobID != job.ID {
			return nil, 0, nil
		}
	case db.StateSent:
		// At-most-once marks a batch sent before SMTP answers. Only the
		// job that marked it, run again, knows that its send died with
		// its process or went unrecorded. Any other job for the batch
		// (the sweep's, an operator's) may be racing a send still in
		// flight, and must not call it lost; the sweep flags a marking
		// left unconfirmed for RescueAfter in any case.
		if w.AtMostOnce && b.FlushJobID != nil && *b.FlushJobID == job.ID {
			return nil, 0, w.flagLost(ctx, tx, b.ID)
		}
		return nil, 0, nil
	default:
		return nil, 0, nil
	}

	content, reason, err := w.check(fc)
	if err != nil {
		return nil, 0, err
	}
	if reason != "" {
		return &sendPlan{batchID: b.ID, canceled: true}, 0, w.cancel(ctx, tx, b, reason, now)
	}
	msg, err := w.render(content, now)
	if err != nil {
		return nil, 0, err
	}
	d, err := db.StartDelivery(ctx, tx, b.ID, job.ID, msg.MessageID, msg.To, msg.Subject, w.AtMostOnce, now)
	if err != nil {
		return nil, 0, err
	}
	return &sendPlan{batchID: b.ID, closesAt: b.ClosesAt, delivery: d, msg: msg}, 0, nil
}

// check looks at the recipient's preferences again: anything muted or
// unsubscribed since the batch opened is dropped, and a reason is returned
// when nothing is left to send.
func (w *FlushWorker) check(fc *db.FlushContent) (mailtemplates.BatchContent, string, error) {
	c := mailtemplates.BatchContent{Batch: fc.Batch, Types: fc.Types}
	var rec *db.Recipient
	policies := make(map[string]preferences.Policy, len(fc.Types))
	for key, typ := range fc.Types {
		rs, ok := fc.Settings[key]
		if !ok {
			return c, db.SkipInactive, nil
		}
		rec = &rs.Recipient
		policies[key] = preferences.Effective(batching.TypeDefaults(typ), batching.Override(rs.Pref), rs.Unsubscribed)
	}
	reason := db.SkipRetracted
	for _, it := range fc.Items {
		typ, ok := c.Types[it.TypeKey]
		switch {
		case !ok:
			return c, "", fmt.Errorf("type %s: %w", it.TypeKey, db.ErrNotFound)
		case it.ReadAt != nil && typ.SkipRead:
			reason = db.SkipRead
		case policies[it.TypeKey].Mode == preferences.Never:
			reason = db.SkipMuted
			if rec.Unsubscribed {
				reason = db.SkipUnsubscribed
			}
		default:
			c.Items = append(c.Items, it)
		}
	}
	switch {
	case rec != nil && !rec.Active:
		return c, db.SkipInactive, nil
	case len(c.Items) == 0:
		return c, reason, nil
	case rec.Email == "":
		return c, db.SkipNoEmail, nil
	}
	c.Recipient = rec
	return c, "", nil
}

func (w *FlushWorker) render(c mailtemplates.BatchContent, now time.Time) (*mailtemplates.Message, error) {
	in := mailtemplates.InputFromBatch(c)
	in.From = w.From
	in.MessageID = mailtemplates.MessageID(c.Batch.ID, w.From)
	in.Date = now
	in.SettingsURL, _ = w.Links.SettingsURL(c.Recipient.ID, now)
	in.UnsubscribeURL = w.Links.UnsubscribeURL(c.Recipient.ID, now)
	return mailtemplates.Render(in)
}

func (w *FlushWorker) cancel(ctx context.Context, tx pgx.Tx, b *db.Batch, reason string, now time.Time) error {
	if err := db.SetBatchState(ctx, tx, b.ID, db.StateCanceled, reason, 0, now); err != nil {
		return err
	}
	typ := ""
	if b.TypeKey != nil {
		typ = *b.TypeKey
	}
	return db.InsertSkips(ctx, tx, []db.Skip{{RecipientID: b.RecipientID, TypeKey: typ, BatchID: &b.ID, Items: b.ItemCount, Reason: reason}})
}

// flagLost handles an at-most-once batch found "sent" by a job that runs
// again: the process that marked it died before SMTP confirmed, so the
// email may never have left.
func (w *FlushWorker) flagLost(ctx context.Context, tx pgx.Tx, batchID int64) error {
	d, err := db.GetDeliveryByBatch(ctx, tx, batchID)
	if err != nil || d.Confirmed {
		return nil
	}
	w.Logger.Warn("email possibly lost (at-most-once)", "batch", batchID, "message_id", d.MessageID)
	return db.MarkPossiblyLost(ctx, tx, d.ID)
}

// send is steps two and three: hand the email to the sender and record
// what happened. A temporary failure returns an error so River retries the
// job; a permanent one, or the last try, fails the batch visibly.
func (w *FlushWorker) send(ctx context.Context, job *river.Job[FlushArgs], plan *sendPlan) error {
	sendErr := w.Sender.Send(ctx, plan.msg)
	now := w.now()
	final := sendErr == nil || !mailer.IsTemporary(sendErr) || job.Attempt >= job.MaxAttempts
	w.Metrics.Delivered(sendErr, final, now.Sub(plan.closesAt))
	err := w.DB.Pipeline(context.WithoutCancel(ctx), func(tx db.Querier) error {
		// The batch row first, then the delivery's, in the order prepare
		// and flagLost lock them: the other order deadlocks against a
		// job that holds the batch and waits for the delivery.
		switch {
		case sendErr == nil:
			if err := db.SetBatchState(ctx, tx, plan.batchID, db.StateSent, "", 0, now); err != nil {
				return err
			}
			return db.RecordAttempt(ctx, tx, plan.delivery.ID, true, "ok", db.StateSent, now)
		case final:
			if err := db.SetBatchState(ctx, tx, plan.batchID, db.StateFailed, sendErr.Error(), 0, now); err != nil {
				return err
			}
			return db.RecordAttempt(ctx, tx, plan.delivery.ID, false, sendErr.Error(), db.StateFailed, now)
		default:
			state := ""
			if w.AtMostOnce {
				// Known not sent: back to flushing so the retry may send it.
				state = "sending"
				if err := db.SetBatchState(ctx, tx, plan.batchID, db.StateFlushing, "", job.ID, now); err != nil {
					return err
				}
			}
			return db.RecordAttempt(ctx, tx, plan.delivery.ID, false, sendErr.Error(), state, now)
		}
	})
	if err != nil {
		w.Metrics.Flushed(metrics.FlushError)
		return fmt.Errorf("record delivery of batch %d: %w", plan.batchID, err)
	}
	switch {
	case sendErr == nil:
		w.Metrics.Flushed(metrics.FlushSent)
		return nil
	case final:
		w.Metrics.Flushed(metrics.FlushFailed)
		w.Logger.Warn("delivery failed", "batch", plan.batchID, "err", sendErr)
		return river.JobCancel(sendErr)
	default:
		w.Metrics.Flushed(metrics.FlushRetry)
		return fmt.Errorf("send batch %d: %w", plan.batchID, sendErr)
	}
}
