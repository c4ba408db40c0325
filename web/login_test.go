package web_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/lull-dev/lull/db"
)

// TestLoginThrottledPerAccount guesses one operator's password from a new
// address each time, spelling the email in different cases: after ten
// guesses the account is throttled, even for the right password from yet
// another address, while other accounts are not; once time has refilled
// the allowance, the right password logs in.
func TestLoginThrottledPerAccount(t *testing.T) {
	t.Parallel()
	a := setupAPI(t)
	for _, email := range []string{"ops@example.com", "other@example.com"} {
		if err := db.UpsertOperator(context.Background(), a.db.Pool, email, "correct horse"); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	a.web.Now = func() time.Time { return now }
	h := a.web.Handler()
	addr := 0
	login := func(email, password string) int {
		addr++
		req := httptest.NewRequest("POST", "/admin/login", strings.NewReader(url.Values{"email": {email}, "password": {password}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.RemoteAddr = fmt.Sprintf("10.1.%d.%d:40000", addr>>8, addr&255)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	spellings := []string{"ops@example.com", "OPS@example.com", " Ops@Example.COM "}
	for i := range 10 {
		if got := login(spellings[i%3], "guess"); got != http.StatusUnauthorized {
			t.Fatalf("guess %d = %d, want 401", i+1, got)
		}
	}
	for i, email := range spellings {
		if got := login(email, "guess"); got != http.StatusTooManyRequests {
			t.Errorf("guess %d as %q from a new address = %d, want 429", 11+i, email, got)
		}
	}
	if got := login("ops@example.com", "correct horse"); got != http.StatusTooManyRequests {
		t.Errorf("the right password while throttled = %d, want 429", got)
	}
	if got := login("other@example.com", "correct horse"); got != http.StatusSeeOther {
		t.Errorf("another account = %d, want 303 (logged in)", got)
	}
	now = now.Add(time.Minute)
	if got := login("ops@example.com", "correct horse"); got != http.StatusSeeOther {
		t.Errorf("the right password a minute later = %d, want 303 (logged in)", got)
	}
}

// TestLoginStaysInTheConsole: a return path is kept only when it is a
// console page as the browser will read it. Dot segments, plain or
// percent-encoded (which browsers decode in a path), leave /admin, so the
// login form drops them and leads to the dashboard; encoded slashes stay
// on this host. The form is read rather than posted, as logins are
// throttled; the post reads next the same way.
func TestLoginStaysInTheConsole(t *testing.T) {
	t.Parallel()
	a, _ := consoleSetup(t)
	c := browserClient(t)
	for next, want := range map[string]string{
		"/admin/../x":                         "",
		"/admin/%2e%2e/x":                     "",
		"/admin/.%2E/%2e%2e/evil":             "",
		"/admin%2F..%2F..%2Fx":                "",
		"/admin/batches/../../x":              "",
		"/admin/./..":                         "",
		"/admin\n//evil.com":                  "",
		"/admin\t/evil.com":                   "",
		"/admin/%2F%2Fevil.com":               "/admin/%2F%2Fevil.com",
		"/admin/batches/9?state=due":          "/admin/batches/9?state=due",
		"/admin/" + strings.Repeat("a", 3000): "",
	} {
		_, doc := getDoc(t, c, a.srv.URL+"/admin/login?"+url.Values{"next": {next}}.Encode())
		if got := doc.Find(`input[name="next"]`).AttrOr("value", ""); got != want {
			t.Errorf("next %q kept as %q, want %q", next, got, want)
		}
	}
	resp := postForm(t, c, a.srv.URL+"/admin/login", url.Values{"email": {"ops@example.com"}, "password": {"correct horse"}, "next": {"/admin/%2e%2e/x"}})
	if resp.Request.URL.Path != "/admin" {
		t.Errorf("login with an encoded dot segment landed on %s", resp.Request.URL)
	}
}
