package web_test

import (
	"net/url"
	"strconv"
	"strings"
	"testing"
)

// A type opts into shared delivery through the API and reads it back; a
// type whose emails carry a per-recipient link to stop one conversation
// (unsubscribe "thread") is refused, naming the field.
func TestTypeSharedDelivery(t *testing.T) {
	t.Parallel()
	a := setupAPI(t)
	a.mustCall(t, "PUT", "/api/v1/types/task.failed", `{"name":"Failed tasks","shared_delivery":true}`, 200)
	if got := a.mustCall(t, "GET", "/api/v1/types/task.failed", "", 200)["shared_delivery"]; got != true {
		t.Fatalf("type answers shared_delivery %v", got)
	}
	code, p := a.call(t, "PUT", "/api/v1/types/comment", `{"name":"Comments","unsubscribe":"thread","shared_delivery":true}`)
	if code != 422 || fieldOf(p) != "shared_delivery" {
		t.Fatalf("shared delivery with thread unsubscribe: %d %v, want 422 naming shared_delivery", code, p)
	}
}

// The batch API and the console's batch page show which batches went
// out together in one shared email.
func TestBatchShowsItsSharedDelivery(t *testing.T) {
	t.Parallel()
	a := brandSetup(t)
	a.mustCall(t, "PUT", "/api/v1/types/task.failed", `{"name":"Failed tasks","shared_delivery":true}`, 200)
	for _, id := range []string{"u_ann", "u_cat"} {
		a.mustCall(t, "PUT", "/api/v1/recipients/"+id, `{"email":"`+id+`@example.com"}`, 200)
	}
	res := a.mustCall(t, "POST", "/api/v1/events", `{"type":"task.failed","actor":{"id":"ci"},"object":{"title":"nightly"},"recipients":["u_ann","u_bob","u_cat"]}`, 202)
	var ids []int64
	for _, b := range res["batches"].([]any) {
		ids = append(ids, int64(b.(map[string]any)["id"].(float64)))
	}
	a.workFlush(t, ids[0])
	d := a.mustCall(t, "GET", "/api/v1/batches/"+strconv.FormatInt(ids[2], 10), "", 200)
	del := d["deliveries"].([]any)[0].(map[string]any)
	if got, _ := del["shared_with"].([]any); len(got) != 3 || d["state"] != "sent" {
		t.Fatalf("batch %d is %v, shared with %v; want sent with all 3", ids[2], d["state"], del["shared_with"])
	}
	_, doc := getDoc(t, operatorClient(t, a), a.srv.URL+"/admin/batches/"+strconv.FormatInt(ids[1], 10))
	if txt := doc.Text(); !strings.Contains(txt, "one shared email to 3 recipients") {
		t.Fatal("the batch page does not say its email went out shared")
	}
	_, doc = getDoc(t, operatorClient(t, a), a.srv.URL+"/admin/batches?type=task.failed")
	if got := doc.Find(`[data-testid="shared"]`); got.Length() != 3 || got.First().Text() != "shared ×3" {
		t.Fatalf("the batch browser marks %d rows shared (%q), want 3", got.Length(), got.First().Text())
	}
}

// The console's type form does not show shared delivery, so saving it
// keeps the choice the API made.
func TestConsoleTypeFormKeepsSharedDelivery(t *testing.T) {
	t.Parallel()
	a := brandSetup(t)
	a.mustCall(t, "PUT", "/api/v1/types/comment", `{"name":"Comments","default_mode":"immediate","shared_delivery":true}`, 200)
	postForm(t, operatorClient(t, a), a.srv.URL+"/admin/types/comment/edit", url.Values{"name": {"Team comments"}, "default_mode": {"immediate"},
		"max_items": {"0"}, "display_limit": {"10"}, "item_order": {"latest"}, "do": {"save"}})
	got := a.mustCall(t, "GET", "/api/v1/types/comment", "", 200)
	if got["name"] != "Team comments" || got["shared_delivery"] != true {
		t.Fatalf("after the console saved it the type is %v, shared_delivery %v", got["name"], got["shared_delivery"])
	}
}

// A shared email's batch page and API name the members of the type left
// out of it and why: a member whose address bounced, with their batch.
func TestBatchShowsMembersLeftOutOfItsSharedDelivery(t *testing.T) {
	t.Parallel()
	a := brandSetup(t)
	a.mustCall(t, "PUT", "/api/v1/types/task.failed", `{"name":"Failed tasks","shared_delivery":true}`, 200)
	for _, id := range []string{"u_ann", "u_cat", "u_dan"} {
		a.mustCall(t, "PUT", "/api/v1/recipients/"+id, `{"email":"`+id+`@example.com"}`, 200)
	}
	a.mustCall(t, "POST", "/api/v1/suppressions", `{"address": "u_dan@example.com", "reason": "hard_bounce"}`, 201)
	res := a.mustCall(t, "POST", "/api/v1/events", `{"type":"task.failed","actor":{"id":"ci"},"object":{"title":"nightly"},"recipients":["u_ann","u_bob","u_cat","u_dan"]}`, 202)
	var ids []int64
	for _, b := range res["batches"].([]any) {
		ids = append(ids, int64(b.(map[string]any)["id"].(float64)))
	}
	a.workFlush(t, ids[0])
	a.workFlush(t, ids[3])
	d := a.mustCall(t, "GET", "/api/v1/batches/"+strconv.FormatInt(ids[1], 10), "", 200)
	del := d["deliveries"].([]any)[0].(map[string]any)
	left, _ := del["left_out"].([]any)
	if len(left) != 1 || left[0].(map[string]any)["recipient"] != "u_dan" || left[0].(map[string]any)["reason"] != "bounced" {
		t.Fatalf("left out of the shared email: %v, want u_dan (bounced)", del["left_out"])
	}
	_, doc := getDoc(t, operatorClient(t, a), a.srv.URL+"/admin/batches/"+strconv.FormatInt(ids[2], 10))
	if txt := doc.Text(); !strings.Contains(txt, "u_dan (bounced, batch #"+strconv.FormatInt(ids[3], 10)+")") {
		t.Fatal("the batch page does not name the member left out of its shared email")
	}
}
