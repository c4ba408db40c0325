package db

import (
	"context"
	"fmt"
	"time"
)

// The policy simulator replays stored events. These queries read them,
// and what was actually sent for them, without loading a whole range into
// memory: rows stream from the server in order and are handed on one
// event (or one batch) at a time.

// SimulationEvent is a stored event as a replay needs it: when lull
// accepted it (the time the engine batched it by), its type and batch key,
// and every recipient it named, whether a notification was stored for
// them or a preference suppressed it.
type SimulationEvent struct {
	ID         int64
	At         time.Time
	TypeKey    string
	BatchKey   string
	Recipients []string
}

// StreamSimulationEvents calls fn with each event accepted in [from, to),
// in the order the engine saw them, until fn returns an error. Retracted
// events are left out. The event passed to fn is reused for the next one.
//
// An event's recipients are its notifications, plus the recipients the
// skip log says it was suppressed for at ingest (muted, unsubscribed,
// inactive: skips with an event and no batch), so a replay under another
// policy sees everyone the host application named. Both tables are bounded
// by created_at, which notifications and ingest skips share with their
// event, so only the range's day partitions are read.
func StreamSimulationEvents(ctx context.Context, q Querier, from, to time.Time, fn func(*SimulationEvent) error) error {
	rows, err := q.Query(ctx, `
		SELECT e.id, e.created_at, e.type_key, e.batch_key, x.recipient_id
		FROM events e
		JOIN (
		    SELECT event_id, recipient_id FROM notifications
		    WHERE created_at >= $1 AND created_at < $2
		    UNION ALL
		    SELECT event_id, recipient_id FROM skips
		    WHERE event_id IS NOT NULL AND batch_id IS NULL AND created_at >= $1 AND created_at < $2
		) x ON x.event_id = e.id
		WHERE e.created_at >= $1 AND e.created_at < $2 AND e.retracted_at IS NULL
		ORDER BY e.created_at, e.id, x.recipient_id`, from, to)
	if err != nil {
		return fmt.Errorf("read events to simulate: %w", err)
	}
	defer rows.Close()
	var ev SimulationEvent
	var (
		id                  int64
		at                  time.Time
		typeKey, key, recip string
	)
	for rows.Next() {
		if err := rows.Scan(&id, &at, &typeKey, &key, &recip); err != nil {
			return fmt.Errorf("read events to simulate: %w", err)
		}
		if id != ev.ID && len(ev.Recipients) > 0 {
			if err := fn(&ev); err != nil {
				return err
			}
			ev.Recipients = ev.Recipients[:0]
		}
		ev.ID, ev.At, ev.TypeKey, ev.BatchKey = id, at, typeKey, key
		ev.Recipients = append(ev.Recipients, recip)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read events to simulate: %w", err)
	}
	if len(ev.Recipients) > 0 {
		return fn(&ev)
	}
	return nil
}

// SimulationRecipient is a recipient with every stored type choice.
type SimulationRecipient struct {
	Recipient
	Prefs []TypePreference
}

// SimulationRecipients loads the recipients that events accepted in
// [from, to) named, with their type preferences.
func SimulationRecipients(ctx context.Context, q Querier, from, to time.Time) ([]SimulationRecipient, error) {
	return simulationRecipients(ctx, q, `
		SELECT recipient_id FROM notifications WHERE created_at >= $1 AND created_at < $2
		UNION
		SELECT recipient_id FROM skips
		WHERE event_id IS NOT NULL AND batch_id IS NULL AND created_at >= $1 AND created_at < $2`, from, to)
}

// SimulationRecipientsByID loads the named recipients that exist, with
// their type preferences.
func SimulationRecipientsByID(ctx context.Context, q Querier, ids []string) ([]SimulationRecipient, error) {
	return simulationRecipients(ctx, q, `SELECT unnest($1::text[])`, ids)
}

