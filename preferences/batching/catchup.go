package batching

import (
	"context"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/preferences"
)

// catchUp slows the type's notifications for recipients not seen for the
// type's catch-up period: whatever would go out sooner than weekly joins
// the recipient's weekly digest instead, and the skip log says why. Their
// next notification after they come back routes as usual again. Weekly
// and monthly are slow enough already; a required type is never slowed.
func (r *router) catchUp(ctx context.Context, tx db.Querier, policies map[string]preferences.Policy) error {
	if r.typ.CatchUpDays == nil || r.typ.Required {
		return nil
	}
	var ids []string
	for id, p := range policies {
		if preferences.SlowsDown(p.Mode) {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	absent, err := db.AbsentSince(ctx, tx, ids, preferences.AbsentCutoff(r.now, *r.typ.CatchUpDays))
	if err != nil {
		return err
	}
	for id, since := range absent {
		policies[id] = preferences.Policy{Mode: preferences.Weekly}
		r.slowed = append(r.slowed, db.Skip{RecipientID: id, TypeKey: r.typ.Key, Reason: db.SlowedReason(since)})
	}
	return nil
}

// slowedInto gives each slowed notification's skip log entry the weekly
// digest it joined (owners[i] posted the event of joined[i]): it was
// delayed, not suppressed, and a replay must not count its recipient
// twice (db.StreamSimulationEvents reads skips without a batch as
// suppressed).
func slowedInto(slowed []db.Skip, joined []db.JoinedBatch, owners []*member) []db.Skip {
	if len(slowed) == 0 {
		return nil
	}
	type key struct {
		event     int64
		recipient string
	}
	batch := make(map[key]int64, len(joined))
	for i, b := range joined {
		batch[key{owners[i].id, b.RecipientID}] = b.ID
	}
	for i := range slowed {
		id := batch[key{*slowed[i].EventID, slowed[i].RecipientID}]
		slowed[i].BatchID = &id
	}
	return slowed
}
