package web_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gorilla/sessions"
)

// badText is what no id, query or form value may hold: a NUL, bytes that
// are not UTF-8 (two that decode to the same U+FFFD), an overlong "/"
// and a bare continuation byte, each alone and inside an ordinary value.
var badText = []string{"%00", "u_bob%00", "%fe", "%ff", "u_%c0%af", "u_bob%80"}

// errorCounter counts records logged at ERROR or above.
type errorCounter struct {
	slog.Handler
	n *atomic.Int64
}

func (c errorCounter) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelError }

func (c errorCounter) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelError {
		c.n.Add(1)
	}
	return c.Handler.Handle(ctx, r)
}

// paramPattern finds the query and form fields the handlers read.
var paramPattern = regexp.MustCompile(`(?:Get|FormValue|f)\("([a-zA-Z_.]+)"\)`)

// paramsFromSource lists every query and form field name the web
// package's handlers read, so a field added later is covered too.
func paramsFromSource(t *testing.T) []string {
	t.Helper()
	files, _ := filepath.Glob("*.go")
	seen := map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range paramPattern.FindAllStringSubmatch(string(src), -1) {
			seen[m[1]] = true
		}
	}
	for _, p := range []string{"a.name", "b.everyone.mode", "mode.comment", "window.comment"} {
		seen[p] = true // fields named by a prefix in the source
	}
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	slices.Sort(names)
	if len(names) < 15 {
		t.Fatalf("found only %d field names: %v", len(names), names)
	}
	return names
}

