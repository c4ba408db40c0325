package batching

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/db/dbtest"
)

// storedAudience is n inline recipients, stored already as the list gives
// them, so that each chunk's save changes none and knows their settings
// as read (db.Saved.Read).
func storedAudience(t *testing.T, d *db.DB, n int) []RecipientRef {
	t.Helper()
	if _, err := d.Pool.Exec(context.Background(), `INSERT INTO recipients (id, email)
		SELECT 's' || lpad(i::text, 6, '0'), 's' || lpad(i::text, 6, '0') || '@example.com' FROM generate_series(0, $1 - 1) AS i`, n); err != nil {
		t.Fatal(err)
	}
	rs := make([]RecipientRef, n)
	for i := range rs {
		id := fmt.Sprintf("s%06d", i)
		rs[i] = RecipientRef{ID: id, Email: id + "@example.com", Inline: true}
	}
	return rs
}

// The save holds the settings of at most savedAheadAtMost chunks it
// saved and no one took yet. A fan-out written again with every chunk
// saved first (inOrder) waits for every chunk (saveIn) before reading
// any, as does one without a read ahead: the settings of a chunk the
// transaction waited for itself are dropped, not held until it ends.
func TestSaveInDropsSettingsNoOneTakes(t *testing.T) {
	d := dbtest.New(t)
	ctx := context.Background()
	e := &Engine{DB: d}
	rs := storedAudience(t, d, 5*fanOutChunk)
	order := byID(rs)
	ids := make([]string, len(rs))
	for j, i := range order {
		ids[j] = rs[i].ID
	}
	chunks := slices.Collect(slices.Chunk(ids, fanOutChunk))
	call := ingestCall{typ: &db.Type{Key: "post"}, ev: &Event{Recipients: rs}, saved: true, inOrder: true}
	sa, err := e.saveAhead(ctx, call, order, chunks)
	if err != nil || sa == nil {
		t.Fatalf("saveAhead: %v, %v", sa, err)
	}
	defer sa.stop()
	// As ingestTx does for call.inOrder, before the read ahead starts.
	for k := range chunks {
		if err := sa.saveIn(ctx, nil, k, false); err != nil {
			t.Fatal(err)
		}
	}
	held := 0
	for k := range sa.chunks {
		if sa.chunks[k].known.Read != nil {
			held++
		}
	}
	if held > savedAheadAtMost {
		t.Errorf("after saveIn of every chunk, %d chunks' settings (%d recipients) are held; want at most %d", held, held*fanOutChunk, savedAheadAtMost)
	}
}
