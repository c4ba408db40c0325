package jobs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/db/coalesce"
	"github.com/lull-dev/lull/mail"
	"github.com/lull-dev/lull/mailtemplates"
	"github.com/lull-dev/lull/metrics"
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
	Sender mail.Sender
	Links  mailtemplates.Links
	From   string
	// DefaultLocale is the language of recipients without one of their own.
	DefaultLocale string
	// Brands is the host product's brand for every email; nil is neutral.
	Brands *batching.Brands
	// AtMostOnce marks a delivery sent before SMTP is asked, so a crash
	// mid-send can lose an email but never send one twice.
	AtMostOnce bool
	Logger     *slog.Logger
	Now        func() time.Time
	// Metrics counts flushes and deliveries; nil counts nothing.
	Metrics *metrics.Metrics
	// DailyBudget is the installation's daily email budget per recipient
	// (LULL_DAILY_EMAIL_BUDGET), for recipients and types that set none;
	// 0 is no limit.
	DailyBudget int
	// Scheduler gives the held digest of an over-budget recipient its
	// flush job; nil leaves it to the sweep.
	Scheduler batching.Scheduler
	// RetryBase is the wait before the first retry after a temporary
	// failure, doubled at every later one (15 s when zero). Tests shorten
	// it to watch a whole outage and its backoff in seconds.
	RetryBase time.Duration

	// Flushes running at the same moment share their database work
	// (group.go): one transaction locks, reads and starts a set of
	// them, and one round trip records a set's outcomes.
	prepares coalesce.Group[flushCall, prepared]
	records  coalesce.Group[outcome, error]
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
	jobID    int64
	closesAt time.Time
	// content is the batch as read under its lock; msg the email
	// composed from it.
	content  *db.FlushContent
	msg      *mailtemplates.Message
	delivery *db.Delivery
	// skip is why the batch is canceled instead: nothing to send.
	skip string
	// dropped is the skip log of what the recipient no longer wants,
	// left out of an email that still goes out, and read what it leaves
	// out as read in the app; again says the batch was composed before (a
	// retry, a takeover), so part of it may be logged.
	dropped, read []db.Skip
	again         bool
	// input is what msg was rendered from; passengers are the batches
	// whose recipients this plan's shared email also goes to, and rider
	// marks such a batch (shared.go).
	input      *mailtemplates.Input
	passengers []*sendPlan
	rider      bool
	// own is the batch's own email, sent instead of the shared one when
	// that is refused (sendApart).
	own *mailtemplates.Message
}

// prepared is what step one decided for one job: a plan to send, a
// snooze, nothing to do (neither), or an error. alone says the job was
// not settled in a set and must run step one by itself.
type prepared struct {
	plan   *sendPlan
	snooze time.Duration
	err    error
	alone  bool
}

// flushCall is one job's call for step one, with the job's own context.
type flushCall struct {
	ctx context.Context
	job *river.Job[FlushArgs]
}

// Work flushes the batch.
func (w *FlushWorker) Work(ctx context.Context, job *river.Job[FlushArgs]) error {
	p, ok := w.prepares.Do(ctx, flushCall{ctx, job}, w.prepareSet)
	if !ok || p.alone {
		p = w.prepareAlone(ctx, job)
	}
	switch {
	case p.err != nil:
		w.Metrics.Flushed(metrics.FlushError)
		return fmt.Errorf("flush batch %d: %w", job.Args.BatchID, p.err)
	case p.snooze > 0:
		w.Metrics.Flushed(metrics.FlushSnoozed)
		return river.JobSnooze(p.snooze)
	case p.plan == nil:
		w.Metrics.Flushed(metrics.FlushSkipped)
		return nil
	case p.plan.skip != "":
		w.Metrics.Flushed(metrics.FlushCanceled)
		return nil
	}
	return w.send(ctx, job, p.plan)
}

// inTx runs step one's transaction. In at-least-once mode losing it in a
// crash only means the batch is flushed again, so its commit need not wait
// for the disk; the outcome recorded after sending is durable. In
// at-most-once mode this step marks the email sent and must be durable
// before SMTP.
func (w *FlushWorker) inTx(ctx context.Context, fn func(pgx.Tx) error) error {
	if w.AtMostOnce {
		return w.DB.InTx(ctx, fn)
	}
	return w.DB.InTxAsyncCommit(ctx, fn)
}

