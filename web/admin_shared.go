package web

import (
	"fmt"
	"strconv"
	"strings"

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
