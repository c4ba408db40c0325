package web_test

import "testing"

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
