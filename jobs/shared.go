package jobs

import (
	"cmp"
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/mailtemplates"
	"github.com/lull-dev/lull/metrics"
	"github.com/lull-dev/lull/preferences"
)

// maxSharedRcpts caps the envelope recipients of one shared email: every
// SMTP server must accept 100 (RFC 5321, 4.5.3.1.8) and many refuse
// more. A bigger group goes out as several emails.
const maxSharedRcpts = 100

// composeAll composes the emails of plans. Emails that read the same but
// for their recipient (a fan-out to a team) are rendered once and filled
// in per recipient (mailtemplates.RenderAlike); the distinct emails are
// rendered on every core, since the set's transaction stays open
// meanwhile. A plan whose compose fails or panics is left with neither an
// email nor a skip: the job then composes alone, on its own goroutine,
// and reports what went wrong.
func (w *FlushWorker) composeAll(plans []*sendPlan, now time.Time) {
	e := w.envelope()
	alike := map[string][]*sendPlan{}
	var keys []string
	for _, p := range plans {
		c, in, ok := prepareOrLeave(e.Prepare, p, now)
		if !ok {
			continue
		}
		p.take(c)
		if in == nil {
			continue // a skip
		}
		p.input = in
		k := mailtemplates.ContentKey(*in)
		if alike[k] == nil {
			keys = append(keys, k)
		}
		alike[k] = append(alike[k], p)
	}
	next := make(chan []*sendPlan)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(keys)) {
		wg.Go(func() {
			for ps := range next {
				renderOrLeave(ps)
			}
		})
	}
	for _, k := range keys {
		next <- alike[k]
	}
	close(next)
	wg.Wait()
}

// prepareOrLeave is Envelope.Prepare for p, reporting false if it fails
// or panics.
func prepareOrLeave[C any](prepare func(*db.FlushContent, time.Time) (C, *mailtemplates.Input, error), p *sendPlan, now time.Time) (c C, in *mailtemplates.Input, ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	c, in, err := prepare(p.content, now)
	return c, in, err == nil
}

// renderOrLeave renders plans whose inputs share a content key; a plan
// whose render fails, or a group whose render panics, is left without an
// email.
func renderOrLeave(ps []*sendPlan) {
	defer func() { recover() }()
	ins := make([]mailtemplates.Input, len(ps))
	for i, p := range ps {
		ins[i] = *p.input
	}
	msgs, errs := mailtemplates.RenderAlike(ins)
	for i, p := range ps {
		if errs[i] == nil {
			p.msg = msgs[i]
		}
	}
}

// shareable reports whether p's email may go out shared: a batch of one
// type that asks for it, not a digest, with an email to send.
func shareable(p *sendPlan) bool {
	b := p.content.Batch
	if p.msg == nil || p.skip != "" || b.TypeKey == nil || preferences.Mode(b.Mode).Digest() {
		return false
	}
	t := p.content.Types[*b.TypeKey]
	return t != nil && t.SharedDelivery && t.Unsubscribe != "thread"
}

// share turns the plans of shared-delivery types whose emails read the
// same into shared emails: each group's first plan (lowest batch id)
// leads and sends one email to every member's address as an envelope
// recipient; the others ride along. Batches of the same key due now
// whose jobs are not in this set (another worker has not reached them
// yet) are locked and taken along, up to maxSharedRcpts per email, so a
// team's fan-out becomes one email whatever way its jobs were spread.
// It returns those taken along: they have no job of their own here, and
// start must start them with the rest.
func (w *FlushWorker) share(ctx context.Context, tx pgx.Tx, plans []*sendPlan, now time.Time) ([]*sendPlan, error) {
	groups := map[string][]*sendPlan{}
	var keys []string
	held := make([]int64, 0, len(plans))
	for _, p := range plans {
		held = append(held, p.batchID)
		if !shareable(p) {
			continue
		}
		if p.input == nil {
			// Composed alone (prepare): read its input again.
			_, in, err := w.envelope().Prepare(p.content, now)
			if err != nil || in == nil {
				continue
			}
			p.input = in
		}
		k := mailtemplates.ContentKey(*p.input)
		if groups[k] == nil {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], p)
	}
	var taken []*sendPlan
	for _, k := range keys {
		g := groups[k]
		slices.SortFunc(g, func(a, b *sendPlan) int { return cmp.Compare(a.batchID, b.batchID) })
		// Only the last email of the group has room for more.
		if room := (maxSharedRcpts - len(g)%maxSharedRcpts) % maxSharedRcpts; room > 0 {
			more, settled, err := w.takeAlong(ctx, tx, g[len(g)-1], k, room, &held, now)
			if err != nil {
				return nil, err
			}
			taken = append(append(taken, more...), settled...)
			g = append(g, more...)
		}
		for chunk := range slices.Chunk(g, maxSharedRcpts) {
			w.lead(chunk, now)
		}
	}
	return taken, nil
}

