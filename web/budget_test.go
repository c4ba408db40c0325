package web_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestBudgetInPreferencesAPI: the budget is set, kept by a PUT that
// leaves it out, cleared to the default by null, and refused with the
// field named when it is negative, huge or not a whole number.
func TestBudgetInPreferencesAPI(t *testing.T) {
	t.Parallel()
	a := setupAPI(t)
	setupPrefTypes(t, a)
	const prefs = "/api/v1/recipients/u_bob/preferences"
	a.mustCall(t, "PUT", "/api/v1/recipients/u_bob", `{"email":"bob@example.com"}`, 200)
	if got := a.mustCall(t, "GET", prefs, "", 200); got["budget"] != nil {
		t.Fatalf("a new recipient's budget is %v, want null (the default)", got["budget"])
	}
	if got := a.mustCall(t, "PUT", prefs, `{"budget":3}`, 200); got["budget"] != 3.0 {
		t.Fatalf("budget after PUT 3: %v", got["budget"])
	}
	for _, body := range []string{`{"timezone":"Asia/Tokyo"}`, `{"unsubscribed":false}`, `{"types":{"comment":{"mode":"daily"}}}`, `{}`} {
		if got := a.mustCall(t, "PUT", prefs, body, 200); got["budget"] != 3.0 {
			t.Fatalf("PUT %s reset the budget to %v", body, got["budget"])
		}
	}
	if got := a.mustCall(t, "PUT", prefs, `{"budget":0}`, 200); got["budget"] != 0.0 {
		t.Fatalf("budget 0 (no limit) read back as %v", got["budget"])
	}
	if got := a.mustCall(t, "PUT", prefs, `{"budget":null}`, 200); got["budget"] != nil {
		t.Fatalf("budget null read back as %v", got["budget"])
	}
	a.mustCall(t, "PUT", prefs, `{"budget":5}`, 200)
	for _, bad := range []string{`-1`, `1001`, `99999999999999999999`, `2.5`, `"3"`, `true`, `[3]`, `1e3`} {
		code, p := a.call(t, "PUT", prefs, `{"budget":`+bad+`}`)
		if code != http.StatusUnprocessableEntity && code != http.StatusBadRequest || fieldOf(p) != "budget" {
			t.Errorf("budget %s: %d naming %q, want a problem naming budget: %v", bad, code, fieldOf(p), p)
		}
	}
	if got := a.mustCall(t, "GET", prefs, "", 200); got["budget"] != 5.0 {
		t.Fatalf("refused PUTs changed the budget to %v", got["budget"])
	}
}

// TestBudgetInTypeAPI: a type's budget is the default of recipients who
// set none, checked like theirs.
func TestBudgetInTypeAPI(t *testing.T) {
	t.Parallel()
	a := setupAPI(t)
	if got := a.mustCall(t, "PUT", "/api/v1/types/comment", `{"budget":2}`, 200); got["budget"] != 2.0 {
		t.Fatalf("type budget: %v", got["budget"])
	}
	if got := a.mustCall(t, "PUT", "/api/v1/types/comment", `{}`, 200); got["budget"] != nil {
		t.Fatalf("type saved without a budget has %v", got["budget"])
	}
	for _, bad := range []string{`-3`, `5000`, `1.5`} {
		if code, p := a.call(t, "PUT", "/api/v1/types/comment", `{"budget":`+bad+`}`); code/100 != 4 || fieldOf(p) != "budget" {
			t.Errorf("type budget %s: %d naming %q", bad, code, fieldOf(p))
		}
	}
}

// TestSettingsBudget: the settings page shows the budget field, saves a
// number, empties it back to the default, shows a wrong one beside the
// field, and a page from before the field keeps the stored budget.
func TestSettingsBudget(t *testing.T) {
	t.Parallel()
	a, link := settingsSetup(t)
	c := browserClient(t)
	_, doc := getDoc(t, c, link)
	if doc.Find(`[data-testid="budget"] input[name="budget"]`).Length() != 1 || !strings.Contains(doc.Find(`[data-testid="budget"]`).Text(), "Emails a day, at most") {
		t.Fatalf("no budget field on the settings page")
	}
	const prefs = "/api/v1/recipients/u_bob/preferences"
	form := url.Values{"timezone": {"Europe/Berlin"}, "digest.daily_at": {"07:30"}, "digest.weekly_on": {"monday"}, "digest.weekly_at": {"16:00"},
		"types.comment.mode": {"daily"}, "types.share.mode": {"weekly"}, "types.security.mode": {"immediate"}}
	form.Set("budget", "4")
	if resp, doc := postDoc(t, c, a.srv.URL+"/settings", form, ""); resp.StatusCode != http.StatusOK || doc.Find(`input[name="budget"]`).AttrOr("value", "") != "4" {
		t.Fatalf("save with budget 4 = %d, field shows %q", resp.StatusCode, doc.Find(`input[name="budget"]`).AttrOr("value", ""))
	}
	if got := a.mustCall(t, "GET", prefs, "", 200)["budget"]; got != 4.0 {
		t.Fatalf("stored budget %v, want 4", got)
	}
	form.Del("budget") // a page from before the field
	postDoc(t, c, a.srv.URL+"/settings", form, "")
	if got := a.mustCall(t, "GET", prefs, "", 200)["budget"]; got != 4.0 {
		t.Fatalf("a page without the field changed the budget to %v", got)
	}
	for _, bad := range []string{"-2", "abc", "2.5", "100000"} {
		form.Set("budget", bad)
		resp, doc := postDoc(t, c, a.srv.URL+"/settings", form, "")
		if resp.StatusCode != http.StatusUnprocessableEntity || doc.Find(`[data-testid="error-budget"]`).Length() != 1 {
			t.Errorf("budget %q: %d, no error beside the field", bad, resp.StatusCode)
		}
	}
	form.Set("budget", "")
	postDoc(t, c, a.srv.URL+"/settings", form, "")
	if got := a.mustCall(t, "GET", prefs, "", 200)["budget"]; got != nil {
		t.Fatalf("an emptied field stored %v, want null (the default)", got)
	}
}

