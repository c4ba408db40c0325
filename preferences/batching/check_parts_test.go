package batching

import (
	"fmt"
	"testing"
	"time"
)

// A list long enough to be checked in parts, one a core, is checked as a
// short one is: every error found, named in the list's order, whichever
// part found it; every locale put in canonical form; repeats merged.
func TestLongRecipientListsAreCheckedWhole(t *testing.T) {
	n := 3 * checkInPartsFrom
	ev := &Event{Type: "t"}
	for i := range n {
		ev.Recipients = append(ev.Recipients, RecipientRef{ID: fmt.Sprintf("r%d", i), Email: fmt.Sprintf("r%d@example.com", i),
			Locale: "pt-br", Inline: true})
	}
	bad := []int{0, 7, n/2 - 1, n / 2, n/2 + 1, n - 1}
	for _, i := range bad {
		ev.Recipients[i].Timezone = "Mars/Base"
	}
	ev.Recipients = append(ev.Recipients, RecipientRef{ID: "r3", Name: "Again", Inline: true})
	err := ev.Check(time.Now(), 1<<20)
	v, ok := err.(*ValidationError)
	if !ok || len(v.Errors) != len(bad) {
		t.Fatalf("got %v; want %d errors", err, len(bad))
	}
	for k, i := range bad {
		if want := fmt.Sprintf("recipients[%d].timezone", i); v.Errors[k].Field != want {
			t.Errorf("error %d names %s, want %s", k, v.Errors[k].Field, want)
		}
	}
	if len(ev.Recipients) != n {
		t.Fatalf("%d recipients after merging, want %d", len(ev.Recipients), n)
	}
	for i, r := range ev.Recipients {
		if r.Locale != "pt-BR" {
			t.Fatalf("recipient %d: locale %q, want pt-BR", i, r.Locale)
		}
	}
	if r := ev.Recipients[3]; r.Name != "Again" || r.Email != "r3@example.com" {
		t.Errorf("r3 merged into %+v", r)
	}
}
