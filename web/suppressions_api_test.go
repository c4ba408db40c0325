package web_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/lull-dev/lull/client"
)

func TestAPISuppressionsAddListRemove(t *testing.T) {
	t.Parallel()
	a := setupAPI(t)
	out := a.mustCall(t, "POST", "/api/v1/suppressions", `{"address": "Bob@Example.com", "detail": "asked by phone"}`, http.StatusCreated)
	if out["address"] != "bob@example.com" || out["reason"] != "operator" || out["scope"] != "all" {
		t.Fatalf("created %v", out)
	}
	a.mustCall(t, "POST", "/api/v1/suppressions", `{"address": "bob@example.com", "reason": "hard_bounce"}`, http.StatusOK)
	a.mustCall(t, "POST", "/api/v1/suppressions", `{"address": "bo_b@example.com"}`, http.StatusCreated)
	a.mustCall(t, "POST", "/api/v1/suppressions", `{"address": "carol@example.com"}`, http.StatusCreated)

	list := func(query string) []string {
		out := a.mustCall(t, "GET", "/api/v1/suppressions?"+query, "", http.StatusOK)
		var got []string
		for _, s := range out["suppressions"].([]any) {
			got = append(got, s.(map[string]any)["address"].(string))
		}
		return got
	}
	if got := list("prefix=BO"); len(got) != 2 {
		t.Fatalf("prefix BO lists %v, want bob and bo_b", got)
	}
	// A prefix is text, not a pattern: _ matches only itself.
	if got := list("prefix=" + url.QueryEscape("bo_")); len(got) != 1 || got[0] != "bo_b@example.com" {
		t.Fatalf("prefix bo_ lists %v", got)
	}
	page := a.mustCall(t, "GET", "/api/v1/suppressions?limit=2", "", http.StatusOK)
	next, _ := page["next_cursor"].(string)
	if rest := list("limit=2&cursor=" + url.QueryEscape(next)); len(rest) != 1 || rest[0] != "carol@example.com" {
		t.Fatalf("second page %v after %q", rest, next)
	}

	gone := a.mustCall(t, "DELETE", "/api/v1/suppressions/BOB@example.com", "", http.StatusOK)
	if gone["reason"] != "hard_bounce" {
		t.Fatalf("removed %v", gone)
	}
	a.mustCall(t, "DELETE", "/api/v1/suppressions/bob@example.com", "", http.StatusNotFound)
}

func TestAPISuppressionComplaintUnsubscribesKeepingTheWiderScope(t *testing.T) {
	t.Parallel()
	a := setupAPI(t)
	a.mustCall(t, "PUT", "/api/v1/recipients/u_bob", `{"email": "bob@example.com"}`, http.StatusOK)
	out := a.mustCall(t, "POST", "/api/v1/suppressions", `{"address": "bob@example.com", "reason": "complaint"}`, http.StatusCreated)
	if out["scope"] != "non_required" {
		t.Fatalf("complaint scope %v, want non_required", out["scope"])
	}
	if n := countRows(t, a.db, "SELECT count(*) FROM recipients WHERE id = 'u_bob' AND unsubscribed"); n != 1 {
		t.Fatal("a complaint left the recipient subscribed")
	}
	a.mustCall(t, "POST", "/api/v1/suppressions", `{"address": "bob@example.com", "reason": "hard_bounce"}`, http.StatusOK)
	out = a.mustCall(t, "POST", "/api/v1/suppressions", `{"address": "bob@example.com", "reason": "complaint"}`, http.StatusOK)
	if out["scope"] != "all" || out["reason"] != "hard_bounce" {
		t.Fatalf("a complaint after a hard bounce narrowed the entry to %v", out)
	}
}

