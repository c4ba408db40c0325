package db

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lull-dev/lull/preferences"
)

// unread is notifications_unread's condition; notUnread,
// notifications_read's, holds read and retracted notifications. Like
// notJoinable it is written "IS NOT TRUE" to stay one condition, and a
// query must name either as written for PostgreSQL to read its index.
const (
	unread    = `(read_at IS NULL AND retracted_at IS NULL)`
	notUnread = `(` + unread + ` IS NOT TRUE)`
)

// anyNotification is true of every notification: beside recipient_id =
// …, it lets PostgreSQL read a recipient's notifications from both
// indexes that hold them between them (a BitmapOr), so that a fan-out
// writes one index keyed by recipient per notification, not two.
const anyNotification = `(` + unread + ` OR ` + notUnread + `)`

// FeedItem is one notification in a recipient's in-app feed.
type FeedItem struct {
	Item
	BatchKey string
	SeenAt   *time.Time
}

// Feed returns a recipient's notifications newest first, keyset-paged by
// id; with unreadOnly, only those not read yet. Retracted ones never show.
// It stops before the item that would bring the actor, object and data it
// has read past maxBytes, and then reports cut; the first item is always
// read.
func Feed(ctx context.Context, q Querier, recipientID string, before int64, limit int, unreadOnly bool, maxBytes int) (items []FeedItem, cut bool, err error) {
	// Unread and read notifications are in indexes of their own: each
	// gives its newest, and the page is the newest of both. Each asks for
	// its events before its limit, so that a notification whose event is
	// gone (retention drops the two tables' days one after the other)
	// leaves the page no shorter. Events are looked up one by one, by key:
	// in each half a scalar subquery, which PostgreSQL never turns into a
	// join, and for the page a LATERAL subquery with a limit. As EXISTS
	// and as a join, planned for a recipient with a long backlog, they
	// read every event to hash them (and every unread notification to
	// sort them, with statistics as autovacuum leaves them: a partition's,
	// none for the partitioned table).
	arm := func(half string) string {
		return `(SELECT id, created_at, event_id, type_key, occurred_at, read_at, seen_at FROM notifications n
		     WHERE recipient_id = $1 AND ` + half + ` AND ($2::bigint = 0 OR id < $2)
		       AND (SELECT true FROM events e WHERE e.id = n.event_id AND e.created_at = n.created_at LIMIT 1)
		     ORDER BY id DESC LIMIT $3)`
	}
	rows, err := q.Query(ctx, `
		SELECT n.id, n.event_id, n.type_key, e.actor, e.object, e.data, n.occurred_at, n.read_at, n.seen_at, e.batch_key
		FROM (`+arm(unread)+` UNION ALL `+arm(notUnread+` AND retracted_at IS NULL AND NOT $4`)+`
		      ORDER BY id DESC LIMIT $3) n
		CROSS JOIN LATERAL (SELECT actor, object, data, batch_key FROM events e
		     WHERE e.id = n.event_id AND e.created_at = n.created_at LIMIT 1) e
		ORDER BY n.id DESC`, recipientID, before, limit, unreadOnly)
	if err != nil {
		return nil, false, fmt.Errorf("feed: %w", err)
	}
	defer rows.Close()
	size := 0
	for rows.Next() {
		var f FeedItem
		if err := rows.Scan(&f.NotificationID, &f.EventID, &f.TypeKey, &f.Actor, &f.Object, &f.Data, &f.OccurredAt, &f.ReadAt, &f.SeenAt, &f.BatchKey); err != nil {
			return nil, false, fmt.Errorf("feed: %w", err)
		}
		size += len(f.Actor) + len(f.Object) + len(f.Data)
		if len(items) > 0 && size > maxBytes {
			return items, true, nil
		}
		items = append(items, f)
	}
	return items, false, rows.Err()
}

// FeedCounts are the numbers behind a notification bell.
type FeedCounts struct {
	Unread int            `json:"unread"`
	Unseen int            `json:"unseen"`
	ByType map[string]int `json:"unread_by_type"`
}

// CountFeed counts a recipient's unread and unseen notifications.
func CountFeed(ctx context.Context, q Querier, recipientID string) (*FeedCounts, error) {
	rows, err := q.Query(ctx, `
		SELECT type_key, count(*), count(*) FILTER (WHERE seen_at IS NULL)
		FROM notifications WHERE recipient_id = $1 AND read_at IS NULL AND retracted_at IS NULL
		GROUP BY type_key`, recipientID)
	if err != nil {
		return nil, fmt.Errorf("feed counts: %w", err)
	}
	defer rows.Close()
	c := &FeedCounts{ByType: map[string]int{}}
	for rows.Next() {
		var k string
		var unread, unseen int
		if err := rows.Scan(&k, &unread, &unseen); err != nil {
			return nil, err
		}
		c.ByType[k], c.Unread, c.Unseen = unread, c.Unread+unread, c.Unseen+unseen
	}
	return c, rows.Err()
}