// TestBadTextIsRefusedNotAnError sends a NUL and bytes that are not UTF-8
// in the path, the query and the form of every route of routes.go (API,
// settings, unsubscribe, console), with a valid key and sessions. None is
// answered with a 5xx or logged as an error; an API id that is not text
// is refused with a problem naming it, so %fe and %ff never both name one
// recipient.
func TestBadTextIsRefusedNotAnError(t *testing.T) {
	t.Parallel()
	f := setupSecurityFixture(t)
	var errs atomic.Int64
	f.a.web.Logger = slog.New(errorCounter{slog.DiscardHandler, &errs})
	params := paramsFromSource(t)
	wildcard := regexp.MustCompile(`\{([a-z]+)\}`)
	send := func(method, target, body string, want func(*http.Response) string) {
		t.Helper()
		req, err := http.NewRequest(method, f.a.srv.URL+target, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		c := f.recipient
		switch {
		case strings.HasPrefix(target, "/api/"):
			req.Header.Set("Authorization", "Bearer "+testKey)
			req.Header.Set("Content-Type", "application/json")
		case strings.HasPrefix(target, "/admin/"):
			c = f.operator
		}
		if body != "" && !strings.HasPrefix(target, "/api/") {
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		before := errs.Load()
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body) // a page cut off would log its own error
		resp.Body.Close()
		if resp.StatusCode >= 500 || errs.Load() != before {
			t.Errorf("%s %s: %d, %d errors logged", method, target, resp.StatusCode, errs.Load()-before)
		} else if msg := want(resp); msg != "" {
			t.Errorf("%s %s: %s", method, target, msg)
		}
	}
	anything := func(*http.Response) string { return "" }
	sent := 0
	for _, r := range routesFromSource(t) {
		stream := strings.HasSuffix(r.path, "/feed/stream")
		for _, bad := range badText {
			// The path: each wildcard in turn holds the bad value.
			for _, m := range wildcard.FindAllStringSubmatch(r.path, -1) {
				p := f.fill(strings.Replace(r.path, m[0], bad, 1))
				send(r.method, p, "", func(resp *http.Response) string {
					if strings.HasPrefix(p, "/api/") && resp.StatusCode != http.StatusUnprocessableEntity {
						return "want 422 naming " + m[1]
					}
					return ""
				})
				sent++
			}
			if stream {
				continue // a good path would open a stream that never ends
			}
			// The query and, for forms, the body: every field holds it.
			q := make([]string, len(params))
			for i, n := range params {
				q[i] = url.QueryEscape(n) + "=" + bad
			}
			send(r.method, f.fill(r.path)+"?"+strings.Join(q, "&"), "", anything)
			sent++
			if r.method == "POST" && !strings.HasPrefix(r.path, "/api/") {
				send(r.method, f.fill(r.path), strings.Join(q, "&"), anything)
				sent++
			}
		}
	}
	// The simulator's multipart form, and the events file it uploads, with
	// ids holding an escaped NUL or bytes that are not UTF-8.
	for _, bad := range badText {
		raw, _ := url.PathUnescape(bad)
		form := url.Values{"source": {"upload"}, "a.types.comment.mode": {"daily"}, "a.name": {raw}, "from": {raw}}
		for _, file := range []string{
			`{"type":"comment","occurred_at":"2026-11-22T10:00:00Z","recipients":["` + raw + `"]}`,
			`{"type":"comment","occurred_at":"2026-11-22T10:00:00Z","recipients":["u\u0000"]}`,
			`{"type":"comment","occurred_at":"2026-11-22T10:00:00Z","recipients":[{"id":"u_x","email":"x@example.com","timezone":"` + raw + `"}]}`,
		} {
			before := errs.Load()
			resp, _ := postDoc(t, f.operator, f.a.srv.URL+"/admin/simulate", form, file)
			if resp.StatusCode >= 500 || errs.Load() != before {
				t.Errorf("simulate with %q uploading %q: %d, %d errors logged", bad, file, resp.StatusCode, errs.Load()-before)
			}
			sent++
		}
	}
	t.Logf("%d requests with bad text", sent)

	// %fe and %ff are different ids, and neither is one lull can store.
	for _, id := range []string{"%fe", "%ff"} {
		got, p := f.a.call(t, "PUT", "/api/v1/recipients/"+id, `{"email":"eve@example.com"}`)
		if got != http.StatusUnprocessableEntity || fieldOf(p) != "id" {
			t.Errorf("PUT recipient %s = %d naming %q, want 422 naming id", id, got, fieldOf(p))
		}
	}
}

// TestUndecodableSessionCookies sends session cookies that no longer
// decode, as after the secret changed, or that were never lull's: the
// console sends the operator to the login page and the settings page
// asks for the link from an email, each clearing the cookie; none is an
// error.
func TestUndecodableSessionCookies(t *testing.T) {
	t.Parallel()
	f := setupSecurityFixture(t)
	var errs atomic.Int64
	f.a.web.Logger = slog.New(errorCounter{slog.DiscardHandler, &errs})
	// A cookie of the same shape, signed with another secret.
	other := sessions.NewCookieStore([]byte("another secret, rotated away....."), []byte("0123456789abcdef0123456789abcdef"))
	rotated := func(name string) string {
		req := httptest.NewRequest("GET", "/", nil)
		rec := httptest.NewRecorder()
		sess, _ := other.New(req, name)
		sess.Values["sid"], sess.Values["rid"] = "token", "u_bob"
		if err := sess.Save(req, rec); err != nil {
			t.Fatal(err)
		}
		return rec.Result().Cookies()[0].Value
	}
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, c := range []struct {
		method, path, cookie string
		status               int
		location             string
	}{
		{"GET", "/admin", "lull_admin", http.StatusSeeOther, "/admin/login"},
		{"GET", "/admin/batches", "lull_admin", http.StatusSeeOther, "/admin/login?next=%2Fadmin%2Fbatches"},
		{"POST", "/admin/batches/1/cancel", "lull_admin", http.StatusForbidden, ""},
		{"POST", "/admin/logout", "lull_admin", http.StatusSeeOther, "/admin/login"},
		{"GET", "/settings", "lull_settings", http.StatusUnauthorized, ""},
		{"POST", "/settings", "lull_settings", http.StatusUnauthorized, ""},
	} {
		for _, value := range []string{rotated(c.cookie), "not-a-cookie", "MTcwMDAwMDAwMHxnYXJiYWdlfGdhcmJhZ2U="} {
			req, _ := http.NewRequest(c.method, f.a.srv.URL+c.path, nil)
			req.AddCookie(&http.Cookie{Name: c.cookie, Value: value})
			before := errs.Load()
			resp, err := noRedirect.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			cleared := false
			for _, ck := range resp.Cookies() {
				cleared = cleared || ck.Name == c.cookie && ck.MaxAge < 0
			}
			if resp.StatusCode != c.status || resp.Header.Get("Location") != c.location || !cleared || errs.Load() != before {
				t.Errorf("%s %s with %s=%.12s…: %d to %q, cookie cleared %v, %d errors logged; want %d to %q, cleared",
					c.method, c.path, c.cookie, value, resp.StatusCode, resp.Header.Get("Location"), cleared, errs.Load()-before, c.status, c.location)
			}
		}
	}
}