// simulationRecipients loads the recipients whose ids the subquery named
// selects, then their preferences, in two statements.
func simulationRecipients(ctx context.Context, q Querier, named string, args ...any) ([]SimulationRecipient, error) {
	rows, err := q.Query(ctx, `
		SELECT r.id, r.email, r.timezone, r.active, r.daily_at, r.weekly_on, r.weekly_at,
		       r.weekly_days, r.every_hours, r.monthly_day, r.monthly_at, r.quiet_start, r.quiet_end, r.unsubscribed, r.daily_budget
		FROM recipients r WHERE r.id IN (`+named+`)
		ORDER BY r.id`, args...)
	if err != nil {
		return nil, fmt.Errorf("load recipients to simulate: %w", err)
	}
	var out []SimulationRecipient
	index := map[string]int{}
	for rows.Next() {
		var s SimulationRecipient
		r := &s.Recipient
		if err := rows.Scan(&r.ID, &r.Email, &r.Timezone, &r.Active, &r.DailyAt, &r.WeeklyOn, &r.WeeklyAt,
			&r.WeeklyDays, &r.EveryHours, &r.MonthlyDay, &r.MonthlyAt, &r.QuietStart, &r.QuietEnd, &r.Unsubscribed, &r.DailyBudget); err != nil {
			rows.Close()
			return nil, fmt.Errorf("load recipients to simulate: %w", err)
		}
		index[r.ID] = len(out)
		out = append(out, s)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("load recipients to simulate: %w", err)
	}
	ids := make([]string, len(out))
	for i := range out {
		ids[i] = out[i].ID
	}
	rows, err = q.Query(ctx, `
		SELECT recipient_id, type_key, mode, window_ms, max_wait_ms, lead
		FROM type_preferences WHERE recipient_id = ANY($1)`, ids)
	if err != nil {
		return nil, fmt.Errorf("load preferences to simulate: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var p TypePreference
		if err := rows.Scan(&p.RecipientID, &p.TypeKey, &p.Mode, &p.WindowMS, &p.MaxWaitMS, &p.Lead); err != nil {
			return nil, fmt.Errorf("load preferences to simulate: %w", err)
		}
		s := &out[index[p.RecipientID]]
		s.Prefs = append(s.Prefs, p)
	}
	return out, rows.Err()
}

// SentBatch is an email lull actually sent: to whom, when, and how many
// notifications of each type it carried.
type SentBatch struct {
	ID          int64
	RecipientID string
	SentAt      time.Time
	Parts       []SentPart
}

// SentPart is one type's share of a sent email; First is when its first
// notification arrived.
type SentPart struct {
	TypeKey string
	Items   int
	First   time.Time
}

// StreamSentBatches calls fn with each batch opened in [from, to) whose
// email was sent, in id order, until fn returns an error. Retracted
// notifications, which the email left out, are not counted. The batch
// passed to fn is reused for the next one.
func StreamSentBatches(ctx context.Context, q Querier, from, to time.Time, fn func(*SentBatch) error) error {
	// Notifications of a batch opened in the range were created in it or
	// later (a digest gathers for up to a week); the lower bound lets the
	// planner skip older partitions.
	rows, err := q.Query(ctx, `
		SELECT b.id, b.recipient_id, d.sent_at, n.type_key, count(*), min(n.created_at)
		FROM batches b
		JOIN deliveries d ON d.batch_id = b.id AND d.state = 'sent'
		JOIN notifications n ON n.batch_id = b.id AND n.retracted_at IS NULL AND n.created_at >= $1::timestamptz - interval '1 hour'
		WHERE b.opened_at >= $1 AND b.opened_at < $2
		GROUP BY b.id, b.recipient_id, d.sent_at, n.type_key
		ORDER BY b.id, min(n.created_at)`, from, to)
	if err != nil {
		return fmt.Errorf("read sent emails: %w", err)
	}
	defer rows.Close()
	var sb SentBatch
	for rows.Next() {
		var (
			id        int64
			recipient string
			sentAt    time.Time
			p         SentPart
		)
		if err := rows.Scan(&id, &recipient, &sentAt, &p.TypeKey, &p.Items, &p.First); err != nil {
			return fmt.Errorf("read sent emails: %w", err)
		}
		if id != sb.ID && len(sb.Parts) > 0 {
			if err := fn(&sb); err != nil {
				return err
			}
			sb.Parts = sb.Parts[:0]
		}
		sb.ID, sb.RecipientID, sb.SentAt = id, recipient, sentAt
		sb.Parts = append(sb.Parts, p)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read sent emails: %w", err)
	}
	if len(sb.Parts) > 0 {
		return fn(&sb)
	}
	return nil
}
