package web_test

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/db/dbtest"
)

// backslashPayload ends a string early when a backslash escapes a quote,
// as it does in PostgreSQL with standard_conforming_strings off.
const backslashPayload = `nobody\' OR true) --`

// TestNonStandardStringsCannotLeak runs lull on a database whose own
// setting turns standard_conforming_strings off, and sends a recipient id
// that breaks out of a quoted string under it through every path that
// takes a recipient id: none answers with, or changes, another
// recipient, and every connection of lull's pool reports the setting on.
func TestNonStandardStringsCannotLeak(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u := dbtest.NewURL(t)
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	var name string
	if err := conn.QueryRow(ctx, "SELECT current_database()").Scan(&name); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "ALTER DATABASE "+pgx.Identifier{name}.Sanitize()+" SET standard_conforming_strings = off"); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	// A connection that asks for nothing gets the database's setting.
	plain, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	if v := plain.PgConn().ParameterStatus("standard_conforming_strings"); v != "off" {
		t.Fatalf("a plain connection has standard_conforming_strings %q, want off: the test would prove nothing", v)
	}
	plain.Close(ctx)

	d, err := db.Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	a := serveAPI(t, d)
	a.mustCall(t, "PUT", "/api/v1/types/comment", `{"name":"Comments","default_mode":"immediate"}`, 200)
	a.mustCall(t, "PUT", "/api/v1/recipients/u_bob", `{"email":"bob@example.com","name":"Bob"}`, 200)
	a.mustCall(t, "PUT", "/api/v1/recipients/u_bob/preferences", `{"timezone":"Asia/Tokyo"}`, 200)
	if err := db.UpsertOperator(ctx, d.Pool, "ops@example.com", "correct horse"); err != nil {
		t.Fatal(err)
	}
	path := "/api/v1/recipients/" + url.PathEscape(backslashPayload)

	// Before the payload names a recipient, it names none.
	for _, p := range []string{path + "/preferences", path + "/feed"} {
		if got, out := a.call(t, "GET", p, ""); got != http.StatusNotFound {
			t.Errorf("GET %s = %d, want 404: %v", p, got, out)
		}
	}
	ops := operatorClient(t, a)
	resp, err := ops.Get(a.srv.URL + "/admin/recipients?" + url.Values{"id": {backslashPayload}}.Encode())
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || strings.Contains(string(page), "bob@example.com") {
		t.Errorf("console lookup of the payload = %d, showing Bob: %v", resp.StatusCode, strings.Contains(string(page), "bob@example.com"))
	}

	// Made a recipient, it is one of its own, and Bob is left alone.
	a.mustCall(t, "PUT", path, `{"email":"mallory@example.com","name":"Mallory"}`, 200)
	var email string
	if err := d.Pool.QueryRow(ctx, "SELECT email FROM recipients WHERE id = $1", backslashPayload).Scan(&email); err != nil || email != "mallory@example.com" {
		t.Fatalf("stored payload recipient: %q, %v", email, err)
	}
	if n := countRows(t, d, "SELECT count(*) FROM recipients WHERE id = 'u_bob' AND email = 'bob@example.com' AND timezone = 'Asia/Tokyo'"); n != 1 {
		t.Fatal("Bob changed")
	}
	if prefs := a.mustCall(t, "GET", path+"/preferences", "", 200); prefs["timezone"] == "Asia/Tokyo" {
		t.Errorf("the payload's preferences are Bob's: %v", prefs)
	}
	a.mustCall(t, "GET", path+"/feed", "", 200)

	// An event for it is emailed to it, not to Bob.
	res := a.mustCall(t, "POST", "/api/v1/events", `{"type":"comment","actor":{"id":"a","name":"Alice"},
		"object":{"title":"Q3 plan"},"recipients":["nobody\\' OR true) --"]}`, 202)
	a.workFlush(t, int64(res["batches"].([]any)[0].(map[string]any)["id"].(float64)))
	if err := d.Pool.QueryRow(ctx, "SELECT string_agg(to_address, ',') FROM outbox").Scan(&email); err != nil || email != "mallory@example.com" {
		t.Fatalf("outbox holds mail to %q (%v), want only mallory@example.com", email, err)
	}

	for what, q := range map[string]func() (string, error){
		"pgx": func() (v string, err error) {
			return v, d.Pool.QueryRow(ctx, "SHOW standard_conforming_strings").Scan(&v)
		},
		"bun": func() (v string, err error) {
			return v, d.Bun.NewRaw("SHOW standard_conforming_strings").Scan(ctx, &v)
		},
	} {
		if v, err := q(); err != nil || v != "on" {
			t.Errorf("%s connection: standard_conforming_strings %q (%v), want on", what, v, err)
		}
	}
}