// takeAlong locks and composes up to room batches of like's key, due now
// and not held by this set, whose emails read like like's (content key
// k); it returns them as plans owned by like's job. It also returns, to
// be settled with them, the batches it found send nothing (suppressed,
// muted, all read): a batch this job left flushing before a crash has no
// other job to cancel it.
func (w *FlushWorker) takeAlong(ctx context.Context, tx pgx.Tx, like *sendPlan, k string, room int, held *[]int64, now time.Time) (out, settled []*sendPlan, err error) {
	b := like.content.Batch
	// Twice the room: members who muted the type, or whose items differ,
	// share the key but not the content, and are left to their own jobs.
	var rec db.Recipient
	for _, rs := range like.content.Settings {
		rec = rs.Recipient
	}
	ids, err := db.SharedSiblings(ctx, tx, *b.TypeKey, b.BatchKey, *held, like.jobID, rec.Timezone, rec.Locale, now, 2*room)
	if err != nil || len(ids) == 0 {
		return nil, nil, err
	}
	cs, err := db.LockFreeForFlush(ctx, tx, ids)
	if err != nil {
		return nil, nil, err
	}
	fcs := make([]*db.FlushContent, 0, len(cs))
	for _, fc := range cs {
		fcs = append(fcs, fc)
	}
	if err := db.AttachSuppressions(ctx, tx, fcs...); err != nil {
		return nil, nil, err
	}
	// decide looks only at the job's id: these batches become the
	// leading job's.
	job := &river.Job[FlushArgs]{JobRow: &rivertype.JobRow{ID: like.jobID}}
	var plans []*sendPlan
	for _, id := range ids {
		fc := cs[id]
		if fc == nil {
			continue
		}
		ok, err := w.tryBudget(ctx, tx, fc)
		if err != nil {
			return nil, nil, err
		}
		if !ok {
			continue
		}
		p, _, err := w.decide(ctx, tx, fc, job, now)
		if err != nil {
			return nil, nil, err
		}
		if p != nil {
			plans = append(plans, p)
		}
	}
	w.composeAll(plans, now)
	for _, p := range plans {
		if p.skip != "" {
			*held = append(*held, p.batchID)
			settled = append(settled, p)
			continue
		}
		// A member whose email would differ is left to their own job,
		// which sends it as for anyone else.
		if len(out) == room || !shareable(p) || mailtemplates.ContentKey(*p.input) != k {
			continue
		}
		*held = append(*held, p.batchID)
		out = append(out, p)
	}
	return out, settled, nil
}

// lead makes the first plan of a chunk of like emails send one email for
// all of them. The email shows no recipient's address and carries no
// personal link (settings, unsubscribe, mute): a link in an email many people receive alike would let
// any of them (or anyone it is forwarded to) unsubscribe or change the
// settings of whoever it names. Its unsubscribe link names only the type
// (Links.SharedUnsubscribeURL); its page mails each member who asks their
// own link. Its Message-ID is the first
// batch's, so a retry of the same group is recognisably the same email;
// every member's delivery carries it.
func (w *FlushWorker) lead(chunk []*sendPlan, now time.Time) {
	if len(chunk) < 2 {
		return
	}
	first := chunk[0]
	in := *first.input
	in.Recipient.Email, in.Recipient.Name = "", ""
	in.SettingsURL, in.ThreadID, in.ThreadKey = "", "", ""
	in.MuteURL, in.ThreadMuteURLs = "", nil // a mute link names its recipient too
	in.UnsubscribeURL = w.Links.SharedUnsubscribeURL(*first.content.Batch.TypeKey, now)
	in.MessageID = w.envelope().MessageID(first.batchID)
	m, err := mailtemplates.Render(in)
	if err != nil {
		return // each sends its own email
	}
	m.To = first.msg.To
	// Members sharing a mailbox get it there once.
	seen := make(map[string]bool, len(chunk))
	for _, p := range chunk {
		if a := db.NormalizeAddress(p.msg.To); !seen[a] {
			seen[a] = true
			m.Rcpts = append(m.Rcpts, p.msg.To)
		}
		own := *p.msg
		p.own = &own
		p.msg.MessageID = m.MessageID
		if p != first {
			p.rider, p.jobID = true, first.jobID
			first.passengers = append(first.passengers, p)
		}
	}
	first.msg = m
}

// markShared records, after start, which deliveries went out together.
func markShared(ctx context.Context, tx pgx.Tx, plans []*sendPlan) error {
	for _, p := range plans {
		if len(p.passengers) == 0 {
			continue
		}
		ids := []int64{p.batchID}
		for _, r := range p.passengers {
			ids = append(ids, r.batchID)
		}
		if err := db.MarkShared(ctx, tx, p.batchID, ids); err != nil {
			return err
		}
	}
	return nil
}

// sendApart sends each member of a shared email that the server refused
// their own email: a refused recipient (a mailbox that no longer exists)
// or a refusal for good stops the whole message, so nobody got it, and
// one member's bad address must not cost the others theirs. Each outcome
// is recorded as a single send's would be; a member whose own email
// fails for a while stays flushing, and the sweep hands it a job of its
// own once this one is done.
func (w *FlushWorker) sendApart(ctx context.Context, job *river.Job[FlushArgs], plan *sendPlan, sharedErr error) error {
	w.Logger.Warn("shared email refused; sending each member their own", "batch", plan.batchID, "members", len(plan.passengers)+1, "err", sharedErr)
	all := append([]*sendPlan{plan}, plan.passengers...)
	for _, p := range all {
		err := w.Sender.Send(ctx, p.own)
		o := outcome{job: job, plan: &sendPlan{batchID: p.batchID, delivery: p.delivery}, sendErr: err, now: w.now()}
		o.final = w.final(job, err)
		w.Metrics.Delivered(err, o.final, o.now.Sub(p.closesAt))
		if err := w.DB.Pipeline(context.WithoutCancel(ctx), func(q db.Querier) error {
			if err := db.Unshare(ctx, q, p.batchID, p.own.MessageID); err != nil {
				return err
			}
			return w.record(ctx, q, o)
		}); err != nil {
			return fmt.Errorf("record delivery of batch %d: %w", p.batchID, err)
		}
	}
	w.Metrics.Flushed(metrics.FlushSent)
	return nil
}