func TestAPISuppressionBadInputNamesTheField(t *testing.T) {
	t.Parallel()
	a := setupAPI(t)
	for body, field := range map[string]string{
		`{}`:                                   "address",
		`{"address": ""}`:                      "address",
		`{"address": "not an address"}`:        "address",
		`{"address": "a@b.example\r\nBcc: x"}`: "address",
		`{"address": "` + strings.Repeat("a", 300) + `@example.com"}`:                 "address",
		`{"address": "a@example.com", "reason": "spite"}`:                             "reason",
		`{"address": "a@example.com", "scope": "some"}`:                               "scope",
		`{"address": "a@example.com", "detail": "` + strings.Repeat("é", 1001) + `"}`: "detail",
	} {
		got, p := a.call(t, "POST", "/api/v1/suppressions", body)
		if got != http.StatusUnprocessableEntity || fieldOf(p) != field {
			t.Errorf("%.60s: %d naming %q, want 422 naming %q", body, got, fieldOf(p), field)
		}
	}
	for body, field := range map[string]string{`{"address": 5}`: "address", `{"address": "a@example.com", "extra": 1}`: "extra"} {
		if got, p := a.call(t, "POST", "/api/v1/suppressions", body); got != http.StatusUnprocessableEntity || fieldOf(p) != field {
			t.Errorf("%s: %d naming %q, want 422 naming %q", body, got, fieldOf(p), field)
		}
	}
	if got, _ := a.call(t, "POST", "/api/v1/suppressions", `{"address": "a@exa`); got != http.StatusBadRequest {
		t.Errorf("a cut-off body: %d, want 400", got)
	}
	for query, field := range map[string]string{"limit=0": "limit", "limit=x": "limit", "limit=501": "limit", "prefix=" + strings.Repeat("a", 321): "prefix"} {
		if got, p := a.call(t, "GET", "/api/v1/suppressions?"+query, ""); got != http.StatusUnprocessableEntity || fieldOf(p) != field {
			t.Errorf("%.30s: %d naming %q, want 422 naming %q", query, got, fieldOf(p), field)
		}
	}
	if n := countRows(t, a.db, "SELECT count(*) FROM suppressions"); n != 0 {
		t.Fatalf("bad requests suppressed %d addresses", n)
	}
}

// TestAPIConcurrentSuppressAndUnsuppress: adding and removing one
// address at once answers each call as if it ran alone, never an error,
// and the list ends as the answers say.
func TestAPIConcurrentSuppressAndUnsuppress(t *testing.T) {
	t.Parallel()
	a := setupAPI(t)
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Go(func() {
			if i%2 == 0 {
				if got, p := a.call(t, "POST", "/api/v1/suppressions", `{"address": "Bob@example.com"}`); got != http.StatusCreated && got != http.StatusOK {
					t.Errorf("POST: %d %v", got, p)
				}
				return
			}
			if got, p := a.call(t, "DELETE", "/api/v1/suppressions/bob@example.com", ""); got != http.StatusOK && got != http.StatusNotFound {
				t.Errorf("DELETE: %d %v", got, p)
			}
		})
	}
	wg.Wait()
	listed := len(a.mustCall(t, "GET", "/api/v1/suppressions", "", http.StatusOK)["suppressions"].([]any))
	got, _ := a.call(t, "DELETE", "/api/v1/suppressions/bob@example.com", "")
	if (listed == 1) != (got == http.StatusOK) || listed > 1 {
		t.Fatalf("list shows %d entries, DELETE answers %d", listed, got)
	}
}

func TestClientSuppressions(t *testing.T) {
	t.Parallel()
	a := setupAPI(t)
	ctx := context.Background()
	c := client.New(a.srv.URL, testKey, client.WithHTTPClient(a.http))
	added, err := c.Suppress(ctx, client.SuppressionRequest{Address: "Bob@example.com", Reason: "complaint"})
	if err != nil || added.Scope != "non_required" {
		t.Fatalf("suppress: %+v, %v", added, err)
	}
	list, err := c.ListSuppressions(ctx, client.SuppressionQuery{Prefix: "bob", Limit: 10})
	if err != nil || len(list.Suppressions) != 1 || list.NextCursor != "" {
		t.Fatalf("list: %+v, %v", list, err)
	}
	if gone, err := c.Unsuppress(ctx, "bob@example.com"); err != nil || gone.Reason != "complaint" {
		t.Fatalf("unsuppress: %+v, %v", gone, err)
	}
	var problem *client.Error
	if _, err := c.Suppress(ctx, client.SuppressionRequest{Address: "nope"}); !errors.As(err, &problem) || problem.Errors[0].Field != "address" {
		t.Fatalf("bad address: %v, want a 422 naming address", err)
	}
}
