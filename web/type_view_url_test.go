package web_test

import (
	"context"
	"encoding/json"
	"net/url"
	"testing"

	"github.com/lull-dev/lull/db"
)

// TestTypeViewURL: a type's view_url is validated when it is saved, like
// its other texts, named in the problem; it is stored and shown; and the
// console's type form, which does not edit it, keeps it.
func TestTypeViewURL(t *testing.T) {
	t.Parallel()
	a, _ := consoleSetup(t)
	for _, bad := range []string{`javascript:alert(1)`, `https://app.example{{object.id}}`, `https://app.example/{{actor.nam}}`} {
		q, _ := json.Marshal(bad)
		body := `{"name":"Comments","view_url":` + string(q) + `}`
		if got, p := a.call(t, "PUT", "/api/v1/types/comment", body); got != 422 || fieldOf(p) != "view_url" {
			t.Errorf("view_url %q: %d, field %q", bad, got, fieldOf(p))
		}
	}
	const good = "https://app.example/docs/{{object.id}}/comments"
	out := a.mustCall(t, "PUT", "/api/v1/types/comment", `{"name":"Comments","view_url":"`+good+`"}`, 200)
	if out["view_url"] != good {
		t.Fatalf("saved view_url %v", out["view_url"])
	}
	if got := a.mustCall(t, "GET", "/api/v1/types/comment", "", 200)["view_url"]; got != good {
		t.Fatalf("GET view_url %v", got)
	}
	c := operatorClient(t, a)
	postForm(t, c, a.srv.URL+"/admin/types/comment/edit", url.Values{"name": {"Comments"}, "default_mode": {"daily"}, "window": {"5m"},
		"max_wait": {"1h"}, "max_items": {"0"}, "display_limit": {"5"}, "item_order": {"latest"}, "do": {"save"}})
	typ, err := db.GetType(context.Background(), a.db.Pool, "comment")
	if err != nil || typ.ViewURL != good || typ.DefaultMode != "daily" {
		t.Fatalf("after a console save: %+v (%v)", typ, err)
	}
}
