package simulate

import (
	"time"

	"github.com/lull-dev/lull/preferences"
)

// The daily email budget, as the flush applies it (jobs/budget.go): a
// batch that closes when its recipient has had their emails of the day
// folds the items of its types that are not required into the held
// digest, which goes out at the next day's digest time and counts as that
// day's first email. Here a batch flushes at its close time, as the flush
// jobs do when they keep up.

// daySpent counts the emails of one local day.
type daySpent struct {
	day int64 // preferences.BudgetDay, Unix seconds
	n   int
}

func (st *recState) spentOn(day int64) int {
	for _, d := range st.spent {
		if d.day == day {
			return d.n
		}
	}
	return 0
}

func (st *recState) spend(day int64) {
	for i := range st.spent {
		if st.spent[i].day == day {
			st.spent[i].n++
			return
		}
	}
	st.spent = append(st.spent, daySpent{day: day, n: 1})
}

// forgetSpent drops the days that are over everywhere on earth by now.
func (st *recState) forgetSpent(now int64) {
	past := time.Unix(0, now).Add(-72 * time.Hour).Unix()
	keep := st.spent[:0]
	for _, d := range st.spent {
		if d.day >= past {
			keep = append(keep, d)
		}
	}
	st.spent = keep
}

// parts lists a batch's shares, first one first.
func (b *batch) parts() []part {
	if !b.hasPart {
		return nil
	}
	return append([]part{b.first}, b.more...)
}

// setParts replaces a batch's shares.
func (b *batch) setParts(ps []part) {
	b.hasPart = len(ps) > 0
	b.more = b.more[:0]
	if b.hasPart {
		b.first = ps[0]
		b.more = append(b.more, ps[1:]...)
	}
}

// addShare adds a share of another batch, merged with the type's own.
func (b *batch) addShare(p part) {
	ps := b.parts()
	for i := range ps {
		if ps[i].typ == p.typ {
			ps[i].items += p.items
			ps[i].first = min(ps[i].first, p.first)
			b.setParts(ps)
			return
		}
	}
	b.setParts(append(ps, p))
}

// spendBudget applies the budget to b as it closes and reports whether b
// still sends: within the budget it is counted (if it can be sent at all),
// over it the shares of its types that are not required move to the held
// digest, and b sends only what is left.
func (rn *run) spendBudget(b *batch) bool {
	st := &rn.recs[b.rec]
	if b.held {
		if st.held == b {
			st.held = nil
		}
		return true
	}
	if rn.budget == 0 && b.rc.Budget == nil && !rn.typeBudgets {
		return true // no budget anywhere: spare the hot path the work
	}
	var counted, kept []part
	var budgets []*int
	for _, p := range b.parts() {
		t := &rn.types[p.typ]
		if t.defaults.Required {
			kept = append(kept, p)
			continue
		}
		counted = append(counted, p)
		budgets = append(budgets, t.budget)
	}
	if len(counted) == 0 {
		return true
	}
	limit := preferences.DailyBudget(b.rc.Budget, budgets, rn.budget)
	if limit == 0 {
		return true
	}
	sched := rn.schedule(b.rc)
	at := tm(b.closes)
	day := preferences.BudgetDay(at, sched).Unix()
	if st.spentOn(day) < limit {
		if b.rc.HasEmail {
			st.spend(day) // a batch canceled at flush counts nothing
		}
		return true
	}
	h := st.held
	if h == nil {
		closes := preferences.HeldCloses(at, sched)
		h = rn.newBatch()
		h.policy, h.rc, h.keyName, h.rec, h.key = preferences.Policy{Mode: preferences.Daily}, b.rc, preferences.HeldKey, b.rec, -1
		h.opened, h.last, h.closes, h.held = b.closes, b.closes, closes.UnixNano(), true
		st.held = h
		st.spend(preferences.BudgetDay(closes, sched).Unix())
		rn.queue.push(h, h.closes)
	}
	for _, p := range counted {
		h.addShare(p)
		h.items += p.items
		b.items -= p.items
		rn.tally.types[p.typ].held += int(p.items)
	}
	b.setParts(kept)
	return len(kept) > 0
}