// MarkRead marks notifications read (ids, or all created before before
// when ids is empty) and takes them out of open batches of types with
// skip_read, canceling batches left with nothing unread. It returns how
// many were marked and what it took out of each batch.
//
// The recipient's open batches are locked first, in the order ingest locks
// batches (by batch key, in byte order), then by id: a full batch stays
// open beside the next one of its key until its flush, and two mark-reads
// taking such a pair in different orders deadlocked. Only the locked
// batches are recounted, from a snapshot taken under those locks. Without
// the locks, an event joining a batch between the recount's snapshot and
// its update made the batch look emptied and canceled it with the new,
// unread notification inside.
//
// A batch opened after the locks holds only notifications that arrived
// during the mark-read: they stay unread, as if they had come just after
// it. Marking them read without recounting their batch left them in its
// count, out of its email and out of the skip log, accounted for nowhere.
// (A notification whose id the caller names was stored before the
// mark-read began, so its batch was locked if it was open, or folded
// into the held digest locked after the others.)
//
// The held digest is locked last: a flush holds its own batch when
// it folds that into the held digest, and taking the held digest first
// here waited on such a flush while it waited on us.
func MarkRead(ctx context.Context, q Querier, recipientID string, ids []int64, before, now time.Time) (int, []Removal, error) {
	rows, err := q.Query(ctx, `
		SELECT id FROM batches WHERE recipient_id = $1 AND state = 'open' AND `+anyBatch+`
		ORDER BY batch_key = $2, batch_key COLLATE "C", id FOR UPDATE`, recipientID, preferences.HeldKey)
	if err != nil {
		return 0, nil, fmt.Errorf("mark read: lock batches: %w", err)
	}
	locked, err := collectIDs(rows)
	if err != nil {
		return 0, nil, fmt.Errorf("mark read: lock batches: %w", err)
	}
	// A flush that held one of them may have folded it, while this waited,
	// into a held digest it opened: a batch none of the locks saw, holding
	// notifications from before the mark-read. It is last in the order,
	// and no other opens while this holds it.
	rows, err = q.Query(ctx, `
		SELECT id FROM batches WHERE recipient_id = $1 AND state = 'open' AND batch_key = $2
		  AND id <> ALL($3) AND `+anyBatch+` FOR UPDATE`, recipientID, preferences.HeldKey, locked)
	if err != nil {
		return 0, nil, fmt.Errorf("mark read: lock held digest: %w", err)
	}
	held, err := collectIDs(rows)
	if err != nil {
		return 0, nil, fmt.Errorf("mark read: lock held digest: %w", err)
	}
	locked = append(locked, held...)
	// Notifications named have a statement of their own, which finds them
	// in the recipient's two indexes (keyed by recipient and id): asked in
	// one statement with the other form, a plan for any recipient read all
	// of the recipient's notifications (33 ms for one with 39,200 unread),
	// and without anyNotification each id was looked up in every day
	// partition's primary key.
	which, arg := anyNotification+` AND id = ANY($2::bigint[])`, any(ids)
	if len(ids) == 0 {
		which, arg = anyNotification+` AND occurred_at < $2`, before
	}
	tag, err := q.Exec(ctx, `
		UPDATE notifications SET read_at = $3, seen_at = coalesce(seen_at, $3)
		WHERE recipient_id = $1 AND read_at IS NULL AND `+which+`
		  AND (batch_id = ANY($4) OR NOT EXISTS (SELECT 1 FROM batches b WHERE b.id = batch_id AND b.state = 'open'))`,
		recipientID, arg, now, locked)
	if err != nil {
		return 0, nil, fmt.Errorf("mark read: %w", err)
	}
	removals, err := recountForRead(ctx, q, locked, now)
	if err != nil {
		return 0, nil, fmt.Errorf("mark read: %w", err)
	}
	return int(tag.RowsAffected()), removals, nil
}

// recountForRead recounts the locked open batches ids from what is still
// to send, cancels those left with nothing as read in the app, and
// returns what it took out of each. The locks keep item_count still
// between the CTE's read and the update.
func recountForRead(ctx context.Context, q Querier, ids []int64, now time.Time) ([]Removal, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	rows, err := q.Query(ctx, `
		WITH counts AS (
		    SELECT n.batch_id AS id, max(b.item_count) AS was,
		           count(*) FILTER (WHERE n.retracted_at IS NULL
		           AND (n.read_at IS NULL OR NOT t.skip_read)) AS left
		    FROM notifications n
		    JOIN batches b ON b.id = n.batch_id
		    JOIN notification_types t ON t.key = n.type_key
		    WHERE n.batch_id = ANY($1)
		    GROUP BY n.batch_id
		)
		UPDATE batches b SET item_count = c.left,
		    state = CASE WHEN c.left = 0 THEN 'canceled' ELSE b.state END,
		    reason = CASE WHEN c.left = 0 THEN 'read in app' ELSE b.reason END,
		    processed_at = CASE WHEN c.left = 0 THEN $2 ELSE b.processed_at END
		FROM counts c WHERE b.id = c.id AND b.item_count <> c.left
		RETURNING b.id, b.recipient_id, coalesce(b.type_key, ''), c.was - c.left, c.left`, ids, now)
	if err != nil {
		return nil, err
	}
	return collectRemovals(rows)
}

