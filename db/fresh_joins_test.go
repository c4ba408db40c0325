package db_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/db/dbtest"
)

// hintDB is freshDB with a second cool-down type that takes at most two
// items a batch, and recipients so that joins and pre-existing batches
// have someone to belong to.
func hintDB(t *testing.T, rids ...string) *db.DB {
	t.Helper()
	d := freshDB(t)
	ctx := context.Background()
	if err := db.SaveType(ctx, d.Pool, &db.Type{Key: "cap", Name: "Cap", DefaultMode: "cooldown", WindowMS: 3_600_000, MaxItems: 2,
		DisplayLimit: 10, ItemOrder: "latest", ItemText: "{{actor.name}}", GroupText: "{{count}} caps"}); err != nil {
		t.Fatal(err)
	}
	for _, rid := range rids {
		if _, err := d.Pool.Exec(ctx, `INSERT INTO recipients (id, email, name, timezone, active) VALUES ($1, $1 || '@example.com', $1, 'UTC', true)
			ON CONFLICT DO NOTHING`, rid); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// preBatch opens a batch as another event would have, committed.
func preBatch(t *testing.T, q db.Querier, rid, key, mode string, typeKey *string, items int, closes time.Time, state string, sealed bool) {
	t.Helper()
	if _, err := q.Exec(context.Background(), `INSERT INTO batches (recipient_id, batch_key, type_key, mode, state, sealed, opened_at, last_event_at, closes_at, window_ms, item_count)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $7, $8, 3600000, $9)`, rid, key, typeKey, mode, state, sealed, freshNow.Add(-10*time.Minute), closes, items); err != nil {
		t.Fatal(err)
	}
}

func strp(s string) *string { return &s }

type hintJoin struct {
	rid, key, mode, typ string
	maxItems            int
}

func (a hintJoin) join(fresh bool) db.BatchJoin {
	return db.BatchJoin{RecipientID: a.rid, BatchKey: a.key, Mode: a.mode, TypeKey: a.typ, Window: time.Hour,
		ClosesAt: freshNow.Add(time.Hour), MaxItems: a.maxItems, Fresh: fresh}
}

// seedStates gives the recipients of the equivalence test every state a
// stale hint may meet: nothing open, an open batch with room, a due one,
// a full one, a sealed one, a digest of another type under the shared key
// "digest:daily", one being flushed, and a batch that this very transaction
// opened in an earlier chunk (a recipient named twice across a chunk
// boundary).
func seedStates(t *testing.T, d *db.DB) {
	t.Helper()
	now := freshNow
	preBatch(t, d.Pool, "open", "task", "cooldown", strp("task"), 1, now.Add(30*time.Minute), "open", false)
	preBatch(t, d.Pool, "due", "task", "cooldown", strp("task"), 3, now.Add(-time.Second), "open", false)
	preBatch(t, d.Pool, "due0", "task", "cooldown", strp("task"), 1, now, "open", false)
	preBatch(t, d.Pool, "full", "cap", "cooldown", strp("cap"), 2, now.Add(30*time.Minute), "open", false)
	preBatch(t, d.Pool, "almost", "cap", "cooldown", strp("cap"), 1, now.Add(30*time.Minute), "open", false)
	preBatch(t, d.Pool, "sealed", "task", "cooldown", strp("task"), 4, now.Add(-time.Minute), "open", true)
	preBatch(t, d.Pool, "digest", "digest:daily", "daily", nil, 5, now.Add(8*time.Hour), "open", false)
	preBatch(t, d.Pool, "flushing", "task", "cooldown", strp("task"), 2, now.Add(-time.Minute), "flushing", false)
	preBatch(t, d.Pool, "imm", "task", "immediate", strp("task"), 1, now, "open", false)
}

var hintRecipients = []string{"new", "new2", "dup", "open", "due", "due0", "full", "almost", "sealed", "digest", "flushing", "imm", "twice"}

// hintJoins is one statement's joins: several per recipient for the
// capped type (a fresh group larger than max_items), immediate ones, the
// shared daily key, in no particular order.
func hintJoins(fresh bool) []db.BatchJoin {
	js := []hintJoin{
		{"new", "task", "cooldown", "task", 0},
		{"new2", "cap", "cooldown", "cap", 2},
		{"dup", "cap", "cooldown", "cap", 2},
		{"new2", "cap", "cooldown", "cap", 2},
		{"dup", "cap", "cooldown", "cap", 2},
		{"new2", "cap", "cooldown", "cap", 2},
		{"dup", "cap", "cooldown", "cap", 2},
		{"new2", "cap", "cooldown", "cap", 2},
		{"dup", "cap", "cooldown", "cap", 2},
		{"dup", "cap", "cooldown", "cap", 2},
		{"open", "task", "cooldown", "task", 0},
		{"due", "task", "cooldown", "task", 0},
		{"due0", "task", "cooldown", "task", 0},
		{"due0", "task", "cooldown", "task", 0},
		{"full", "cap", "cooldown", "cap", 2},
		{"full", "cap", "cooldown", "cap", 2},
		{"full", "cap", "cooldown", "cap", 2},
		{"almost", "cap", "cooldown", "cap", 2},
		{"almost", "cap", "cooldown", "cap", 2},
		{"sealed", "task", "cooldown", "task", 0},
		{"digest", "digest:daily", "daily", "", 0},
		{"digest", "digest:daily", "daily", "", 0},
		{"flushing", "task", "cooldown", "task", 0},
		{"imm", "task", "immediate", "task", 0},
		{"imm", "task", "immediate", "task", 0},
		{"new", "task", "immediate", "task", 0},
		{"twice", "task", "cooldown", "task", 0},
	}
	out := make([]db.BatchJoin, len(js))
	for i, j := range js {
		out[i] = j.join(fresh)
	}
	return out
}

// canon describes joined batches and the table without the ids new
// batches were given (a rolled-back INSERT uses up sequence values): a
// new id is named by the order it first appears in.
type canon struct {
	seen map[int64]string
	pre  int64
}

func (c *canon) id(id int64) string {
	if id <= c.pre {
		return fmt.Sprint(id)
	}
	if s, ok := c.seen[id]; ok {
		return s
	}
	s := fmt.Sprintf("new#%d", len(c.seen))
	c.seen[id] = s
	return s
}

func (c *canon) joined(out []db.JoinedBatch) []string {
	var s []string
	for _, b := range out {
		s = append(s, fmt.Sprintf("%s %s/%s %s items=%d inserted=%v opened=%s last=%s closes=%s (%s) window=%s wait=%s",
			c.id(b.ID), b.RecipientID, b.BatchKey, b.Mode, b.ItemCount, b.Inserted,
			b.OpenedAt.UTC().Format(time.RFC3339Nano), b.LastEventAt.UTC().Format(time.RFC3339Nano), b.ClosesAt.UTC().Format(time.RFC3339Nano),
			b.ClosesAt.Location(), b.Window, b.MaxWait))
	}
	return s
}

func (c *canon) table(t *testing.T, d *db.DB) []string {
	t.Helper()
	rows, err := d.Pool.Query(context.Background(), `SELECT id, recipient_id, batch_key, mode, state, sealed, item_count, closes_at FROM batches ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	var s []string
	var id int64
	var rid, key, mode, state string
	var sealed bool
	var items int
	var closes time.Time
	if _, err := pgx.ForEachRow(rows, []any{&id, &rid, &key, &mode, &state, &sealed, &items, &closes}, func() error {
		s = append(s, fmt.Sprintf("%s %s/%s %s %s sealed=%v items=%d closes=%s", c.id(id), rid, key, mode, state, sealed, items, closes.UTC().Format(time.RFC3339Nano)))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	slices.Sort(s)
	return s
}

// The ways a statement's joins may come: without a hint, marked Fresh,
// or marked Fresh with an id Reserved for each (see MarkFresh).
const (
	unhinted = iota
	hinted
	reserved
)

// hintAs marks joins as hint says, reserving ids from d's sequence the way
// MarkFresh does (a stale hint included, which MarkFresh would not give).
func hintAs(t *testing.T, d *db.DB, hint int, joins []db.BatchJoin) []db.BatchJoin {
	t.Helper()
	for i := range joins {
		joins[i].Fresh = hint != unhinted
	}
	if hint == reserved {
		if err := reserveIDs(d, joins); err != nil {
			t.Fatal(err)
		}
	}
	return joins
}

// reserveIDs gives each join an id from the batches' sequence, ascending,
// as MarkFresh does, but whatever batches are open.
func reserveIDs(d *db.DB, joins []db.BatchJoin) error {
	for i := range joins {
		if err := d.Pool.QueryRow(context.Background(), `SELECT nextval('batches_id_seq')`).Scan(&joins[i].Reserved); err != nil {
			return err
		}
	}
	return nil
}

// runHinted seeds a database, joins in one transaction (first "twice"
// without the hint, as a first chunk would, then the joins hinted as
// hint says) and describes what came out.
func runHinted(t *testing.T, hint int) (joined, table []string) {
	t.Helper()
	d := hintDB(t, hintRecipients...)
	seedStates(t, d)
	ctx := context.Background()
	var pre int64
	if err := d.Pool.QueryRow(ctx, `SELECT coalesce(max(id), 0) FROM batches`).Scan(&pre); err != nil {
		t.Fatal(err)
	}
	c := &canon{seen: map[int64]string{}, pre: pre}
	var out []db.JoinedBatch
	err := d.InTx(ctx, func(tx pgx.Tx) error {
		if _, err := db.JoinBatches(ctx, tx, []db.BatchJoin{hintJoin{"twice", "task", "cooldown", "task", 0}.join(false)}, freshNow); err != nil {
			return err
		}
		var err error
		out, err = db.JoinBatches(ctx, tx, hintAs(t, d, hint, hintJoins(false)), freshNow)
		return err
	})
	if err != nil {
		t.Fatalf("hint %d: %v", hint, err)
	}
	return c.joined(out), c.table(t, d)
}

// A stale or a true hint changes nothing a client or the table sees: the
// same batches are joined, opened, sealed and refused, with the same
// counts, Inserted flags and close times, whatever state the recipient's
// batches were in (open, due, full, sealed, flushing, a digest of another
// type, an immediate one, one the transaction opened itself).
func TestFreshHintHintChangesNothing(t *testing.T) {
	t.Parallel()
	wantJoined, wantTable := runHinted(t, unhinted)
	for _, hint := range []int{hinted, reserved} {
		gotJoined, gotTable := runHinted(t, hint)
		if !slices.Equal(gotJoined, wantJoined) {
			t.Errorf("joined with hint %d:\n%s\nwithout:\n%s", hint, strings.Join(gotJoined, "\n"), strings.Join(wantJoined, "\n"))
		}
		if !slices.Equal(gotTable, wantTable) {
			t.Errorf("table with hint %d:\n%s\nwithout:\n%s", hint, strings.Join(gotTable, "\n"), strings.Join(wantTable, "\n"))
		}
	}
}

// Only truly new batches, with duplicates over max_items and immediate
// joins: the plain INSERT path (no fallback) matches the upsert, and so
// do the rows computed for reserved ids, with times and windows finer
// than the database keeps.
func TestFreshHintPlainInsertMatchesUpsert(t *testing.T) {
	t.Parallel()
	now := freshNow.Add(123_456_789)
	run := func(hint int) ([]string, []string) {
		d := hintDB(t, "new", "new2", "dup")
		ctx := context.Background()
		c := &canon{seen: map[int64]string{}}
		var all []db.BatchJoin
		for _, j := range hintJoins(false) {
			if j.RecipientID == "new" || j.RecipientID == "new2" || j.RecipientID == "dup" {
				j.ClosesAt = j.ClosesAt.Add(987_654_321)
				j.Window, j.MaxWait = j.Window+1500*time.Microsecond, 2*time.Hour+1
				all = append(all, j)
			}
		}
		var out []db.JoinedBatch
		err := d.InTx(ctx, func(tx pgx.Tx) error {
			var err error
			out, err = db.JoinBatches(ctx, tx, hintAs(t, d, hint, all), now)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return c.joined(out), c.table(t, d)
	}
	wantJoined, wantTable := run(unhinted)
	for _, hint := range []int{hinted, reserved} {
		gotJoined, gotTable := run(hint)
		if !slices.Equal(gotJoined, wantJoined) || !slices.Equal(gotTable, wantTable) {
			t.Errorf("with hint %d:\n%s\n%s\nwithout:\n%s\n%s", hint, strings.Join(gotJoined, "\n"), strings.Join(gotTable, "\n"),
				strings.Join(wantJoined, "\n"), strings.Join(wantTable, "\n"))
		}
	}
}

// uncommittedBatch opens rid's batch in a transaction left open, as an
// event still being written would; the test ends it.
func uncommittedBatch(t *testing.T, d *db.DB, rid string) pgx.Tx {
	t.Helper()
	ctx := context.Background()
	other, err := d.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Rollback(ctx) })
	preBatch(t, other, rid, "task", "cooldown", strp("task"), 1, freshNow.Add(30*time.Minute), "open", false)
	return other
}

// A batch another event opened but has not committed when the plain
// INSERT meets it: the INSERT waits for that event, then joins its batch
// when it commits, or opens one of its own when it rolls back. Either
// way one open batch, the answer says which, and nothing fails.
func TestFreshHintInsertMeetsAnUncommittedBatch(t *testing.T) {
	t.Parallel()
	for _, commit := range []bool{true, false} {
		t.Run(fmt.Sprint("commit=", commit), func(t *testing.T) {
			t.Parallel()
			d := hintDB(t, "ann", "ben", "cy")
			ctx := context.Background()
			other := uncommittedBatch(t, d, "ben")
			out, err, waited := dbtest.EndWhileBlocked(t, d, other, commit, func() ([]db.JoinedBatch, error) {
				return joinInTx(ctx, d, []db.BatchJoin{freshJoin("ann", freshNow, true), freshJoin("ben", freshNow, true), freshJoin("cy", freshNow, true)}, freshNow)
			})
			if strings.Contains(waited, "ON CONFLICT") || !strings.Contains(waited, "INSERT INTO batches") {
				t.Errorf("the join waited in %q, not the plain INSERT", waited)
			}
			r := struct {
				out []db.JoinedBatch
				err error
			}{out, err}
			if r.err != nil {
				t.Fatalf("join: %v", r.err)
			}
			wantBen := [2]int{1, 1}
			if commit {
				wantBen = [2]int{1, 2}
			}
			if r.out[1].Inserted == commit || r.out[1].ItemCount != wantBen[1] || !r.out[0].Inserted || !r.out[2].Inserted {
				t.Errorf("joined: %+v; want ben's batch inserted=%v with %d items", r.out, !commit, wantBen[1])
			}
			if got := openBatches(t, d); got["ben"] != wantBen || got["ann"] != [2]int{1, 1} || got["cy"] != [2]int{1, 1} {
				t.Errorf("open batches: %v", got)
			}
		})
	}
}

// An error other than a unique violation inside the savepoint (here a
// lock timeout while the INSERT waits for another event) is returned as
// it is, so callers that tell a lock timeout apart still can, and leaves
// nothing behind.
func TestFreshHintOtherErrorInTheSavepoint(t *testing.T) {
	t.Parallel()
	d := hintDB(t, "ann", "ben")
	ctx := context.Background()
	other := uncommittedBatch(t, d, "ben")
	err := d.InTxWaitingAtMost(ctx, 100*time.Millisecond, func(tx pgx.Tx) error {
		_, err := db.JoinBatches(ctx, tx, []db.BatchJoin{freshJoin("ann", freshNow, true), freshJoin("ben", freshNow, true)}, freshNow)
		return err
	})
	if !db.IsLockTimeout(err) {
		t.Fatalf("got %v, want a lock timeout", err)
	}
	if err := other.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if got := openBatches(t, d); len(got) != 0 {
		t.Errorf("open batches after a failed join: %v", got)
	}
}

// The client goes away while the plain INSERT waits for another event:
// the join ends with the request, and nothing is stored.
func TestFreshHintCanceledWhileWaiting(t *testing.T) {
	t.Parallel()
	d := hintDB(t, "ann", "ben")
	ctx := context.Background()
	other := uncommittedBatch(t, d, "ben")
	dbtest.CancelWhileBlocked(t, d, "a join", func(ctx context.Context) error {
		_, err := joinInTx(ctx, d, []db.BatchJoin{freshJoin("ann", freshNow, true), freshJoin("ben", freshNow, true)}, freshNow)
		return err
	})
	if err := other.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if got := openBatches(t, d); got["ann"] != [2]int{} || got["ben"] != [2]int{1, 1} {
		t.Errorf("open batches after a canceled join: %v; want only the other event's", got)
	}
}

// Inside a pgx nested transaction (itself a savepoint), a stale hint's
// fallback works, and rolling the nested transaction back undoes it.
func TestFreshHintInsideANestedTransaction(t *testing.T) {
	t.Parallel()
	d := hintDB(t, "ann", "ben")
	ctx := context.Background()
	preBatch(t, d.Pool, "ben", "task", "cooldown", strp("task"), 1, freshNow.Add(30*time.Minute), "open", false)
	err := d.InTx(ctx, func(tx pgx.Tx) error {
		nested, err := tx.Begin(ctx)
		if err != nil {
			return err
		}
		out, err := db.JoinBatches(ctx, nested, []db.BatchJoin{freshJoin("ann", freshNow, true), freshJoin("ben", freshNow, true)}, freshNow)
		if err != nil {
			return err
		}
		if out[1].ItemCount != 2 || out[1].Inserted {
			return fmt.Errorf("ben's join in a nested transaction: %+v", out[1])
		}
		if err := nested.Rollback(ctx); err != nil {
			return err
		}
		// The same again, committed this time: the savepoint name is free.
		for range 2 {
			if _, err := db.JoinBatches(ctx, tx, []db.BatchJoin{freshJoin("ann", freshNow, true), freshJoin("ben", freshNow, true)}, freshNow); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := openBatches(t, d); got["ann"] != [2]int{1, 2} || got["ben"] != [2]int{1, 3} {
		t.Errorf("open batches: %v; want ann 2 items, ben 3, one batch each", got)
	}
}

// A stale hint's fallback ends its savepoint: the event's later writes
// are made in its own transaction, not in a subtransaction.
func TestFreshHintFallbackReleasesItsSavepoint(t *testing.T) {
	t.Parallel()
	d := hintDB(t, "ann", "ben")
	ctx := context.Background()
	preBatch(t, d.Pool, "ben", "task", "cooldown", strp("task"), 1, freshNow.Add(30*time.Minute), "open", false)
	var topLevel bool
	err := d.InTx(ctx, func(tx pgx.Tx) error {
		if _, err := db.JoinBatches(ctx, tx, []db.BatchJoin{freshJoin("ann", freshNow, true), freshJoin("ben", freshNow, true)}, freshNow); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `WITH w AS (UPDATE recipients SET name = name || '.' WHERE id = 'ann' RETURNING xmin)
			SELECT (SELECT xmin::text FROM w) = pg_current_xact_id()::text`).Scan(&topLevel)
	})
	if err != nil {
		t.Fatal(err)
	}
	if !topLevel {
		t.Error("a write after a stale hint's fallback was made in a subtransaction: its savepoint is still open")
	}
	if got := openBatches(t, d); got["ann"] != [2]int{1, 1} || got["ben"] != [2]int{1, 2} {
		t.Errorf("open batches: %v", got)
	}
}

// Reserved ids that do not ascend in the order of the joins (MarkFresh
// never gives such, but nothing else stops them) are not used: an
// immediate and a cool-down join of one recipient and key, the later one
// holding the lower id, each get the batch of their own mode.
func TestReservedIDsOutOfOrderAreNotUsed(t *testing.T) {
	t.Parallel()
	d := hintDB(t, "new")
	ctx := context.Background()
	joins := []db.BatchJoin{hintJoin{"new", "task", "cooldown", "task", 0}.join(true), hintJoin{"new", "task", "immediate", "task", 0}.join(true)}
	if err := d.Pool.QueryRow(ctx, `SELECT nextval('batches_id_seq'), nextval('batches_id_seq')`).Scan(&joins[1].Reserved, &joins[0].Reserved); err != nil {
		t.Fatal(err)
	}
	out, err := joinInTx(ctx, d, joins, freshNow)
	if err != nil {
		t.Fatal(err)
	}
	for i, j := range joins {
		var mode string
		if err := d.Pool.QueryRow(ctx, `SELECT mode FROM batches WHERE id = $1`, out[i].ID).Scan(&mode); err != nil || mode != j.Mode || out[i].Mode != j.Mode {
			t.Errorf("the %s join went into batch %d, whose mode is %q (%v), answered as %q", j.Mode, out[i].ID, mode, err, out[i].Mode)
		}
	}
}
