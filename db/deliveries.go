package db

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// Delivery is the record of one batch's email.
type Delivery struct {
	ID           int64      `json:"id"`
	BatchID      int64      `json:"batch_id"`
	State        string     `json:"state"`
	MessageID    string     `json:"message_id"`
	To           string     `json:"to"`
	Subject      string     `json:"subject"`
	Attempts     int        `json:"attempts"`
	LastError    string     `json:"last_error,omitempty"`
	PossiblyLost bool       `json:"possibly_lost,omitempty"`
	Confirmed    bool       `json:"confirmed"`
	CreatedAt    time.Time  `json:"created_at"`
	SendingAt    *time.Time `json:"sending_at,omitempty"`
	SentAt       *time.Time `json:"sent_at,omitempty"`
	FailedAt     *time.Time `json:"failed_at,omitempty"`
}

const deliveryColumns = `id, batch_id, state, message_id, to_address, subject, attempts, last_error,
	possibly_lost, confirmed, created_at, sending_at, sent_at, failed_at`

func scanDelivery(row interface{ Scan(...any) error }) (*Delivery, error) {
	d := new(Delivery)
	err := row.Scan(&d.ID, &d.BatchID, &d.State, &d.MessageID, &d.To, &d.Subject, &d.Attempts, &d.LastError,
		&d.PossiblyLost, &d.Confirmed, &d.CreatedAt, &d.SendingAt, &d.SentAt, &d.FailedAt)
	return d, err
}

// DeliveryStart is one email about to be handed to SMTP: its batch, the
// job that owns the send, and what the email is.
type DeliveryStart struct {
	BatchID   int64
	JobID     int64
	MessageID string
	To        string
	Subject   string
}

// StartDeliveries records, in one statement, that emails are about to be
// handed to SMTP: each batch becomes "flushing" and owned by its job, and
// its delivery (created on the first attempt) counts one more attempt in
// state "sending". With sentEarly (at-most-once) both are marked sent
// instead, before SMTP is asked. The deliveries come back keyed by batch.
func StartDeliveries(ctx context.Context, q Querier, starts []DeliveryStart, sentEarly bool, now time.Time) (map[int64]*Delivery, error) {
	batchState, state := StateFlushing, "sending"
	if sentEarly {
		batchState, state = StateSent, StateSent
	}
	n := len(starts)
	batches, jobs := make([]int64, n), make([]int64, n)
	ids, tos, subjects := make([]string, n), make([]string, n), make([]string, n)
	for i, s := range starts {
		batches[i], jobs[i], ids[i], tos[i], subjects[i] = s.BatchID, s.JobID, s.MessageID, s.To, s.Subject
	}
	rows, err := q.Query(ctx, `
		WITH v AS (SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::text[], $4::text[], $5::text[])
		                   AS v(batch_id, job_id, message_id, to_address, subject)),
		b AS (
			UPDATE batches SET state = $7::text, flushing_at = $6, flush_job_id = v.job_id,
			    processed_at = CASE WHEN $7::text = 'sent' THEN $6 ELSE processed_at END
			FROM v WHERE batches.id = v.batch_id)
		INSERT INTO deliveries AS d (batch_id, message_id, to_address, subject, state, attempts, sending_at, sent_at)
		SELECT batch_id, message_id, to_address, subject, $8::text, 1, $6, CASE WHEN $8::text = 'sent' THEN $6::timestamptz END
		FROM v ORDER BY batch_id
		ON CONFLICT (batch_id) DO UPDATE SET to_address = EXCLUDED.to_address, subject = EXCLUDED.subject,
		    state = EXCLUDED.state, attempts = d.attempts + 1, sending_at = EXCLUDED.sending_at,
		    sent_at = coalesce(EXCLUDED.sent_at, d.sent_at)
		RETURNING `+deliveryColumns, batches, jobs, ids, tos, subjects, now, batchState, state)
	if err != nil {
		return nil, fmt.Errorf("start deliveries: %w", err)
	}
	ds, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*Delivery, error) { return scanDelivery(row) })
	if err != nil {
		return nil, fmt.Errorf("start deliveries: %w", err)
	}
	out := make(map[int64]*Delivery, len(ds))
	for _, d := range ds {
		out[d.BatchID] = d
	}
	return out, nil
}

