package web

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/views"
)

// sharedStat says, on a batch's page, which batches went out with it in
// one shared email (jobs/shared.go); nil when it went out alone.
func sharedStat(together []int64) *views.Stat {
	if len(together) < 2 {
		return nil
	}
	ids := make([]string, 0, 20)
	for _, b := range together[:min(len(together), 20)] {
		ids = append(ids, "#"+strconv.FormatInt(b, 10))
	}
	note := "batches " + strings.Join(ids, ", ")
	if len(together) > 20 {
		note += fmt.Sprintf(" and %d more", len(together)-20)
	}
	return &views.Stat{Label: "Sent together", Value: fmt.Sprintf("one shared email to %d recipients", len(together)), Note: note}
}

// leftOutStat says, on a shared email's batch page, which members of its
// type and key it left out and why, from their skip log.
func leftOutStat(skips []db.SkipEntry) *views.Stat {
	if len(skips) == 0 {
		return nil
	}
	var who []string
	for _, sk := range skips[:min(len(skips), 20)] {
		who = append(who, fmt.Sprintf("%s (%s, batch #%d)", sk.RecipientID, sk.Reason, *sk.BatchID))
	}
	note := strings.Join(who, ", ")
	if len(skips) > 20 {
		note += fmt.Sprintf(" and %d more", len(skips)-20)
	}
	return &views.Stat{Label: "Left out", Value: fmt.Sprintf("%d skipped", len(skips)), Note: note}
}

// markSharedRows notes on the batch browser's rows which batches went out
// in a shared email, and with how many others.
func markSharedRows(ctx context.Context, q db.Querier, bs []*db.Batch, rows []views.BatchRow) error {
	ids := make([]int64, len(bs))
	for i, b := range bs {
		ids[i] = b.ID
	}
	counts, err := db.SharedCounts(ctx, q, ids)
	if err != nil {
		return err
	}
	for i, b := range bs {
		if n := counts[b.ID]; n > 1 {
			rows[i].Shared = fmt.Sprintf("shared ×%d", n)
		}
	}
	return nil
}