// prepareAlone is step one for one job, waiting for its batch's lock.
func (w *FlushWorker) prepareAlone(ctx context.Context, job *river.Job[FlushArgs]) (p prepared) {
	p.err = w.inTx(ctx, func(tx pgx.Tx) (err error) {
		p.plan, p.snooze, err = w.prepare(ctx, tx, job)
		return err
	})
	return p
}

// prepareSet is step one for a set of jobs in one transaction; a set of
// one is no exception, so that calls arriving meanwhile gather into the
// next set. A batch that another transaction holds, a second job for a
// batch already in the set, a job whose own time is up and a job whose
// decision failed go alone: the first two then wait for the lock outside
// the group, as a single flush does, and the others report their own
// error. If the transaction fails, every job goes alone, so one batch's
// trouble is never another's.
func (w *FlushWorker) prepareSet(ctx context.Context, calls []flushCall) []prepared {
	out := make([]prepared, len(calls))
	ids := make([]int64, len(calls))
	for i, c := range calls {
		ids[i] = c.job.Args.BatchID
		if c.ctx.Err() != nil {
			ids[i] = 0 // no batch: the job goes alone
		}
	}
	err := w.inTx(ctx, func(tx pgx.Tx) error {
		cs, err := db.LockFreeForFlush(ctx, tx, ids)
		if err != nil {
			return err
		}
		if err := db.AttachSuppressions(ctx, tx, slices.Collect(maps.Values(cs))...); err != nil {
			return err
		}
		if err := w.lockBudgets(ctx, tx, cs); err != nil {
			return err
		}
		now := w.now()
		var plans []*sendPlan
		for i, c := range calls {
			fc := cs[ids[i]]
			delete(cs, ids[i])
			if fc == nil {
				// Not locked here, held digests among them: another batch
				// of the set may fold into a held digest after its
				// content was read, and alone it reads its content once
				// this set has committed.
				out[i].alone = true
				continue
			}
			plan, snooze, err := w.decide(ctx, tx, fc, c.job, now)
			if err != nil {
				out[i].alone = true
				continue
			}
			out[i].plan, out[i].snooze = plan, snooze
			if plan != nil {
				plans = append(plans, plan)
			}
		}
		w.composeAll(plans, now)
		taken, err := w.share(ctx, tx, plans, now)
		if err != nil {
			return err
		}
		var composed []*sendPlan
		for i := range out {
			switch p := out[i].plan; {
			case p == nil:
			case p.msg == nil && p.skip == "":
				// Alone, the compose fails again and reports why.
				out[i] = prepared{alone: true}
			case p.rider:
				// Another job of the set sends its email.
				composed, out[i].plan = append(composed, p), nil
			default:
				composed = append(composed, p)
			}
		}
		return w.start(ctx, tx, append(composed, taken...), now)
	})
	if err != nil {
		for i := range out {
			out[i] = prepared{alone: true}
		}
	}
	return out
}

// start cancels the composed plans that send nothing, starts the
// deliveries of the others and gives each of those its delivery.
func (w *FlushWorker) start(ctx context.Context, tx pgx.Tx, plans []*sendPlan, now time.Time) error {
	var starts []db.DeliveryStart
	var dropped, again []db.Skip
	for _, p := range plans {
		if p.skip != "" {
			if err := w.cancel(ctx, tx, p.content.Batch, p.skip, p.again, now); err != nil {
				return err
			}
			continue
		}
		starts = append(starts, db.DeliveryStart{BatchID: p.batchID, JobID: p.jobID, MessageID: p.msg.MessageID, To: p.msg.To, Subject: p.msg.Subject})
		// Reads are logged when they happen, but not one of a type that
		// kept read notifications in emails then: check them all.
		again = append(again, p.read...)
		if p.again {
			again = append(again, p.dropped...)
		} else {
			dropped = append(dropped, p.dropped...)
		}
	}
	if len(starts) == 0 {
		return nil
	}
	again, err := db.UnloggedSkips(ctx, tx, again)
	if err != nil {
		return err
	}
	if err := db.InsertSkips(ctx, tx, append(dropped, again...)); err != nil {
		return err
	}
	ds, err := db.StartDeliveries(ctx, tx, starts, w.AtMostOnce, now)
	if err != nil {
		return err
	}
	for _, p := range plans {
		if p.skip != "" {
			continue
		}
		if p.delivery = ds[p.batchID]; p.delivery == nil {
			return fmt.Errorf("start delivery of batch %d: %w", p.batchID, db.ErrNotFound)
		}
	}
	return markShared(ctx, tx, plans)
}

