package web_test

import (
	"net/url"
	"testing"

	"github.com/lull-dev/lull/mailtemplates"
)

// TestConsoleRenameKeepsTheDefaultHeading: the console's type form shows
// the default group_text built from the type's name; saved with a new
// name and that text untouched, the default follows the new name (as an
// API save does), so emails neither keep the old name nor lose the
// heading written in the recipient's language.
func TestConsoleRenameKeepsTheDefaultHeading(t *testing.T) {
	t.Parallel()
	a := brandSetup(t)
	a.mustCall(t, "PUT", "/api/v1/types/comment", `{"name":"Comments"}`, 200)
	postForm(t, operatorClient(t, a), a.srv.URL+"/admin/types/comment/edit", url.Values{"name": {"Remarks"}, "default_mode": {"immediate"},
		"window": {"5m"}, "max_wait": {"1h"}, "max_items": {"0"}, "display_limit": {"10"}, "item_order": {"latest"},
		"item_text": {mailtemplates.DefaultItemText()}, "group_text": {mailtemplates.DefaultGroupText("Comments")}, "do": {"save"}})
	if got := a.mustCall(t, "GET", "/api/v1/types/comment", "", 200)["group_text"]; got != mailtemplates.DefaultGroupText("Remarks") {
		t.Errorf("after renaming in the console: group_text %q", got)
	}
}
