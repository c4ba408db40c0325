package db_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/lull-dev/lull/db"
)

// A fan-out reads its recipients' settings 10,000 ids at a time. Planned
// for such a list, PostgreSQL read every recipient instead of looking
// each up: the settings read must find them through the primary key
// however it is planned, for the list given or for any list.
func TestRecipientSettingsLookUpEachIDHoweverTheListIsPlanned(t *testing.T) {
	t.Parallel()
	d := freshDB(t)
	ctx := context.Background()
	exec := execer(t, d)
	exec(`INSERT INTO recipients (id, email) SELECT 'r' || i, 'r' || i || '@example.com' FROM generate_series(1, 50000) AS i`)
	exec(`INSERT INTO type_preferences (recipient_id, type_key, mode) SELECT 'r' || i, 'post', 'never' FROM generate_series(1, 50000, 7) AS i`)
	exec(`ANALYZE recipients, type_preferences`)
	ids := make([]string, 10000)
	for i := range ids {
		ids[i] = fmt.Sprint("r", 1+i*5)
	}
	for _, custom := range []bool{true, false} {
		err := d.InTx(ctx, func(tx pgx.Tx) error {
			q := newExplaining(t, tx)
			q.custom = custom
			got, err := db.LoadRecipientSettings(ctx, q, ids, "post")
			if err != nil || len(got) != len(ids) {
				t.Fatalf("read %d of %d recipients (%v)", len(got), len(ids), err)
			}
			if s := got["r36"]; s.Pref == nil || s.Pref.Mode != "never" {
				t.Errorf("r36's preference %+v, want never", s.Pref)
			}
			for _, plan := range q.plans {
				if scansWhole(t, plan, "recipients") {
					t.Errorf("planned for its list (%v), the settings read scans every recipient:\n%s", custom, plan)
				}
			}
			return errRollback
		})
		if err != errRollback {
			t.Fatal(err)
		}
	}
}

// scansWhole tells whether a JSON plan reads table row by row.
func scansWhole(t *testing.T, plan, table string) bool {
	var root []struct{ Plan map[string]any }
	if err := json.Unmarshal([]byte(plan), &root); err != nil {
		t.Fatal(err)
	}
	var walk func(n map[string]any) bool
	walk = func(n map[string]any) bool {
		if n["Relation Name"] == table && strings.HasSuffix(fmt.Sprint(n["Node Type"]), "Seq Scan") {
			return true
		}
		children, _ := n["Plans"].([]any)
		for _, c := range children {
			if walk(c.(map[string]any)) {
				return true
			}
		}
		return false
	}
	return walk(root[0].Plan)
}