// GetDeliveryByBatch loads a batch's delivery.
func GetDeliveryByBatch(ctx context.Context, q Querier, batchID int64) (*Delivery, error) {
	d, err := scanDelivery(q.QueryRow(ctx, `SELECT `+deliveryColumns+` FROM deliveries WHERE batch_id = $1`, batchID))
	if err != nil {
		return nil, notFound(err, fmt.Sprintf("delivery of batch %d", batchID))
	}
	return d, nil
}

// Outcome is one SMTP attempt to record: its answer on the delivery,
// and the batch's new state.
type Outcome struct {
	BatchID, DeliveryID int64
	// BatchState is the batch's new state, empty to leave the batch as
	// it is; Reason replaces the batch's reason unless empty, and JobID
	// owns a batch put back to "flushing".
	BatchState, Reason string
	JobID              int64
	// OK and Answer are the attempt as logged; State is the delivery's
	// new state ("sent" or "failed"), empty to keep it (a temporary
	// failure that will be retried).
	OK            bool
	Answer, State string
	At            time.Time
}

// RecordOutcomes writes attempts' outcomes with one statement per table,
// whatever their number: the batches first, locked in id order (so two
// sets never wait on each other in a circle, and in the order a flush
// locks a batch before its delivery), then the deliveries, then the
// attempts: each attempt's foreign key check then finds its delivery
// already locked by this transaction, where before the update it wrote
// a row lock (a page write and a WAL record) for every attempt. A
// statement a row instead cost the database 0.46 ms a digest in a flush
// wave. Each delivery must appear once.
func RecordOutcomes(ctx context.Context, q Querier, outs []Outcome) error {
	outs = slices.SortedFunc(slices.Values(outs), func(a, b Outcome) int { return cmp.Compare(a.BatchID, b.BatchID) })
	var batches, jobs []int64
	var states, reasons []string
	var batchAt []time.Time
	n := len(outs)
	deliveries, oks, answers, dstates, at := make([]int64, n), make([]bool, n), make([]string, n), make([]string, n), make([]time.Time, n)
	for i, o := range outs {
		deliveries[i], oks[i], answers[i], dstates[i], at[i] = o.DeliveryID, o.OK, o.Answer, o.State, o.At
		if o.BatchState != "" {
			batches, states, reasons, jobs, batchAt = append(batches, o.BatchID), append(states, o.BatchState),
				append(reasons, o.Reason), append(jobs, o.JobID), append(batchAt, o.At)
		}
	}
	if len(batches) > 0 {
		if _, err := q.Exec(ctx, `
			WITH locked AS (SELECT id FROM batches WHERE id = ANY($1::bigint[]) ORDER BY id FOR UPDATE)
			UPDATE batches b SET state = v.state,
			    reason = CASE WHEN v.reason = '' THEN b.reason ELSE v.reason END,
			    flushing_at = CASE WHEN v.state = 'flushing' THEN v.at ELSE b.flushing_at END,
			    flush_job_id = CASE WHEN v.state = 'flushing' THEN v.job_id ELSE b.flush_job_id END,
			    processed_at = CASE WHEN v.state IN ('sent', 'canceled', 'failed') THEN v.at ELSE b.processed_at END
			FROM unnest($1::bigint[], $2::text[], $3::text[], $4::bigint[], $5::timestamptz[]) AS v(id, state, reason, job_id, at)
			WHERE b.id = v.id AND b.id IN (SELECT id FROM locked)`, batches, states, reasons, jobs, batchAt); err != nil {
			return fmt.Errorf("record outcomes: batches: %w", err)
		}
	}
	if _, err := q.Exec(ctx, `
		UPDATE deliveries d SET
		    state = CASE WHEN v.state = '' THEN d.state ELSE v.state END,
		    last_error = CASE WHEN v.ok THEN d.last_error ELSE v.answer END,
		    confirmed = d.confirmed OR v.ok,
		    -- A send the server accepted is not lost, whatever a sweep
		    -- guessed while the confirmation was slow to be recorded.
		    possibly_lost = d.possibly_lost AND NOT v.ok,
		    sent_at = CASE WHEN v.state = 'sent' THEN coalesce(d.sent_at, v.at) ELSE d.sent_at END,
		    failed_at = CASE WHEN v.state = 'failed' THEN v.at ELSE d.failed_at END
		FROM unnest($1::bigint[], $2::bool[], $3::text[], $4::text[], $5::timestamptz[]) AS v(id, ok, answer, state, at)
		WHERE d.id = v.id`, deliveries, oks, answers, dstates, at); err != nil {
		return fmt.Errorf("record outcomes: deliveries: %w", err)
	}
	_, err := q.Exec(ctx, `
		INSERT INTO delivery_attempts (delivery_id, at, ok, answer)
		SELECT * FROM unnest($1::bigint[], $2::timestamptz[], $3::bool[], $4::text[])`, deliveries, at, oks, answers)
	if err != nil {
		return fmt.Errorf("record outcomes: attempts: %w", err)
	}
	return nil
}

