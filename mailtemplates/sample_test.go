package mailtemplates

import (
	"strings"
	"testing"
)

func TestSampleFollowsTheType(t *testing.T) {
	t.Parallel()
	latest := commentType() // display limit 5, latest first
	g := Sample(latest, 12, sent)
	if g.Total != 12 || len(g.Items) != 5 {
		t.Fatalf("sample of 12 with limit 5: total %d, %d items", g.Total, len(g.Items))
	}
	if !g.Items[0].OccurredAt.After(g.Items[4].OccurredAt) {
		t.Error("latest order does not put the newest first")
	}
	if g.ActorCount != 8 || strings.Join(g.ActorNames, ",") != "Alice,Priya,Chen Wei" {
		t.Errorf("actors %v of %d", g.ActorNames, g.ActorCount)
	}
	for _, it := range g.Items {
		if !strings.HasPrefix(it.Object.URL, "https://app.example/") || it.Object.Title == "" || it.Actor.Name == "" {
			t.Errorf("unrealistic sample item %+v", it)
		}
	}

	first := latest
	first.ItemOrder = "first"
	if g := Sample(first, 12, sent); g.Items[0].OccurredAt.After(g.Items[1].OccurredAt) {
		t.Error("first order does not put the oldest first")
	}
	if g := Sample(Type{}, 0, sent); g.Total != 1 || len(g.Items) != 1 {
		t.Errorf("a sample of 0 gives %d items of %d; a preview needs one", len(g.Items), g.Total)
	}
}

func TestSampleRendersEveryLayout(t *testing.T) {
	t.Parallel()
	typ := commentType()
	for _, c := range []struct {
		mode string
		n    int
		want string
	}{
		{"immediate", 1, "Alice: Looks good, one question on the numbers in section 2."},
		{"cooldown", 12, "Alice, Priya and 6 others left 12 comments on Q3 plan"},
		{"daily", 12, "Your daily digest: 12 updates — Alice, Priya and 6 others left 12 comments on Q3 plan"},
	} {
		m, doc := render(t, input(c.mode, Sample(typ, c.n, sent)))
		if m.Subject != c.want {
			t.Errorf("%s sample subject %q, want %q", c.mode, m.Subject, c.want)
		}
		if doc.Find(`[data-testid="settings-link"]`).Length() != 1 {
			t.Errorf("%s sample lacks the settings link", c.mode)
		}
	}
}
