package mailtemplates

import (
	"fmt"
	"strings"
	"time"
)

// Sample data reads like a real team's week, so an operator previewing a
// type judges its texts on what recipients will actually see: several
// people, names from more than one culture, titles of different lengths.
var (
	sampleActors = []string{"Alice", "Bob", "Chen Wei", "Fatima", "Jonas", "Priya", "Mateo", "Aiko"}
	sampleTitles = []string{"Q3 plan", "Budget tracker", "Onboarding guide", "Release notes 2.4", "Customer interviews — March", "Hiring pipeline"}
	sampleLines  = []string{
		"Looks good, one question on the numbers in section 2.",
		"Can we move the review to Thursday?",
		"I added the figures from last quarter.",
		"Approved.",
		"Left a few suggestions inline.",
	}
)

// Sample makes a realistic group of n notifications of type t, for
// previewing a type's texts before any event of it exists. It follows the
// type's display limit and item order exactly as a stored batch would, and
// the newest event happens a few minutes before now, so times read
// naturally in any zone.
func Sample(t Type, n int, now time.Time) Group {
	n = max(n, 1)
	if now.IsZero() {
		now = time.Date(2026, 11, 23, 8, 0, 0, 0, time.UTC)
	}
	g := Group{Type: t, Total: n}
	seen := map[string]bool{}
	// Event 0 is the newest; 5 and 8 are coprime, so every actor appears
	// and the same one is never twice in a row.
	event := func(i int) Item {
		a := sampleActors[(i*5)%len(sampleActors)]
		doc := i%len(sampleTitles) + 1
		return Item{
			Actor: Actor{ID: "u_" + strings.ToLower(strings.ReplaceAll(a, " ", "_")), Name: a},
			Object: Object{Type: "document", ID: fmt.Sprintf("doc_%d", doc), Title: sampleTitles[doc-1],
				URL: fmt.Sprintf("https://app.example/documents/%d", doc)},
			Data: map[string]any{
				"excerpt": sampleLines[i%len(sampleLines)],
				"status":  "failed",
				"error":   "exit status 1",
				"count":   float64(i%4 + 2),
			},
			OccurredAt: now.Add(-time.Duration(3+i*17) * time.Minute),
		}
	}
	for i := range n {
		a := sampleActors[(i*5)%len(sampleActors)]
		if seen[a] {
			continue
		}
		seen[a] = true
		if len(g.ActorNames) < 3 {
			g.ActorNames = append(g.ActorNames, a)
		}
	}
	g.ActorCount = len(seen)
	shown := n
	if t.DisplayLimit > 0 {
		shown = min(n, t.DisplayLimit)
	}
	for k := range shown {
		i := k // latest first
		if t.ItemOrder == "first" {
			i = n - 1 - k
		}
		g.Items = append(g.Items, event(i))
	}
	return g
}