// MarkPossiblyLost flags an at-most-once delivery whose send was never
// confirmed because the process died mid-send, with every delivery that
// shared its email.
func MarkPossiblyLost(ctx context.Context, q Querier, id int64) error {
	_, err := q.Exec(ctx, `UPDATE deliveries SET possibly_lost = true
		WHERE (id = $1 OR shared_by = (SELECT shared_by FROM deliveries WHERE id = $1)) AND NOT confirmed`, id)
	return err
}

// FlagUnconfirmed marks as possibly lost the at-most-once deliveries that
// were marked sent before cutoff and never confirmed by the mail server:
// their process died mid-send.
func FlagUnconfirmed(ctx context.Context, q Querier, cutoff time.Time) error {
	_, err := q.Exec(ctx, `
		UPDATE deliveries SET possibly_lost = true
		WHERE state = 'sent' AND NOT confirmed AND NOT possibly_lost AND sending_at < $1`, cutoff)
	if err != nil {
		return fmt.Errorf("flag unconfirmed deliveries: %w", err)
	}
	return nil
}

// DeliveryAttempt is one logged SMTP attempt.
type DeliveryAttempt struct {
	At     time.Time `json:"at"`
	OK     bool      `json:"ok"`
	Answer string    `json:"answer,omitempty"`
}

