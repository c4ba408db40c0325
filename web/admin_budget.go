package web

import (
	"context"
	"strconv"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/preferences"
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
