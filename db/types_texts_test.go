package db

import "testing"

func TestTextsInFallsBackAlongTheChain(t *testing.T) {
	ty := &Type{Name: "Comments", ItemText: "{{actor.name}} commented", GroupText: "{{count}} comments",
		Texts: map[string]TypeTexts{
			"de":    {Name: "Kommentare", ItemText: "{{actor.name}} hat kommentiert", GroupText: "{{count}} Kommentare"},
			"de-AT": {ItemText: "{{actor.name}} hat kommentiert (AT)"},
		}}
	got := ty.TextsIn([]string{"de-AT", "de"})
	want := TypeTexts{Name: "Kommentare", ItemText: "{{actor.name}} hat kommentiert (AT)", GroupText: "{{count}} Kommentare"}
	if got != want {
		t.Fatalf("de-AT: %+v, want %+v", got, want)
	}
	if got := ty.TextsIn([]string{"fr"}); got.Name != "Comments" || got.ItemText != ty.ItemText {
		t.Fatalf("fr falls back to the type's own texts: %+v", got)
	}
}
