package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"testing"

	"github.com/lull-dev/lull/db"
)

// TestRetractByIDOrKeyNeverMixesThem: DELETE /api/v1/events/{id} takes
// an event id only and DELETE /api/v1/events?key=K an idempotency key
// only. A numeric key that was never stored used to retract the event
// with that id; now it retracts nothing.
func TestRetractByIDOrKeyNeverMixesThem(t *testing.T) {
	t.Parallel()
	a := setupAPI(t)
	a.mustCall(t, "PUT", "/api/v1/types/comment", `{"default_mode":"cooldown","window":"5m"}`, 200)
	a.mustCall(t, "PUT", "/api/v1/recipients/u_bob", `{"email":"bob@example.com"}`, 200)
	// post answers the event's id both ways: as a path segment and as
	// the API answers it, a JSON number.
	post := func(key string) (string, float64) {
		ev := a.mustCall(t, "POST", "/api/v1/events", `{"type":"comment","key":`+strconv.Quote(key)+`,"recipients":["u_bob"],"batch_key":"b"}`, 202)
		return itoa(int64(ev["id"].(float64))), ev["id"].(float64)
	}
	retracted := func(id string) bool {
		return countRows(t, a.db, "SELECT count(*) FROM events WHERE retracted_at IS NOT NULL AND id = "+id) == 1
	}
	retract := func(path string, want int) map[string]any {
		t.Helper()
		return a.mustCall(t, "DELETE", path, "", want)
	}

	first, _ := post("first")
	retract("/api/v1/events?key="+first, 404)
	if retracted(first) {
		t.Fatalf("DELETE by key %q, a key never stored, retracted event %s", first, first)
	}

	// A key that reads as the first event's id names its own event.
	third, thirdID := post(first)
	if got := retract("/api/v1/events?key="+first, 200); got["id"] != thirdID || got["removed"] != 1.0 {
		t.Fatalf("DELETE by key %q = %v, want event %s with 1 removed", first, got, third)
	}
	if retracted(first) || !retracted(third) {
		t.Fatalf("DELETE by key %q: event %s retracted %v, event %s retracted %v", first, first, retracted(first), third, retracted(third))
	}

	// By id.
	second, secondID := post("second")
	if got := retract("/api/v1/events/"+second, 200); got["id"] != secondID || !retracted(second) {
		t.Fatalf("DELETE by id %s = %v", second, got)
	}

	// A key with slashes and other characters, URL-encoded in the query.
	odd := "doc/7/comment 1+2?x=y&z"
	slashed, slashedID := post(odd)
	if got := retract("/api/v1/events?key="+url.QueryEscape(odd), 200); got["id"] != slashedID {
		t.Fatalf("DELETE by key %q = %v, want event %s", odd, got, slashed)
	}

	for _, tc := range []struct{ path, field string }{
		{"/api/v1/events/second", "id"}, // the old form, by key: refused, not guessed
		{"/api/v1/events/0", "id"},
		{"/api/v1/events/-" + second, "id"},
		{"/api/v1/events/99999999999999999999", "id"},
		{"/api/v1/events/" + url.PathEscape("doc/7"), "id"},
		{"/api/v1/events", "key"},
		{"/api/v1/events?key=", "key"},
		{"/api/v1/events?key=a&key=b", "key"},
		{"/api/v1/events?key=%ff", "key"},
		{"/api/v1/events?key=a%00", "key"},
		{"/api/v1/events?id=" + second, "id"},
	} {
		status, p := a.call(t, "DELETE", tc.path, "")
		if status != http.StatusUnprocessableEntity || fieldOf(p) != tc.field {
			t.Errorf("DELETE %s = %d naming %q, want 422 naming %q: %v", tc.path, status, fieldOf(p), tc.field, p)
		}
	}
	if n := countRows(t, a.db, "SELECT count(*) FROM events WHERE retracted_at IS NOT NULL"); n != 3 {
		t.Fatalf("%d events retracted, want the 3 named", n)
	}
}

// TestRetractSeesOnlyItsOwnAPIKeysEvents: ids and keys are looked up among
// the events the same API key posted.
func TestRetractSeesOnlyItsOwnAPIKeysEvents(t *testing.T) {
	t.Parallel()
	a := setupAPI(t)
	const otherKey = "lull_other_key_0123456789"
	if err := db.AddAPIKey(context.Background(), a.db.Pool, "other", otherKey); err != nil {
		t.Fatal(err)
	}
	a.mustCall(t, "PUT", "/api/v1/types/comment", `{"default_mode":"cooldown","window":"5m"}`, 200)
	a.mustCall(t, "PUT", "/api/v1/recipients/u_bob", `{"email":"bob@example.com"}`, 200)
	ev := a.mustCall(t, "POST", "/api/v1/events", `{"type":"comment","key":"shared","recipients":["u_bob"]}`, 202)
	id := itoa(int64(ev["id"].(float64)))
	for _, path := range []string{"/api/v1/events?key=shared", "/api/v1/events/" + id} {
		req, _ := http.NewRequest("DELETE", a.srv.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+otherKey)
		resp, err := a.http.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("another API key's DELETE %s = %d, want 404", path, resp.StatusCode)
		}
	}
	if n := countRows(t, a.db, "SELECT count(*) FROM events WHERE retracted_at IS NOT NULL"); n != 0 {
		t.Fatalf("another API key retracted %d events", n)
	}
	a.mustCall(t, "DELETE", "/api/v1/events?key=shared", "", 200)
}

// TestRetractByIDTakesTheIDAsAnswered: the id in DELETE
// /api/v1/events/{id} is read only in the form lull answers it. A key
// such as "007" or "+7", sent where the id goes (as retraction by key
// used to be), would otherwise retract event 7.
func TestRetractByIDTakesTheIDAsAnswered(t *testing.T) {
	t.Parallel()
	a := setupAPI(t)
	a.mustCall(t, "PUT", "/api/v1/types/comment", `{"default_mode":"cooldown","window":"5m"}`, 200)
	a.mustCall(t, "PUT", "/api/v1/recipients/u_bob", `{"email":"bob@example.com"}`, 200)
	ev := a.mustCall(t, "POST", "/api/v1/events", `{"type":"comment","recipients":["u_bob"]}`, 202)
	id := itoa(int64(ev["id"].(float64)))
	for _, path := range []string{"0" + id, "00" + id, "+" + id, url.PathEscape("+" + id)} {
		status, p := a.call(t, "DELETE", "/api/v1/events/"+path, "")
		if status != http.StatusUnprocessableEntity || fieldOf(p) != "id" {
			t.Errorf("DELETE /api/v1/events/%s = %d naming %q, want 422 naming id", path, status, fieldOf(p))
		}
	}
	if n := countRows(t, a.db, "SELECT count(*) FROM events WHERE retracted_at IS NOT NULL"); n != 0 {
		t.Fatalf("%d events retracted by ids not in the form lull answered", n)
	}
}
