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

// The reads of LockForFlush, each about batch $1. Item types come from a
// subquery rather than from the items read before, so that all four
// statements go to the server together.
const (
	lockBatchQuery  = `SELECT ` + batchColumns + ` FROM batches WHERE id = $1 FOR UPDATE`
	itemTypesQuery  = `SELECT DISTINCT type_key FROM notifications WHERE batch_id = $1 AND retracted_at IS NULL`
	flushTypesQuery = `SELECT ` + typeColumns + ` FROM notification_types WHERE key IN (` + itemTypesQuery + `)`
	flushPrefsQuery = `SELECT ` + settingsColumns + `
		FROM recipients r
		LEFT JOIN type_preferences tp ON tp.recipient_id = r.id AND tp.type_key IN (` + itemTypesQuery + `)
		WHERE r.id = (SELECT recipient_id FROM batches WHERE id = $1)`
)

// LockForFlush locks batch id and reads, under that lock, everything its
// flush needs, in one round trip: a flush wave runs thousands of these, and
// four round trips in a row would each wait their turn on a busy machine.
func LockForFlush(ctx context.Context, tx pgx.Tx, id int64) (*FlushContent, error) {
	var q pgx.Batch
	q.Queue(lockBatchQuery, id)
	q.Queue(itemsQuery, id, false)
	q.Queue(flushTypesQuery, id)
	q.Queue(flushPrefsQuery, id)
	res := tx.SendBatch(ctx, &q)
	defer res.Close()

	c := &FlushContent{Types: map[string]*Type{}, Settings: map[string]RecipientSettings{}}
	var err error
	if c.Batch, err = scanBatch(res.QueryRow()); err != nil {
		return nil, notFound(err, fmt.Sprintf("batch %d", id))
	}
	rows, err := res.Query()
	if c.Items, err = collectItems(rows, err); err != nil {
		return nil, fmt.Errorf("batch %d items: %w", id, err)
	}
	rows, err = res.Query()
	types, err := collectTypes(rows, err)
	if err != nil {
		return nil, fmt.Errorf("batch %d types: %w", id, err)
	}
	for _, t := range types {
		c.Types[t.Key] = t
	}
	var rec *Recipient
	prefs := map[string]*TypePreference{}
	rows, err = res.Query()
	err = scanSettings(rows, err, func(s RecipientSettings) {
		rec = &s.Recipient
		if s.Pref != nil {
			prefs[s.Pref.TypeKey] = s.Pref
		}
	})
	if err != nil {
		return nil, fmt.Errorf("batch %d recipient: %w", id, err)
	}
	if rec != nil {
		for key := range c.Types {
			c.Settings[key] = RecipientSettings{Recipient: *rec, Pref: prefs[key]}
		}
	}
	return c, res.Close()
}
