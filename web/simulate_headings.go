package web

import (
	"fmt"
	"time"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/i18n"
	"github.com/lull-dev/lull/mailtemplates"
	"github.com/lull-dev/lull/preferences/batching"
	"github.com/lull-dev/lull/preferences/simulate"
	"github.com/lull-dev/lull/views"
)

// typeHeadings notes beside each type of a simulation's results its name
// as recipients read it in lang, and the heading of a typical email of the
// type under the current settings (its mean notifications per email), in
// the words the email and the feed use: what batching makes a reader see.
func typeHeadings(out *views.SimulationResult, rep *simulate.Report, types []db.Type, lang i18n.Locale, now time.Time) {
	byKey := make(map[string]*db.Type, len(types))
	for i := range types {
		byKey[types[i].Key] = &types[i]
	}
	typical := map[string]int{}
	for _, r := range rep.Results {
		if r.Kind != simulate.KindPolicy {
			continue
		}
		for _, tm := range r.Types {
			if tm.Emails > 0 {
				typical[tm.Type] = max(1, (tm.Notifications+tm.Emails/2)/tm.Emails)
			}
		}
		break // the first policy is the current settings
	}
	for i := range out.Types {
		t, ok := byKey[out.Types[i].Label]
		if !ok {
			continue // an uploaded event's type that is not registered
		}
		mt := batching.TemplateTypeIn(t, lang.TextChain())
		note := mt.Name
		if n := typical[t.Key]; n > 0 {
			heading := mailtemplates.HeadingIn(mailtemplates.Sample(mt, n, now), time.UTC, lang)
			note = fmt.Sprintf("%s. A typical email (%d notifications): %s", mt.Name, n, heading)
		}
		out.Types[i].Note = note
	}
}
