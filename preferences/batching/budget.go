package batching

import (
	"slices"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/preferences"
)

// Budget is what the daily email budget says about a due batch.
type Budget struct {
	// Limit is the emails a day the batch's recipient may get; 0 is no
	// limit, and the batch is neither counted nor held.
	Limit int
	// Counted are the batch's types that count and may be held: all but
	// the required ones, in key order.
	Counted []string
	// Recipient is the batch's recipient, nil when they are gone.
	Recipient *db.Recipient
}

// BudgetOf reads the budget of a batch as read for its flush, with
// install the installation's default (LULL_DAILY_EMAIL_BUDGET). The held
// digest itself (db.Batch.Held), and a batch with only required types,
// have no limit.
func BudgetOf(fc *db.FlushContent, install int) Budget {
	var b Budget
	if fc.Batch.Held() {
		return b
	}
	var typeBudgets []*int
	for key, t := range fc.Types {
		if rs, ok := fc.Settings[key]; ok {
			b.Recipient = &rs.Recipient
		}
		if !t.Required {
			b.Counted = append(b.Counted, key)
			typeBudgets = append(typeBudgets, t.DailyBudget)
		}
	}
	if b.Recipient == nil || len(b.Counted) == 0 {
		return Budget{}
	}
	slices.Sort(b.Counted)
	b.Limit = preferences.DailyBudget(b.Recipient.DailyBudget, typeBudgets, install)
	return b
}

// Without returns fc with only the items of types not in held: what a
// batch still sends after its other items were folded into the held
// digest.
func Without(fc *db.FlushContent, held []string, left int) *db.FlushContent {
	out := *fc
	b := *fc.Batch
	b.ItemCount = left
	out.Batch = &b
	out.Items = slices.DeleteFunc(slices.Clone(fc.Items), func(it db.Item) bool { return slices.Contains(held, it.TypeKey) })
	out.Types = map[string]*db.Type{}
	for k, t := range fc.Types {
		if !slices.Contains(held, k) {
			out.Types[k] = t
		}
	}
	return &out
}
