package db_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/db/dbtest"
)

// storedRecipient is a recipient's saved fields, and the transactions
// that last wrote (xmin) and locked (xmax) its row, which say whether a
// save wrote to it.
type storedRecipient struct {
	db.InlineRecipient
	xmin, xmax int64
}

func storedRecipients(t *testing.T, d *db.DB) map[string]storedRecipient {
	t.Helper()
	rows, err := d.Pool.Query(context.Background(), `SELECT id, email, name, timezone, locale, xmin::text::bigint, xmax::text::bigint FROM recipients`)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]storedRecipient{}
	var r storedRecipient
	if _, err := pgx.ForEachRow(rows, []any{&r.ID, &r.Email, &r.Name, &r.Timezone, &r.Locale, &r.xmin, &r.xmax}, func() error {
		out[r.ID] = r
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// saveInTx runs save on rs in a transaction of its own, committed.
func saveInTx(t *testing.T, d *db.DB, rs []db.InlineRecipient, save func(context.Context, pgx.Tx, []db.InlineRecipient) error) error {
	t.Helper()
	return pgx.BeginFunc(context.Background(), d.Pool, func(tx pgx.Tx) error { return save(context.Background(), tx, rs) })
}

func upsert(ctx context.Context, tx pgx.Tx, rs []db.InlineRecipient) error {
	return db.UpsertRecipients(ctx, tx, rs)
}

// audience is n recipients p0000…, each with every field given.
func audience(p string, n int) []db.InlineRecipient {
	out := make([]db.InlineRecipient, n)
	for i := range out {
		id := fmt.Sprintf("%s%04d", p, i)
		out[i] = db.InlineRecipient{ID: id, Email: id + "@example.com", Name: "Name " + id, Timezone: "Europe/Berlin", Locale: "de"}
	}
	return out
}

// A fan-out's list is saved exactly as the one-statement upsert saves it,
// whatever mix of new, unchanged, partly given and changed recipients it
// holds, and rows it would not change are neither rewritten nor locked.
func TestSaveRecipientsSavesWhatTheUpsertSaves(t *testing.T) {
	seeded := audience("r", 1500)
	cases := map[string]func([]db.InlineRecipient) []db.InlineRecipient{
		"all new": func([]db.InlineRecipient) []db.InlineRecipient {
			list := audience("n", 1200)
			slices.Reverse(list)
			list[7].Timezone, list[8].Locale = "", "" // no zone: UTC
			return list
		},
		"new and unchanged": func(old []db.InlineRecipient) []db.InlineRecipient {
			return append(audience("n", 600), old[:900]...)
		},
		"unchanged only": func(old []db.InlineRecipient) []db.InlineRecipient { return old[200:1400] },
		"new, unchanged, partly given and changed": func(old []db.InlineRecipient) []db.InlineRecipient {
			list := append(audience("n", 400), old[:1100]...)
			for i := 400; i < len(list); i += 7 {
				list[i] = db.InlineRecipient{ID: list[i].ID} // fields left out keep the stored ones
			}
			list[401].Email, list[402].Timezone, list[403].Locale, list[404].Name = "moved@example.com", "Asia/Tokyo", "ja", "Renamed"
			list[3].Timezone = "" // a new recipient without a zone gets UTC
			return list
		},
	}
	for name, listOf := range cases {
		t.Run(name, func(t *testing.T) {
			var got, before [2]map[string]storedRecipient
			for i, save := range []func(context.Context, pgx.Tx, []db.InlineRecipient) error{db.SaveRecipients, upsert} {
				d := dbtest.New(t)
				if err := saveInTx(t, d, seeded, upsert); err != nil {
					t.Fatal(err)
				}
				before[i] = storedRecipients(t, d)
				if err := saveInTx(t, d, listOf(seeded), save); err != nil {
					t.Fatalf("save: %v", err)
				}
				got[i] = storedRecipients(t, d)
			}
			if len(got[0]) != len(got[1]) {
				t.Fatalf("%d recipients stored, the upsert stores %d", len(got[0]), len(got[1]))
			}
			for id, want := range got[1] {
				if got[0][id].InlineRecipient != want.InlineRecipient {
					t.Errorf("%s: saved %+v, the upsert saves %+v", id, got[0][id].InlineRecipient, want.InlineRecipient)
				}
				if was, ok := before[0][id]; ok && was.InlineRecipient == want.InlineRecipient && (got[0][id].xmin != was.xmin || got[0][id].xmax != was.xmax) {
					t.Errorf("%s: unchanged, but its row was written to", id)
				}
			}
		})
	}
}

// A recipient another request creates after the read, while the list's
// new recipients are copied in: the COPY waits for that request, and
// when it commits the list is upserted over it instead (its given fields
// win, as if the list came second); when it rolls back the insert goes on.
func TestSaveRecipientsMeetsOneCreatedSinceTheRead(t *testing.T) {
	for _, commit := range []bool{true, false} {
		t.Run(fmt.Sprintf("commit=%v", commit), func(t *testing.T) {
			d := dbtest.New(t)
			ctx := context.Background()
			list := audience("r", 1200)
			list[500].Locale = ""
			other, err := d.Pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { other.Rollback(ctx) })
			if _, err := other.Exec(ctx, `INSERT INTO recipients (id, email, name, timezone, locale) VALUES ('r0500', 'first@example.com', 'First', 'Asia/Tokyo', 'ja')`); err != nil {
				t.Fatal(err)
			}
			_, err, waited := dbtest.EndWhileBlocked(t, d, other, commit, func() (struct{}, error) {
				return struct{}{}, saveInTx(t, d, list, db.SaveRecipients)
			})
			if err != nil {
				t.Fatalf("save: %v", err)
			}
			if !strings.HasPrefix(waited, `copy "recipients"`) {
				t.Errorf("the save waited in %q, not the COPY of new recipients", waited)
			}
			got := storedRecipients(t, d)
			if len(got) != len(list) {
				t.Fatalf("%d recipients stored, want %d", len(got), len(list))
			}
			want := list[500]
			if commit {
				want.Locale = "ja" // left out of the list, so the stored one stays
			}
			if got["r0500"].InlineRecipient != want {
				t.Errorf("r0500: %+v, want %+v", got["r0500"].InlineRecipient, want)
			}
		})
	}
}

// Two fan-outs save overlapping new audiences at once, given in opposite
// orders: both lock rows in the one order, so neither waits for the other
// in a cycle (PostgreSQL would abort one as a deadlock), and each
// recipient is stored once.
func TestSaveRecipientsRacingOverlappingAudiences(t *testing.T) {
	d := dbtest.New(t)
	for round := range 5 {
		p := fmt.Sprintf("x%d-", round)
		a, b := audience(p, 2000), audience(p, 3000)[1000:]
		for i, j := 0, len(b)-1; i < j; i, j = i+1, j-1 {
			b[i], b[j] = b[j], b[i]
		}
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i, list := range [][]db.InlineRecipient{a, b} {
			wg.Go(func() { errs[i] = saveInTx(t, d, list, db.SaveRecipients) })
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
	}
	if got := len(storedRecipients(t, d)); got != 5*3000 {
		t.Errorf("%d recipients stored, want %d", got, 5*3000)
	}
}

// SaveRecipients leaves no savepoint of its own open in the caller's
// transaction, with or without its fallback: left open, every later
// write of the event (its batches, notifications and jobs) would be made
// in a subtransaction, under an id of its own.
func TestSaveRecipientsReleasesItsSavepoint(t *testing.T) {
	for _, fallback := range []bool{false, true} {
		t.Run(fmt.Sprintf("fallback=%v", fallback), func(t *testing.T) {
			d := dbtest.New(t)
			ctx := context.Background()
			save := func() (bool, error) {
				var topLevel bool
				err := pgx.BeginFunc(ctx, d.Pool, func(tx pgx.Tx) error {
					if err := db.SaveRecipients(ctx, tx, audience("r", 1200)); err != nil {
						return err
					}
					// A row written now carries the transaction's own id
					// unless a savepoint is still open.
					return tx.QueryRow(ctx, `WITH w AS (UPDATE recipients SET name = name || '.' WHERE id = 'r0000' RETURNING xmin)
						SELECT (SELECT xmin::text FROM w) = pg_current_xact_id()::text`).Scan(&topLevel)
				})
				return topLevel, err
			}
			var topLevel bool
			var err error
			if fallback {
				// A recipient of the list created meanwhile: the INSERT
				// waits for it, meets the key and is rolled back to the
				// savepoint, and the list is upserted.
				other, berr := d.Pool.Begin(ctx)
				if berr != nil {
					t.Fatal(berr)
				}
				t.Cleanup(func() { other.Rollback(ctx) })
				if _, err := other.Exec(ctx, `INSERT INTO recipients (id) VALUES ('r0500')`); err != nil {
					t.Fatal(err)
				}
				topLevel, err, _ = dbtest.EndWhileBlocked(t, d, other, true, save)
			} else {
				topLevel, err = save()
			}
			if err != nil {
				t.Fatal(err)
			}
			if !topLevel {
				t.Error("a write after SaveRecipients was made in a subtransaction: its savepoint is still open")
			}
		})
	}
}

// SaveRecipientsFor knows the settings of a list it copied in whole as new
// (like.Of of each reads as LoadRecipientSettings reads it back, a
// recipient without a zone in UTC), and of a list stored whole that it
// changes nothing of (as read, with each one's preference for the type);
// it knows nothing of a list mixing new and stored recipients, changing
// one, or too short to read first.
func TestSaveRecipientsForKnowsNewRecipients(t *testing.T) {
	d := dbtest.New(t)
	ctx := context.Background()
	list := audience("n", 1200)
	list[3].Timezone, list[4].Locale, list[5].Name, list[6].Timezone = "", "", "", "Asia/Kolkata"
	saveFor := func(rs []db.InlineRecipient) (known db.Saved) {
		t.Helper()
		err := pgx.BeginFunc(ctx, d.Pool, func(tx pgx.Tx) (err error) {
			known, err = db.SaveRecipientsFor(ctx, tx, rs, "task")
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return known
	}
	knowsAsRead := func(known db.Saved, rs []db.InlineRecipient) {
		t.Helper()
		read, err := db.LoadRecipientSettings(ctx, d.Pool, inlineIDs(rs), "task")
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			got, ok := known.Of(r)
			if !ok || got.Recipient != read[r.ID].Recipient || (got.Pref == nil) != (read[r.ID].Pref == nil) ||
				got.Pref != nil && *got.Pref != *read[r.ID].Pref {
				t.Fatalf("%s: known as %+v (%v), read back as %+v", r.ID, got, ok, read[r.ID])
			}
		}
	}
	known := saveFor(list)
	if known.Like == nil {
		t.Fatal("a list copied in whole as new: no settings known")
	}
	knowsAsRead(known, list)
	if err := db.SaveType(ctx, d.Pool, &db.Type{Key: "task", Name: "Task", DefaultMode: "cooldown", WindowMS: 60_000, DisplayLimit: 10, ItemOrder: "latest", ItemText: "{{actor.name}}", GroupText: "{{count}} tasks"}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Pool.Exec(ctx, `INSERT INTO type_preferences (recipient_id, type_key, mode) VALUES ($1, 'task', 'never')`, list[9].ID); err != nil {
		t.Fatal(err)
	}
	again := slices.Clone(list)
	again[10].Email = "" // given empty, it changes nothing
	known = saveFor(again)
	if known.Read == nil {
		t.Fatal("a list stored whole and unchanged: no settings known")
	}
	knowsAsRead(known, again)
	changed := slices.Clone(list)
	changed[11].Name = "Someone else"
	if known := saveFor(changed); known.Read != nil || known.Like != nil {
		t.Error("a list changing a stored recipient: settings known")
	}
	if known := saveFor(append(audience("m", 1200), list[0])); known.Like != nil || known.Read != nil {
		t.Error("a list with a stored recipient: settings known")
	}
	if known := saveFor(audience("s", 999)); known.Like != nil || known.Read != nil {
		t.Error("a list too short to read first: settings known")
	}
	// A stored recipient the sample looked up before copying misses (the
	// second of the list): the copy meets it and is undone, and the list
	// is saved as any other, the stored recipient's fields kept.
	missed := slices.Insert(audience("p", 1200), 1, db.InlineRecipient{ID: list[5].ID, Locale: "fr"})
	if known := saveFor(missed); known.Like != nil || known.Read != nil {
		t.Error("a list with a stored recipient the sample missed: settings known")
	}
	var saved int
	var name, locale string
	if err := d.Pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM recipients WHERE id LIKE 'p%'), name, locale FROM recipients WHERE id = $1`, list[5].ID).Scan(&saved, &name, &locale); err != nil {
		t.Fatal(err)
	}
	if saved != 1200 || name != "" || locale != "fr" {
		t.Errorf("after a copy undone: %d of 1200 new recipients saved, the stored one named %q in %q; want 1200, \"\" and \"fr\"", saved, name, locale)
	}
}

func inlineIDs(rs []db.InlineRecipient) []string {
	ids := make([]string, len(rs))
	for i, r := range rs {
		ids[i] = r.ID
	}
	return ids
}
