package web_test

import (
	"context"
	"net/url"
	"testing"
)

// A type's catch_up is set and read back in days, cleared by leaving it
// out, refused out of bounds, misspelt or on a required type (naming the
// field), and kept when the console's form, which does not show it, saves
// the type.
func TestCatchUpInTypeAPI(t *testing.T) {
	t.Parallel()
	a := brandSetup(t)
	if got := a.mustCall(t, "PUT", "/api/v1/types/comment", `{"name":"Comments","default_mode":"daily","catch_up":"7d"}`, 200); got["catch_up"] != "7d" {
		t.Fatalf("catch_up answered %v", got["catch_up"])
	}
	postForm(t, operatorClient(t, a), a.srv.URL+"/admin/types/comment/edit", url.Values{"name": {"Team comments"}, "default_mode": {"daily"},
		"max_items": {"0"}, "display_limit": {"10"}, "item_order": {"latest"}, "do": {"save"}})
	if got := a.mustCall(t, "GET", "/api/v1/types/comment", "", 200); got["name"] != "Team comments" || got["catch_up"] != "7d" {
		t.Fatalf("after the console saved it the type is %v, catch_up %v", got["name"], got["catch_up"])
	}
	if got := a.mustCall(t, "PUT", "/api/v1/types/comment", `{"name":"Comments"}`, 200); got["catch_up"] != nil {
		t.Fatalf("type saved without catch_up has %v", got["catch_up"])
	}
	for _, bad := range []string{`"0d"`, `"366d"`, `"7"`, `"168h"`, `"-1d"`, `"1w"`, `"99999999999999999999d"`, `" 7d"`, `7`, `true`} {
		if code, p := a.call(t, "PUT", "/api/v1/types/comment", `{"catch_up":`+bad+`}`); code/100 != 4 || fieldOf(p) != "catch_up" {
			t.Errorf("catch_up %s: %d naming %q", bad, code, fieldOf(p))
		}
	}
	if code, p := a.call(t, "PUT", "/api/v1/types/security", `{"required":true,"catch_up":"7d"}`); code != 422 || fieldOf(p) != "catch_up" {
		t.Errorf("catch_up on a required type: %d naming %q", code, fieldOf(p))
	}
}

// The host records a visit for a known recipient; an unknown one is 404.
func TestRecipientSeen(t *testing.T) {
	t.Parallel()
	a := setupAPI(t)
	a.mustCall(t, "PUT", "/api/v1/recipients/u_ann", `{"email":"ann@example.com"}`, 200)
	if got := a.mustCall(t, "POST", "/api/v1/recipients/u_ann/seen", "", 200); got["seen_at"] == nil {
		t.Fatalf("answer %v has no seen_at", got)
	}
	a.mustCall(t, "POST", "/api/v1/recipients/u_nobody/seen", "", 404)
}

// Listing the feed and opening the settings page from an email are
// visits: a recipient absent past a type's catch_up gets the weekly
// digest, and after either visit the daily one again.
func TestCatchUpEndsWithAFeedOrSettingsVisit(t *testing.T) {
	t.Parallel()
	a, link := settingsSetup(t)
	a.mustCall(t, "PUT", "/api/v1/types/digesty", `{"name":"Digesty","default_mode":"daily","catch_up":"7d"}`, 200)
	away := func() {
		t.Helper()
		if _, err := a.db.Pool.Exec(context.Background(), `
			INSERT INTO recipient_seen VALUES ('u_bob', now() - interval '30 days')
			ON CONFLICT (recipient_id) DO UPDATE SET seen_at = EXCLUDED.seen_at`); err != nil {
			t.Fatal(err)
		}
	}
	keyOf := func() string {
		t.Helper()
		res := a.mustCall(t, "POST", "/api/v1/events", `{"type":"digesty","actor":{"id":"ann"},"object":{"title":"Q3"},"recipients":["u_bob"]}`, 202)
		return res["batches"].([]any)[0].(map[string]any)["batch_key"].(string)
	}
	for name, visit := range map[string]func(){
		"feed":     func() { a.mustCall(t, "GET", "/api/v1/recipients/u_bob/feed", "", 200) },
		"settings": func() { getDoc(t, browserClient(t), link) },
	} {
		away()
		if k := keyOf(); k != "digest:weekly" {
			t.Fatalf("before the %s visit: %s, want the weekly digest", name, k)
		}
		visit()
		if k := keyOf(); k != "digest:daily" {
			t.Fatalf("after the %s visit: %s, want the daily digest", name, k)
		}
	}
}

// TestCatchUpDroppedWhenTheConsoleMakesATypeRequired: the console's form
// does not show catch_up but can tick "required"; the type then has no
// catch_up (a required type is never slowed), so the API does not show
// one (a client that PUT back what it read would be refused).
func TestCatchUpDroppedWhenTheConsoleMakesATypeRequired(t *testing.T) {
	t.Parallel()
	a := brandSetup(t)
	a.mustCall(t, "PUT", "/api/v1/types/comment", `{"name":"Comments","default_mode":"daily","catch_up":"7d"}`, 200)
	postForm(t, operatorClient(t, a), a.srv.URL+"/admin/types/comment/edit", url.Values{"name": {"Comments"}, "default_mode": {"daily"},
		"required": {"on"}, "max_items": {"0"}, "display_limit": {"10"}, "item_order": {"latest"}, "do": {"save"}})
	got := a.mustCall(t, "GET", "/api/v1/types/comment", "", 200)
	if got["required"] != true || got["catch_up"] != nil {
		t.Fatalf("after the console made it required: required %v, catch_up %v", got["required"], got["catch_up"])
	}
}

// TestRecipientSeenRacingItsDeletionIsNotAnError: a visit recorded while
// the recipient is being deleted finds them gone when it writes; that is
// a recipient lull does not know, skipped, not a server error.
func TestRecipientSeenRacingItsDeletionIsNotAnError(t *testing.T) {
	t.Parallel()
	a := setupAPI(t)
	a.mustCall(t, "PUT", "/api/v1/recipients/u_ann", `{"email":"ann@example.com"}`, 200)
	ctx := context.Background()
	tx, err := a.db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `DELETE FROM recipients WHERE id = 'u_ann'`); err != nil {
		t.Fatal(err)
	}
	done := make(chan int)
	go func() {
		code, _ := a.call(t, "POST", "/api/v1/recipients/u_ann/seen", "")
		done <- code
	}()
	// The deletion commits only once the visit waits for the row.
	for waiting := 0; waiting == 0; {
		select {
		case code := <-done:
			t.Fatalf("the visit finished (%d) while the recipient was locked", code)
		default:
		}
		a.db.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if code := <-done; code/100 == 5 {
		t.Fatalf("a visit racing the recipient's deletion answered %d", code)
	}
}
