package web

import (
	"context"
	"fmt"
	"strconv"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/preferences"
	"github.com/lull-dev/lull/preferences/batching"
	"github.com/lull-dev/lull/views"
)

// foldedLinks fills in where the daily email budget moved a batch's
// notifications: the held digest it was folded into, or, for a held
// digest, the batches folded into it (the first hundred).
func (s *Server) foldedLinks(ctx context.Context, v *views.BatchDetailView, b *db.Batch) error {
	if b.FoldedInto != nil {
		v.FoldedInto = strconv.FormatInt(*b.FoldedInto, 10)
	}
	if b.BatchKey != preferences.HeldKey {
		return nil
	}
	ids, err := db.FoldedFrom(ctx, s.DB.Pool, b.ID, 100)
	for _, id := range ids {
		v.FoldedFrom = append(v.FoldedFrom, strconv.FormatInt(id, 10))
	}
	return err
}

// budgetNote warns, in the preview of an open batch, that a flush now
// would not send the email shown: its recipient has had their emails of
// the day, so the items that are not required would fold into the held
// digest. The count is read without the flush's lock.
func (s *Server) budgetNote(ctx context.Context, fc *db.FlushContent) (string, error) {
	bud := batching.BudgetOf(fc, s.DailyBudget)
	if bud.Limit == 0 {
		return "", nil
	}
	day := preferences.BudgetDay(s.now(), batching.Schedule(bud.Recipient))
	spent, err := db.BudgetSpent(ctx, s.DB.Pool, fc.Batch.RecipientID, day, fc.Batch.ID)
	if err != nil || spent < bud.Limit {
		return "", err
	}
	return fmt.Sprintf("Flushed now, this would be held: the recipient has had %d of their %d emails today, "+
		"so what is not of a required type would wait for the held digest at their next daily digest time.", spent, bud.Limit), nil
}
