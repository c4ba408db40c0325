package db

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// FlushContent is what a flush reads about its batch.
type FlushContent struct {
	Batch *Batch
	// Items leaves retracted notifications out, in arrival order.
	Items []Item
	// Types holds the types of the items.
	Types map[string]*Type
	// Settings holds the recipient's settings for each item type; it is
	// empty when the recipient is gone.
	Settings map[string]RecipientSettings
}

// The reads of a flush, each about the batches in $1. Types and
// preferences are selected through subqueries rather than from the items
// read before, so that all four statements go to the server together.
// Preferences are read for every item type of any batch in $1; each
// batch keeps those of its own types.
const (
	readBatchesQuery     = `SELECT ` + batchColumns + ` FROM batches WHERE id = ANY($1) ORDER BY id`
	lockBatchesQuery     = readBatchesQuery + ` FOR UPDATE`
	lockFreeBatchesQuery = lockBatchesQuery + ` SKIP LOCKED`
	// flushItemsQuery reads the data of only the items an email can show:
	// per batch and type, the first or latest display_limit of those not
	// left out as read (mailtemplates picks them the same way). A digest
	// of 1,000 items whose events carry 64 KiB of data each then reads
	// 640 KiB of data for its ten lines instead of 64 MB. Every item still
	// counts and names its actor.
	flushItemsQuery = `
		SELECT n.batch_id, n.id, n.event_id, n.type_key, e.actor, e.object,
		       CASE WHEN row_number() OVER (
		                PARTITION BY n.batch_id, n.type_key, n.read_at IS NOT NULL AND t.skip_read
		                ORDER BY CASE WHEN t.item_order = 'first' THEN n.id ELSE -n.id END
		            ) <= greatest(t.display_limit, 1) THEN e.data END,
		       n.occurred_at, n.retracted_at, n.read_at
		FROM notifications n
		JOIN events e ON e.id = n.event_id AND e.created_at = n.created_at
		LEFT JOIN notification_types t ON t.key = n.type_key
		WHERE n.batch_id = ANY($1) AND n.retracted_at IS NULL
		ORDER BY n.batch_id, n.id`
	itemTypesQuery  = `SELECT type_key FROM notifications WHERE batch_id = ANY($1) AND retracted_at IS NULL`
	flushTypesQuery = `SELECT ` + typeColumns + ` FROM notification_types WHERE key IN (` + itemTypesQuery + `)`
	flushPrefsQuery = `SELECT ` + settingsColumns + `
		FROM recipients r
		LEFT JOIN type_preferences tp ON tp.recipient_id = r.id AND tp.type_key IN (` + itemTypesQuery + `)
		WHERE r.id IN (SELECT recipient_id FROM batches WHERE id = ANY($1))`
)

// LockForFlush locks batch id, waiting for whoever holds it, and reads
// under that lock everything its flush needs, in one round trip.
func LockForFlush(ctx context.Context, tx pgx.Tx, id int64) (*FlushContent, error) {
	return readOneForFlush(ctx, tx, id, lockBatchesQuery)
}

// ReadForFlush reads what LockForFlush reads, without a lock: a preview
// shows what a flush would do without holding one up or waiting for one.
func ReadForFlush(ctx context.Context, d *DB, id int64) (*FlushContent, error) {
	return readOneForFlush(ctx, d.Pool, id, readBatchesQuery)
}

func readOneForFlush(ctx context.Context, q batchSender, id int64, batchQuery string) (*FlushContent, error) {
	cs, err := lockForFlush(ctx, q, []int64{id}, batchQuery)
	if err != nil {
		return nil, err
	}
	if cs[id] == nil {
		return nil, fmt.Errorf("batch %d: %w", id, ErrNotFound)
	}
	return cs[id], nil
}

// LockFreeForFlush is LockForFlush for many batches at once: a flush wave
// runs thousands of flushes together, and one round trip of four
// statements for a hundred batches costs the server far less than a
// hundred. It skips batches another transaction holds (an ingest adding an
// item, a flush of their own), so it never waits and cannot deadlock
// against anyone locking batches in another order; the result has no
// entry for a batch skipped or missing.
func LockFreeForFlush(ctx context.Context, tx pgx.Tx, ids []int64) (map[int64]*FlushContent, error) {
	return lockForFlush(ctx, tx, ids, lockFreeBatchesQuery)
}

// batchSender is what a pool and a transaction share for sending
// statements together.
type batchSender interface {
	SendBatch(context.Context, *pgx.Batch) pgx.BatchResults
}

func lockForFlush(ctx context.Context, tx batchSender, ids []int64, lockQuery string) (map[int64]*FlushContent, error) {
	var q pgx.Batch
	q.Queue(lockQuery, ids)
	q.Queue(flushItemsQuery, ids)
	q.Queue(flushTypesQuery, ids)
	q.Queue(flushPrefsQuery, ids)
	res := tx.SendBatch(ctx, &q)
	defer res.Close()

	out := make(map[int64]*FlushContent, len(ids))
	rows, err := res.Query()
	batches, err := collectBatches(rows, err)
	if err != nil {
		return nil, fmt.Errorf("lock batches: %w", err)
	}
	for _, b := range batches {
		out[b.ID] = &FlushContent{Batch: b, Types: map[string]*Type{}, Settings: map[string]RecipientSettings{}}
	}
	if err := readFlushItems(res, out); err != nil {
		return nil, fmt.Errorf("batch items: %w", err)
	}
	rows, err = res.Query()
	types, err := collectTypes(rows, err)
	if err != nil {
		return nil, fmt.Errorf("batch types: %w", err)
	}
	byKey := make(map[string]*Type, len(types))
	for _, t := range types {
		byKey[t.Key] = t
	}
	for _, c := range out {
		for _, it := range c.Items {
			if t := byKey[it.TypeKey]; t != nil {
				c.Types[it.TypeKey] = t
			}
		}
	}
	if err := readFlushSettings(res, out); err != nil {
		return nil, fmt.Errorf("batch recipients: %w", err)
	}
	return out, res.Close()
}

func collectBatches(rows pgx.Rows, err error) ([]*Batch, error) {
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (*Batch, error) { return scanBatch(row) })
}

// readFlushItems hands each locked batch its items.
func readFlushItems(res pgx.BatchResults, out map[int64]*FlushContent) error {
	rows, err := res.Query()
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var batchID int64
		var it Item
		if err := rows.Scan(itemFields(&batchID, &it)...); err != nil {
			return err
		}
		if c := out[batchID]; c != nil {
			c.Items = append(c.Items, it)
		}
	}
	return rows.Err()
}

// readFlushSettings hands each locked batch its recipient's settings for
// each type among its items.
func readFlushSettings(res pgx.BatchResults, out map[int64]*FlushContent) error {
	type settings struct {
		rec   Recipient
		prefs map[string]*TypePreference
	}
	byRecipient := map[string]*settings{}
	rows, err := res.Query()
	err = scanSettings(rows, err, func(s RecipientSettings) {
		r := byRecipient[s.ID]
		if r == nil {
			r = &settings{rec: s.Recipient, prefs: map[string]*TypePreference{}}
			byRecipient[s.ID] = r
		}
		if s.Pref != nil {
			r.prefs[s.Pref.TypeKey] = s.Pref
		}
	})
	if err != nil {
		return err
	}
	for _, c := range out {
		r := byRecipient[c.Batch.RecipientID]
		if r == nil {
			continue
		}
		for key := range c.Types {
			c.Settings[key] = RecipientSettings{Recipient: r.rec, Pref: r.prefs[key]}
		}
	}
	return nil
}