// DeliveryAttempts lists a delivery's attempts, oldest first.
func DeliveryAttempts(ctx context.Context, q Querier, deliveryID int64) ([]DeliveryAttempt, error) {
	rows, err := q.Query(ctx, `SELECT at, ok, answer FROM delivery_attempts WHERE delivery_id = $1 ORDER BY id`, deliveryID)
	if err != nil {
		return nil, fmt.Errorf("delivery attempts: %w", err)
	}
	defer rows.Close()
	var out []DeliveryAttempt
	for rows.Next() {
		var a DeliveryAttempt
		if err := rows.Scan(&a.At, &a.OK, &a.Answer); err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

// SkipEntry is a skip log row as operators see it.
// Its fields are in the order the skip log queries select them.
type SkipEntry struct {
	At          time.Time `json:"at"`
	RecipientID string    `json:"recipient"`
	TypeKey     string    `json:"type,omitempty"`
	EventID     *int64    `json:"event_id,omitempty"`
	BatchID     *int64    `json:"batch_id,omitempty"`
	Items       int       `json:"items"`
	Reason      string    `json:"reason"`
}

// ListSkips returns skip log entries for a batch (batchID > 0) or a
// recipient, newest first.
func ListSkips(ctx context.Context, q Querier, batchID int64, recipientID string, limit int) ([]SkipEntry, error) {
	rows, err := q.Query(ctx, `
		SELECT created_at, recipient_id, type_key, event_id, batch_id, items, reason FROM skips
		WHERE ($1::bigint > 0 AND batch_id = $1) OR ($1 = 0 AND recipient_id = $2)
		ORDER BY id DESC LIMIT $3`, batchID, recipientID, limit)
	if err != nil {
		return nil, fmt.Errorf("skip log: %w", err)
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[SkipEntry])
}

// OutboxMessage is an email kept by the built-in outbox.
type OutboxMessage struct {
	ID        int64             `json:"id"`
	CreatedAt time.Time         `json:"created_at"`
	MessageID string            `json:"message_id"`
	BatchID   *int64            `json:"batch_id,omitempty"`
	From      string            `json:"from"`
	To        string            `json:"to"`
	Subject   string            `json:"subject"`
	Headers   map[string]string `json:"headers"`
	Text      string            `json:"text"`
	HTML      string            `json:"html"`
}

// InsertOutbox stores an email in the outbox.
func InsertOutbox(ctx context.Context, q Querier, m *OutboxMessage) error {
	_, err := q.Exec(ctx, `
		INSERT INTO outbox (message_id, batch_id, from_address, to_address, subject, headers, text_body, html_body)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
		m.MessageID, m.BatchID, m.From, m.To, m.Subject, m.Headers, m.Text, m.HTML)
	if err != nil {
		return fmt.Errorf("outbox: %w", err)
	}
	return nil
}

// ListOutbox returns outbox emails newest first, keyset-paged by id, for
// one batch when batchID > 0.
func ListOutbox(ctx context.Context, q Querier, batchID, before int64, limit int) ([]OutboxMessage, error) {
	rows, err := q.Query(ctx, `
		SELECT id, created_at, message_id, batch_id, from_address, to_address, subject, headers, text_body, html_body
		FROM outbox WHERE ($1::bigint = 0 OR batch_id = $1) AND ($2::bigint = 0 OR id < $2)
		ORDER BY id DESC LIMIT $3`, batchID, before, limit)
	if err != nil {
		return nil, fmt.Errorf("outbox: %w", err)
	}
	defer rows.Close()
	var out []OutboxMessage
	for rows.Next() {
		var m OutboxMessage
		if err := rows.Scan(&m.ID, &m.CreatedAt, &m.MessageID, &m.BatchID, &m.From, &m.To, &m.Subject, &m.Headers, &m.Text, &m.HTML); err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

// Skip is one entry of the skip log: something not sent, and why.
type Skip struct {
	RecipientID string
	TypeKey     string
	EventID     *int64
	BatchID     *int64
	Items       int
	Reason      string
}

// Skip reasons, as operators see them.
const (
	SkipMuted        = "muted"
	SkipUnsubscribed = "unsubscribed"
	SkipInactive     = "recipient inactive"
	SkipNoEmail      = "no email address"
	SkipRetracted    = "retracted"
	SkipOperator     = "canceled by an operator"
	SkipBounced      = "bounced"
	SkipRead         = "read in app"
)

// InsertSkips records skip log entries, set-based.
func InsertSkips(ctx context.Context, q Querier, skips []Skip) error {
	if len(skips) == 0 {
		return nil
	}
	n := len(skips)
	rids, types, reasons := make([]string, n), make([]string, n), make([]string, n)
	events, batches, items := make([]*int64, n), make([]*int64, n), make([]int32, n)
	for i, s := range skips {
		rids[i], types[i], reasons[i], events[i], batches[i], items[i] = s.RecipientID, s.TypeKey, s.Reason, s.EventID, s.BatchID, int32(max(s.Items, 1))
	}
	_, err := q.Exec(ctx, `
		INSERT INTO skips (recipient_id, type_key, reason, event_id, batch_id, items)
		SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::bigint[], $6::int[])`,
		rids, types, reasons, events, batches, items)
	if err != nil {
		return fmt.Errorf("record skips: %w", err)
	}
	return nil
}

// UnloggedSkips is what of skips, each naming its batch, the skip log
// does not hold yet: a batch composed again after a retry or a takeover
// leaves out again what its first attempt logged, and only what was left
// out since (read in the app, muted meanwhile) is new. How many are new
// is the batch's count: what its live notifications leave out now, less
// what the log holds for them. Which are new is matched by reason, so
// that a read since is logged as read; a read logged when it happened
// names the batch's type, which a digest does not have, where its flush
// names the item's, so the type is not matched. An item whose reason
// changed since it was logged (muted, then read) matches nothing, and
// the count keeps it from being logged twice.
func UnloggedSkips(ctx context.Context, q Querier, skips []Skip) ([]Skip, error) {
	if len(skips) == 0 {
		return nil, nil
	}
	ids := make([]int64, 0, len(skips))
	need := map[int64]int{} // batch -> how many are new
	for _, s := range skips {
		ids = append(ids, *s.BatchID)
		need[*s.BatchID] += s.Items
	}
	logged, live, err := skipLog(ctx, q, ids)
	if err != nil {
		return nil, err
	}
	for id := range need {
		need[id] = max(need[id]-live[id], 0)
	}
	fresh := make([]int, len(skips))
	for i, s := range skips {
		k := skipKey{*s.BatchID, s.Reason}
		taken := min(logged[k], s.Items)
		logged[k] -= taken
		fresh[i] = min(s.Items-taken, need[k.batch])
		need[k.batch] -= fresh[i]
	}
	var out []Skip
	for i, s := range skips {
		more := min(s.Items-fresh[i], need[*s.BatchID])
		need[*s.BatchID] -= more
		if s.Items = fresh[i] + more; s.Items > 0 {
			out = append(out, s)
		}
	}
	return out, nil
}

type skipKey struct {
	batch  int64
	reason string
}

// skipLog reads what the skip log holds for batches ids, by batch and
// reason, and how much of it is about their live notifications: each
// retracted one is logged once (retracted, or read before), and the
// notifications a fold into the held digest logged went to that digest.
func skipLog(ctx context.Context, q Querier, ids []int64) (map[skipKey]int, map[int64]int, error) {
	rows, err := q.Query(ctx, `
		SELECT batch_id, reason, sum(items)::int FROM skips
		WHERE batch_id = ANY($1) AND NOT starts_with(reason, $2) GROUP BY 1, 2
		UNION ALL
		SELECT batch_id, NULL, -count(*)::int FROM notifications
		WHERE batch_id = ANY($1) AND retracted_at IS NOT NULL GROUP BY 1`, ids, SkipHeldByBudget)
	if err != nil {
		return nil, nil, fmt.Errorf("read skip log: %w", err)
	}
	logged, live := map[skipKey]int{}, map[int64]int{}
	var id int64
	var reason *string
	var n int
	_, err = pgx.ForEachRow(rows, []any{&id, &reason, &n}, func() error {
		if reason != nil {
			logged[skipKey{id, *reason}] = n
		}
		live[id] += n
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("read skip log: %w", err)
	}
	return logged, live, nil
}

// UnloggedItems counts the notifications of batch id that the skip log
// does not hold: those a batch composed again and canceled leaves out
// for its reason, beside what earlier attempts logged.
func UnloggedItems(ctx context.Context, q Querier, id int64) (int, error) {
	var n int
	err := q.QueryRow(ctx, `
		SELECT (SELECT count(*) FROM notifications WHERE batch_id = $1)
		     - (SELECT coalesce(sum(items), 0) FROM skips WHERE batch_id = $1 AND NOT starts_with(reason, $2))`,
		id, SkipHeldByBudget).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("read skip log of batch %d: %w", id, err)
	}
	return max(n, 0), nil
}

// FlushLogged reads, by type and reason, what earlier attempts to send
// batch id left out and logged: muted, unsubscribed, suppressed. Reads and
// retractions are left out (a read stays read, and a retracted item is
// not in the batch's items), and so are folds into the held digest.
func FlushLogged(ctx context.Context, q Querier, id int64) (map[string]map[string]int, error) {
	rows, err := q.Query(ctx, `
		SELECT type_key, reason, sum(items)::int FROM skips
		WHERE batch_id = $1 AND reason NOT IN ($2, $3) AND NOT starts_with(reason, $4)
		GROUP BY 1, 2`, id, SkipRead, SkipRetracted, SkipHeldByBudget)
	if err != nil {
		return nil, fmt.Errorf("read skip log of batch %d: %w", id, err)
	}
	out := map[string]map[string]int{}
	var typ, reason string
	var n int
	_, err = pgx.ForEachRow(rows, []any{&typ, &reason, &n}, func() error {
		if out[typ] == nil {
			out[typ] = map[string]int{}
		}
		out[typ][reason] = n
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read skip log of batch %d: %w", id, err)
	}
	return out, nil
}

// GetOutbox loads one outbox email.
func GetOutbox(ctx context.Context, q Querier, id int64) (*OutboxMessage, error) {
	var m OutboxMessage
	err := q.QueryRow(ctx, `
		SELECT id, created_at, message_id, batch_id, from_address, to_address, subject, headers, text_body, html_body
		FROM outbox WHERE id = $1`, id).Scan(&m.ID, &m.CreatedAt, &m.MessageID, &m.BatchID, &m.From, &m.To, &m.Subject, &m.Headers, &m.Text, &m.HTML)
	if err != nil {
		return nil, notFound(err, fmt.Sprintf("outbox email %d", id))
	}
	return &m, nil
}
