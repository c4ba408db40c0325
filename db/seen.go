package db

import (
	"context"
	"fmt"
	"time"
)

// TouchSeen records that a recipient was active at at (opened the feed,
// the settings page, or as the host says). An earlier time never moves it
// back, a feed polled every few seconds writes once a minute at most, and
// a recipient lull does not know is skipped, not an error: a feed read
// for them changes nothing either. The row is locked as it is read, so a
// deletion committing meanwhile makes this write nothing rather than fail
// the foreign key (it may run in a caller's transaction).
func TouchSeen(ctx context.Context, q Querier, recipientID string, at time.Time) error {
	_, err := q.Exec(ctx, `
		INSERT INTO recipient_seen (recipient_id, seen_at)
		SELECT id, $2 FROM recipients WHERE id = $1 FOR KEY SHARE
		ON CONFLICT (recipient_id) DO UPDATE SET seen_at = EXCLUDED.seen_at
		WHERE recipient_seen.seen_at < EXCLUDED.seen_at - interval '1 minute'`, recipientID, at)
	if err != nil {
		return fmt.Errorf("record recipient %s seen: %w", recipientID, err)
	}
	return nil
}

// AbsentSince returns, for those of ids last seen before cutoff, when they
// were last seen. A recipient never seen is not absent: lull cannot tell
// an installation that never reports activity from a recipient who left.
func AbsentSince(ctx context.Context, q Querier, ids []string, cutoff time.Time) (map[string]time.Time, error) {
	rows, err := q.Query(ctx, `
		SELECT recipient_id, seen_at FROM recipient_seen
		WHERE recipient_id = ANY($1) AND seen_at < $2`, ids, cutoff)
	if err != nil {
		return nil, fmt.Errorf("absent recipients: %w", err)
	}
	defer rows.Close()
	out := map[string]time.Time{}
	for rows.Next() {
		var id string
		var at time.Time
		if err := rows.Scan(&id, &at); err != nil {
			return nil, err
		}
		out[id] = at
	}
	return out, rows.Err()
}

// SkipSlowed starts the skip log's reason for a notification that joined
// the weekly digest instead of its usual batch (SlowedReason).
const SkipSlowed = "slowed: recipient absent since "

// SlowedReason is the skip log's reason for a notification slowed to the
// weekly digest because its recipient was last seen at since.
func SlowedReason(since time.Time) string {
	return SkipSlowed + since.UTC().Format("2006-01-02 15:04 UTC")
}