// prepare is step one for one job. It returns a plan to send, a snooze
// when the batch is not due yet, or neither when there is nothing to do.
func (w *FlushWorker) prepare(ctx context.Context, tx pgx.Tx, job *river.Job[FlushArgs]) (*sendPlan, time.Duration, error) {
	fc, err := db.LockForFlush(ctx, tx, job.Args.BatchID)
	if errors.Is(err, db.ErrNotFound) {
		return nil, 0, nil
	}
	if err == nil {
		err = db.AttachSuppressions(ctx, tx, fc)
	}
	if err != nil {
		return nil, 0, err
	}
	now := w.now()
	plan, snooze, err := w.decide(ctx, tx, fc, job, now)
	if err != nil || plan == nil {
		return plan, snooze, err
	}
	c, err := w.envelope().Compose(plan.content, now)
	if err != nil {
		return nil, 0, err
	}
	plan.take(c)
	taken, err := w.share(ctx, tx, []*sendPlan{plan}, now)
	if err != nil {
		return nil, 0, err
	}
	return plan, 0, w.start(ctx, tx, append([]*sendPlan{plan}, taken...), now)
}

// decide is step one for a locked batch: it snoozes, skips, or returns a
// plan, which the caller composes and starts (or cancels) with those of
// other batches in the same transaction.
func (w *FlushWorker) decide(ctx context.Context, tx pgx.Tx, fc *db.FlushContent, job *river.Job[FlushArgs], now time.Time) (*sendPlan, time.Duration, error) {
	b := fc.Batch
	switch b.State {
	case db.StateOpen:
		if b.ClosesAt.After(now) {
			// The window slid since this job was scheduled: wake up again
			// when the batch now closes.
			return nil, b.ClosesAt.Sub(now), nil
		}
		var err error
		if fc, err = w.spendBudget(ctx, tx, fc, now); fc == nil || err != nil {
			return nil, 0, err
		}
	case db.StateFlushing:
		// Only the job that took the batch may resend it (after a crash or
		// a temporary failure); any other job for it is a duplicate. The
		// sweep clears the owner of a batch whose process died.
		if b.FlushJobID != nil && *b.FlushJobID != job.ID {
			return nil, 0, nil
		}
		var err error
		if fc.Logged, err = db.FlushLogged(ctx, tx, b.ID); err != nil {
			return nil, 0, err
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
	return &sendPlan{batchID: b.ID, jobID: job.ID, closesAt: b.ClosesAt, content: fc}, 0, nil
}

// take records what Compose made of the plan's batch.
func (p *sendPlan) take(c batching.Composed) {
	// What was read in the app while the batch was flushing was never
	// logged: read, it no longer belonged to an open batch.
	p.msg, p.skip, p.dropped, p.read = c.Message, c.Skip, c.Dropped, c.Read
	p.again = p.content.Batch.State != db.StateOpen
}

func (w *FlushWorker) envelope() batching.Envelope {
	return batching.Envelope{From: w.From, Links: w.Links, Brand: w.Brands.Get(context.Background()), DefaultLocale: w.DefaultLocale}
}

// cancel cancels batch b and logs what it held for reason. A batch
// composed before (again) logged what its earlier attempts left out, which
// its count still holds, so only the rest is logged now.
func (w *FlushWorker) cancel(ctx context.Context, tx pgx.Tx, b *db.Batch, reason string, again bool, now time.Time) error {
	if err := db.SetBatchState(ctx, tx, b.ID, db.StateCanceled, reason, 0, now); err != nil {
		return err
	}
	n := b.ItemCount
	if again {
		var err error
		if n, err = db.UnloggedItems(ctx, tx, b.ID); err != nil || n == 0 {
			return err
		}
	}
	typ := ""
	if b.TypeKey != nil {
		typ = *b.TypeKey
	}
	return db.InsertSkips(ctx, tx, []db.Skip{{RecipientID: b.RecipientID, TypeKey: typ, BatchID: &b.ID, Items: n, Reason: reason}})
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

// outcome is what step two came to for one job, for step three to record.
type outcome struct {
	job     *river.Job[FlushArgs]
	plan    *sendPlan
	sendErr error
	final   bool
	now     time.Time
}

// send is steps two and three: hand the email to the sender and record
// what happened. A temporary failure returns an error so River retries the
// job; a permanent one, or the last try, fails the batch visibly.
func (w *FlushWorker) send(ctx context.Context, job *river.Job[FlushArgs], plan *sendPlan) error {
	sendErr := w.Sender.Send(ctx, plan.msg)
	if len(plan.passengers) > 0 && sendErr != nil && (mail.IsRecipientRefused(sendErr) || !mail.IsTemporary(sendErr)) {
		return w.sendApart(ctx, job, plan, sendErr)
	}
	o := outcome{job: job, plan: plan, sendErr: sendErr, now: w.now()}
	o.final = w.final(job, sendErr)
	w.Metrics.Delivered(sendErr, o.final, o.now.Sub(plan.closesAt))
	err, ok := w.records.Do(ctx, o, w.recordSet)
	if !ok || err != nil {
		// The set failed as a whole: record this outcome by itself.
		err = w.DB.Pipeline(context.WithoutCancel(ctx), func(q db.Querier) error { return w.record(ctx, q, o) })
	}
	if err != nil {
		w.Metrics.Flushed(metrics.FlushError)
		return fmt.Errorf("record delivery of batch %d: %w", plan.batchID, err)
	}
	switch {
	case sendErr == nil:
		w.Metrics.Flushed(metrics.FlushSent)
		return nil
	case o.final:
		w.Metrics.Flushed(metrics.FlushFailed)
		w.Logger.Warn("delivery failed", "batch", plan.batchID, "err", sendErr)
		return river.JobCancel(sendErr)
	default:
		w.Metrics.Flushed(metrics.FlushRetry)
		return fmt.Errorf("send batch %d: %w", plan.batchID, sendErr)
	}
}

// recordSet is step three for a set of outcomes: their writes go to the
// server in one round trip, one statement per table (db.RecordOutcomes),
// and commit together, durably, with one disk flush. If the set fails,
// every outcome gets the error and is then recorded by itself, so one
// outcome's trouble is never another's.
func (w *FlushWorker) recordSet(ctx context.Context, set []outcome) []error {
	var outs []db.Outcome
	for _, o := range set {
		outs = append(outs, w.dbOutcomes(o)...)
	}
	err := w.DB.Pipeline(ctx, func(q db.Querier) error { return db.RecordOutcomes(ctx, q, outs) })
	errs := make([]error, len(set))
	for i := range errs {
		errs[i] = err
	}
	return errs
}

// record writes one outcome by itself.
func (w *FlushWorker) record(ctx context.Context, q db.Querier, o outcome) error {
	return db.RecordOutcomes(ctx, q, w.dbOutcomes(o))
}

// dbOutcomes are the rows of one outcome: its batch's, and for a shared
// email each member batch's too, as each would be recorded alone.
func (w *FlushWorker) dbOutcomes(o outcome) []db.Outcome {
	outs := []db.Outcome{w.dbOutcome(o.plan, o)}
	for _, p := range o.plan.passengers {
		outs = append(outs, w.dbOutcome(p, o))
	}
	return outs
}

// dbOutcome is what to record of plan's part in an outcome: the batch
// sent, failed, or (at most once, after a temporary failure, known not
// sent) back to flushing for the retry; the attempt; and the delivery's
// state.
func (w *FlushWorker) dbOutcome(plan *sendPlan, o outcome) db.Outcome {
	r := db.Outcome{BatchID: plan.batchID, DeliveryID: plan.delivery.ID, At: o.now}
	switch {
	case o.sendErr == nil:
		r.BatchState, r.OK, r.Answer, r.State = db.StateSent, true, "ok", db.StateSent
	case o.final:
		r.BatchState, r.Reason, r.Answer, r.State = db.StateFailed, o.sendErr.Error(), o.sendErr.Error(), db.StateFailed
	default:
		r.Answer = o.sendErr.Error()
		if w.AtMostOnce && !mail.MayHaveArrived(o.sendErr) {
			// Known not sent: back to flushing so the retry may send it.
			r.BatchState, r.JobID, r.State = db.StateFlushing, o.job.ID, "sending"
		}
	}
	return r
}

// final says whether a send's outcome is the last word on its email:
// sent, refused for good, or out of tries. At most once, an email the
// server may have accepted without answering is neither failed nor
// offered again: it stays marked sent, and the job's rerun (or, after
// its last try, the sweep) lists it as possibly lost.
func (w *FlushWorker) final(job *river.Job[FlushArgs], err error) bool {
	if err == nil || !mail.IsTemporary(err) {
		return true
	}
	return job.Attempt >= job.MaxAttempts && !(w.AtMostOnce && mail.MayHaveArrived(err))
}