// MarkSeen marks all of a recipient's notifications seen (the bell was
// opened), or only ids when given.
func MarkSeen(ctx context.Context, q Querier, recipientID string, ids []int64, now time.Time) (int, error) {
	tag, err := q.Exec(ctx, `
		UPDATE notifications SET seen_at = $3
		WHERE recipient_id = $1 AND seen_at IS NULL AND `+anyNotification+` AND (coalesce(cardinality($2::bigint[]), 0) = 0 OR id = ANY($2::bigint[]))`, recipientID, ids, now)
	if err != nil {
		return 0, fmt.Errorf("mark seen: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

// WatchedAmong narrows recipientIDs, in their order, to those some lull
// process has a feed stream open for, when there are more than
// watchedReadFrom of them and at most watchedReadAtMost live watches:
// NotifyFeed then sends a short list instead of every recipient of a
// fan-out. Sent as an array of 100,000 ids, the fan-out's NOTIFY
// statement took 50–80 ms at the end of its transaction, to find the few
// recipients (often none) with a stream open. Otherwise it returns
// recipientIDs as they are, and NotifyFeed's own query picks the watched
// ones. It reads at most watchedReadAtMost+1 live watches, through
// feed_watchers_live, whatever the size of the table.
func WatchedAmong(ctx context.Context, q Querier, recipientIDs []string) ([]string, error) {
	if len(recipientIDs) <= watchedReadFrom {
		return recipientIDs, nil
	}
	rows, err := q.Query(ctx, `
		SELECT recipient_id FROM feed_watchers WHERE expires_at > now() LIMIT $1`, watchedReadAtMost+1)
	if err != nil {
		return nil, fmt.Errorf("feed watchers: %w", err)
	}
	watched, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("feed watchers: %w", err)
	}
	if len(watched) > watchedReadAtMost {
		return recipientIDs, nil
	}
	set := make(map[string]bool, len(watched))
	for _, id := range watched {
		set[id] = true
	}
	var out []string
	for _, id := range recipientIDs {
		if set[id] {
			out = append(out, id)
		}
	}
	return out, nil
}

const (
	// watchedReadFrom is how many recipients WatchedAmong takes as they
	// are: for a few, reading the watches first costs a round trip more
	// than it saves.
	watchedReadFrom = 1000
	// watchedReadAtMost is how many live watches (a recipient's streams
	// in several processes count apart) WatchedAmong reads at most.
	watchedReadAtMost = 1000
)

// NotifyFeed tells listening lull processes that recipients' feeds
// changed, for the recipients some process has a stream open for (see
// WatchFeed). NOTIFY is transactional: listeners hear it when the
// caller's transaction commits. A large fan-out sends one "*" instead of
// one notification per recipient.
func NotifyFeed(ctx context.Context, q Querier, recipientIDs []string) error {
	if len(recipientIDs) == 0 {
		return nil
	}
	_, err := q.Exec(ctx, `
		WITH w AS (SELECT DISTINCT recipient_id FROM feed_watchers
		           WHERE recipient_id = ANY($1) AND expires_at > now())
		SELECT pg_notify('lull_feed', recipient_id) FROM w WHERE (SELECT count(*) FROM w) <= 1000
		UNION ALL
		SELECT pg_notify('lull_feed', '*') WHERE (SELECT count(*) FROM w) > 1000`, recipientIDs)
	if err != nil {
		return fmt.Errorf("notify feed: %w", err)
	}
	return nil
}

// WatchFeed records that hub has streams open for recipientIDs until
// expires, so that changes to their feeds are announced; the hub renews
// it while the streams stay open.
func WatchFeed(ctx context.Context, q Querier, hub string, recipientIDs []string, expires time.Time) error {
	_, err := q.Exec(ctx, `
		INSERT INTO feed_watchers (recipient_id, hub, expires_at) SELECT unnest($1::text[]), $2, $3
		ON CONFLICT (recipient_id, hub) DO UPDATE SET expires_at = EXCLUDED.expires_at`, recipientIDs, hub, expires)
	if err != nil {
		return fmt.Errorf("watch feed: %w", err)
	}
	return nil
}

// UnwatchFeed removes hub's watch on a recipient's feed.
func UnwatchFeed(ctx context.Context, q Querier, hub, recipientID string) error {
	_, err := q.Exec(ctx, `DELETE FROM feed_watchers WHERE recipient_id = $1 AND hub = $2`, recipientID, hub)
	return err
}