// TestConsoleShowsWhereABatchWasFolded: the batch browser links an
// over-budget batch to the held digest it was folded into and back, and
// the API names the held digest.
func TestConsoleShowsWhereABatchWasFolded(t *testing.T) {
	t.Parallel()
	a, first := consoleSetup(t)
	a.mustCall(t, "PUT", "/api/v1/recipients/u_bob/preferences", `{"budget":1}`, 200)
	flushNow(t, a, first)
	res := a.mustCall(t, "POST", "/api/v1/events", `{"type":"comment","actor":{"id":"carol"},"object":{"title":"Q4"},"recipients":["u_bob"]}`, 202)
	second := int64(res["batches"].([]any)[0].(map[string]any)["id"].(float64))
	flushNow(t, a, second)
	got := a.mustCall(t, "GET", "/api/v1/batches/"+itoa(second), "", 200)
	held, ok := got["folded_into"].(float64)
	if !ok || got["state"] != "canceled" {
		t.Fatalf("over-budget batch: %v", got)
	}
	c := operatorClient(t, a)
	res = a.mustCall(t, "POST", "/api/v1/events", `{"type":"comment","actor":{"id":"dan"},"object":{"title":"Q5"},"recipients":["u_bob"]}`, 202)
	third := int64(res["batches"].([]any)[0].(map[string]any)["id"].(float64))
	_, doc := getDoc(t, c, a.srv.URL+"/admin/batches/"+itoa(third)+"/preview")
	if note := doc.Find(`[data-testid="preview-note"]`).Text(); !strings.Contains(note, "would be held") {
		t.Fatalf("preview of a batch over the budget says %q", note)
	}
	_, doc = getDoc(t, c, a.srv.URL+"/admin/batches/"+itoa(second))
	if href, _ := doc.Find(`[data-testid="folded-into"] a`).Attr("href"); href != "/admin/batches/"+itoa(int64(held)) {
		t.Fatalf("folded batch links to %q, want the held digest %d", href, int64(held))
	}
	_, doc = getDoc(t, c, a.srv.URL+"/admin/batches/"+itoa(int64(held)))
	from := doc.Find(`[data-testid="folded-from"]`)
	if href, _ := from.Find("a").Attr("href"); href != "/admin/batches/"+itoa(second) || !strings.Contains(from.Text(), "batch "+itoa(second)) {
		t.Fatalf("held digest lists %q (%s), want batch %d", href, from.Text(), second)
	}
}

// TestSimulationReportsTheBudget: a proposal's installation-wide budget
// holds what goes over it, the report says how much, and a budget out of
// range is refused naming the proposal's field.
func TestSimulationReportsTheBudget(t *testing.T) {
	t.Parallel()
	a := setupAPI(t)
	a.mustCall(t, "PUT", "/api/v1/types/ping", `{"default_mode":"immediate","burst_limit":0}`, 200)
	events := `[{"type":"ping","occurred_at":"2026-10-24T08:00:00Z","recipients":["u_new"]},
		{"type":"ping","occurred_at":"2026-10-24T09:00:00Z","recipients":["u_new"]},
		{"type":"ping","occurred_at":"2026-10-24T10:00:00Z","recipients":["u_new"]}]`
	rep := a.mustCall(t, "POST", "/api/v1/simulations", `{"events":`+events+`,"policies":[{"name":"one a day","budget":1}]}`, 200)
	results := rep["results"].([]any)
	cur := results[0].(map[string]any)["overall"].(map[string]any)
	prop := results[1].(map[string]any)["overall"].(map[string]any)
	// One email that day, then the held digest of the other two the next.
	if cur["emails"] != 3.0 || cur["held"] != 0.0 || prop["emails"] != 2.0 || prop["held"] != 2.0 {
		t.Fatalf("current %v emails %v held; one a day %v emails %v held", cur["emails"], cur["held"], prop["emails"], prop["held"])
	}
	code, p := a.call(t, "POST", "/api/v1/simulations", `{"events":`+events+`,"policies":[{"budget":-1}]}`)
	if code != http.StatusUnprocessableEntity || fieldOf(p) != "policies[0].budget" {
		t.Fatalf("budget -1: %d naming %q", code, fieldOf(p))
	}
}
