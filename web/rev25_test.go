package web_test

import (
	"context"
	"testing"
)

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

// TestPreferencesAPIListsEveryMute: the preferences answer lists every
// conversation muted now (here 1,000, more than the settings page
// shows), and a PUT that would mute more than that is refused, naming
// muted, and changes nothing.
func TestPreferencesAPIListsEveryMute(t *testing.T) {
	t.Parallel()
	a := brandSetup(t)
	if _, err := a.db.Pool.Exec(context.Background(), `INSERT INTO muted_threads (recipient_id, batch_key)
		SELECT 'u_bob', 'comment+doc:' || i FROM generate_series(1, 1000) AS i`); err != nil {
		t.Fatal(err)
	}
	if got := a.mustCall(t, "GET", "/api/v1/recipients/u_bob/preferences", "", 200)["muted"].(map[string]any); len(got) != 1000 {
		t.Fatalf("the API lists %d of 1000 mutes", len(got))
	}
	if status, p := a.call(t, "PUT", "/api/v1/recipients/u_bob/preferences", `{"muted":{"comment+doc:x":{}}}`); status != 422 || fieldOf(p) != "muted" {
		t.Fatalf("the 1001st mute: %d %v", status, p)
	}
	// Muting one again, or turning one back on, is not more.
	a.mustCall(t, "PUT", "/api/v1/recipients/u_bob/preferences", `{"muted":{"comment+doc:7":{}, "comment+doc:8":null}}`, 200)
	if n := mutedRows(t, a); n != 999 {
		t.Fatalf("%d mutes, want 999", n)
	}
}
