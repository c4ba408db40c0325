package web_test

import (
	"fmt"
	"net/url"
	"testing"

	"github.com/lull-dev/lull/mailtemplates"
)

// TestTypeChangeAppliesToTheNextEvent: events read their type from a
// memo that lull keeps for a second (db.Memo), and a type saved through
// this process, by the API or by the console, is forgotten there at once:
// the very next event follows the new mode.
func TestTypeChangeAppliesToTheNextEvent(t *testing.T) {
	t.Parallel()
	a := brandSetup(t)
	n := 0
	post := func() map[string]any {
		n++
		return a.mustCall(t, "POST", "/api/v1/events", fmt.Sprintf(`{"type":"comment","actor":{"id":"a"},
			"recipients":[{"id":"r%d","email":"r%d@example.com"}]}`, n, n), 202)
	}
	a.mustCall(t, "PUT", "/api/v1/types/comment", `{"name":"Comments","default_mode":"cooldown","window":"1h"}`, 200)
	if got := post(); got["notifications"] != 1.0 || got["suppressed"] != 0.0 {
		t.Fatalf("cool-down type: %v", got)
	}
	a.mustCall(t, "PUT", "/api/v1/types/comment", `{"name":"Comments","default_mode":"never"}`, 200)
	if got := post(); got["suppressed"] != 1.0 {
		t.Fatalf("right after the API set the type to never: %v, want the notification suppressed", got)
	}
	postForm(t, operatorClient(t, a), a.srv.URL+"/admin/types/comment/edit", url.Values{"name": {"Comments"}, "default_mode": {"cooldown"},
		"window": {"1h"}, "max_wait": {"0"}, "max_items": {"0"}, "display_limit": {"10"}, "item_order": {"latest"},
		"item_text": {mailtemplates.DefaultItemText()}, "group_text": {mailtemplates.DefaultGroupText("Comments")}, "do": {"save"}})
	if got := post(); got["notifications"] != 1.0 || got["suppressed"] != 0.0 {
		t.Fatalf("right after the console set the type to cool-down: %v", got)
	}
}
