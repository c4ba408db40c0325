package web_test

import "testing"

// TestTypeAPIRefusesTheHeldDigestsKey: a type keyed "budget:held" would
// give its batches the held digest's key, and an over-budget fold would
// land in its cooldown batch, so the type API refuses that key.
func TestTypeAPIRefusesTheHeldDigestsKey(t *testing.T) {
	t.Parallel()
	a := setupAPI(t)
	if code, p := a.call(t, "PUT", "/api/v1/types/budget:held", `{"default_mode":"cooldown"}`); code != 422 || fieldOf(p) != "key" {
		t.Fatalf("type budget:held: %d naming %q", code, fieldOf(p))
	}
}
