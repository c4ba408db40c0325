package web_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/jobs"
	"github.com/lull-dev/lull/web"
)

// TestSecurityAPIKeys: keys are stored as SHA-256 digests only, a live
// key works, and a key revoked by id or by its own text stops working
// within db.MemoTTL (lull processes remember live keys that long) and
// stays revoked when added again (as a bootstrap key left in the
// environment would be at the next start).
func TestSecurityAPIKeys(t *testing.T) {
	t.Parallel()
	a := setupAPI(t)
	ctx := context.Background()
	get := func(key string) int {
		req, _ := http.NewRequest("GET", a.srv.URL+"/api/v1/types", nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := a.http.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	key, err := db.CreateAPIKey(ctx, a.db.Pool, "first")
	if err != nil {
		t.Fatal(err)
	}
	var stored []byte
	if err := a.db.Pool.QueryRow(ctx, `SELECT hash FROM api_keys WHERE name = 'first'`).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256([]byte(key)); string(stored) != string(sum[:]) || strings.Contains(string(stored), key) {
		t.Fatal("the key is not stored as its SHA-256 digest")
	}
	if got := get(key); got != 200 {
		t.Fatalf("live key: %d", got)
	}
	if got := get(key[:len(key)-1]); got != 401 {
		t.Fatalf("a key one character short: %d, want 401", got)
	}
	keys, err := db.ListAPIKeys(ctx, a.db.Pool)
	if err != nil {
		t.Fatal(err)
	}
	var id int64
	for _, k := range keys {
		if k.Name == "first" {
			id = k.ID
		}
	}
	if _, err := db.RevokeAPIKey(ctx, a.db.Pool, itoa(id)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(db.MemoTTL)
	if got := get(key); got != 401 {
		t.Fatalf("key revoked by id: %d, want 401", got)
	}
	second, _ := db.CreateAPIKey(ctx, a.db.Pool, "second")
	if _, err := db.RevokeAPIKey(ctx, a.db.Pool, second); err != nil {
		t.Fatal(err)
	}
	if err := db.AddAPIKey(ctx, a.db.Pool, "bootstrap again", second); err != nil {
		t.Fatal(err)
	}
	if got := get(second); got != 401 {
		t.Fatalf("key revoked by its text, then added again: %d, want 401", got)
	}
	if _, err := db.RevokeAPIKey(ctx, a.db.Pool, second); err == nil {
		t.Fatal("revoking a revoked key again reported success")
	}
	if got := get(testKey); got != 200 {
		t.Fatalf("revoking other keys broke the test key: %d", got)
	}
}

// TestSecuritySignedLinks: a settings or unsubscribe link works for its
// one recipient and purpose until it expires. Changing the recipient in a
// token breaks its signature; a token for one purpose does not open the
// other; an expired unsubscribe link is refused; and using bob's link
// changes bob only.
func TestSecuritySignedLinks(t *testing.T) {
	t.Parallel()
	a, link := settingsSetup(t)
	a.mustCall(t, "PUT", "/api/v1/recipients/u_carol", `{"email":"carol@example.com","name":"Carol"}`, 200)
	links := a.web.Links
	now := time.Now()
	forge := func(token, rid string) string {
		p, sig, _ := strings.Cut(token, ".")
		payload, _ := base64.RawURLEncoding.DecodeString(p)
		parts := strings.SplitN(string(payload), "\n", 3)
		parts[1] = rid
		return base64.RawURLEncoding.EncodeToString([]byte(strings.Join(parts, "\n"))) + "." + sig
	}
	bobSettings := links.Token("settings", "u_bob", now.Add(time.Hour))
	bobUnsub := links.Token("unsubscribe", "u_bob", now.Add(time.Hour))

	enter := func(token string) (*http.Response, string) {
		c := browserClient(t)
		resp, doc := getDoc(t, c, a.srv.URL+"/settings/enter?token="+url.QueryEscape(token))
		return resp, doc.Find("header").Text()
	}
	if resp, header := enter(bobSettings); resp.StatusCode != 200 || !strings.Contains(header, "Bob") {
		t.Fatalf("bob's settings link: %d, header %q", resp.StatusCode, header)
	}
	for name, token := range map[string]string{
		"RecipientSwapped": forge(bobSettings, "u_carol"),
		"UnsubscribeToken": bobUnsub,
		"Expired":          links.Token("settings", "u_bob", now.Add(-time.Second)),
		"OtherSecret": (func() string {
			l := links
			l.Secret = []byte("another secret, 32 bytes long....")
			return l.Token("settings", "u_bob", now.Add(time.Hour))
		})(),
	} {
		if resp, _ := enter(token); resp.StatusCode != http.StatusForbidden {
			t.Errorf("settings link %s: %d, want 403", name, resp.StatusCode)
		}
	}

	unsubscribe := func(token string) int {
		resp, err := http.Post(a.srv.URL+"/unsubscribe?token="+url.QueryEscape(token), "application/x-www-form-urlencoded", strings.NewReader("List-Unsubscribe=One-Click"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for name, token := range map[string]string{
		"RecipientSwapped": forge(bobUnsub, "u_carol"),
		"SettingsToken":    bobSettings,
		"Expired":          links.Token("unsubscribe", "u_carol", now.Add(-time.Second)),
	} {
		if got := unsubscribe(token); got != http.StatusForbidden {
			t.Errorf("unsubscribe link %s: %d, want 403", name, got)
		}
	}
	if got := unsubscribe(bobUnsub); got != 200 {
		t.Fatalf("bob's unsubscribe link: %d", got)
	}
	if n := countRows(t, a.db, "SELECT count(*) FROM recipients WHERE unsubscribed"); n != 1 ||
		countRows(t, a.db, "SELECT count(*) FROM recipients WHERE unsubscribed AND id = 'u_bob'") != 1 {
		t.Fatalf("%d recipients unsubscribed, want bob alone", n)
	}
	_ = link
}

// sessionCookie returns the value of the named cookie the client holds.
func sessionCookie(t *testing.T, c *http.Client, base, name string) string {
	t.Helper()
	u, _ := url.Parse(base)
	for _, ck := range c.Jar.Cookies(u) {
		if ck.Name == name {
			return ck.Value
		}
	}
	return ""
}

// withCookie is a client without a jar that sends one cookie.
func getWithCookie(t *testing.T, u, name, value string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("GET", u, nil)
	req.AddCookie(&http.Cookie{Name: name, Value: value})
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

// TestSecurityOperatorSessions: login issues a new session (a cookie
// planted before does not survive it); logout ends the session on the
// server, so a copy of the cookie taken before stops working; a new
// password ends every session of that operator; operator and recipient
// sessions do not open each other's pages, even with the cookie renamed;
// session cookies are HttpOnly, SameSite=Lax, and Secure behind https;
// passwords are stored as bcrypt hashes; logins are throttled.
func TestSecurityOperatorSessions(t *testing.T) {
	t.Parallel()
	a, _ := consoleSetup(t)
	ctx := context.Background()
	opens := func(value string) bool {
		resp := getWithCookie(t, a.srv.URL+"/admin", "lull_admin", value)
		return resp.StatusCode == 200
	}

	// Fixation: a session cookie from before the login is replaced.
	first := operatorClient(t, a)
	before := sessionCookie(t, first, a.srv.URL, "lull_admin")
	postForm(t, first, a.srv.URL+"/admin/login", url.Values{"email": {"ops@example.com"}, "password": {"correct horse"}})
	after := sessionCookie(t, first, a.srv.URL, "lull_admin")
	if before == "" || after == "" || before == after {
		t.Fatal("logging in again kept the session cookie")
	}
	if !opens(before) || !opens(after) {
		t.Fatal("live sessions do not open the console")
	}

	// Logout ends the session for every copy of its cookie.
	postForm(t, first, a.srv.URL+"/admin/logout", nil)
	if opens(after) {
		t.Fatal("a copy of the cookie still opens the console after logout")
	}
	if !opens(before) {
		t.Fatal("logging out one session ended another")
	}
	// A new password ends every session of the operator; setting the same
	// password again (the bootstrap operator at each start) ends none.
	second := operatorClient(t, a)
	kept := sessionCookie(t, second, a.srv.URL, "lull_admin")
	if err := db.UpsertOperator(ctx, a.db.Pool, "ops@example.com", "correct horse"); err != nil {
		t.Fatal(err)
	}
	if !opens(kept) {
		t.Fatal("setting the same password again ended a session")
	}
	if err := db.UpsertOperator(ctx, a.db.Pool, "ops@example.com", "battery staple"); err != nil {
		t.Fatal(err)
	}
	if opens(before) || opens(kept) {
		t.Fatal("sessions survived a new password")
	}

	// Recipient and operator sessions are kept apart.
	link := a.mustCall(t, "POST", "/api/v1/recipients/u_bob/preferences-link", "", 200)["url"].(string)
	rc := browserClient(t)
	getDoc(t, rc, strings.Replace(link, "http://lull.test", a.srv.URL, 1))
	recipientCookie := sessionCookie(t, rc, a.srv.URL, "lull_settings")
	if opens(recipientCookie) {
		t.Fatal("a recipient's session cookie, renamed, opens the console")
	}
	op := browserClient(t)
	resp := postForm(t, op, a.srv.URL+"/admin/login", url.Values{"email": {"ops@example.com"}, "password": {"battery staple"}})
	if resp.Request.URL.Path != "/admin" {
		t.Fatalf("login with the new password landed on %s", resp.Request.URL.Path)
	}
	if r, _ := getDoc(t, op, a.srv.URL+"/settings"); r.StatusCode != http.StatusUnauthorized {
		t.Fatalf("an operator session opens /settings: %d", r.StatusCode)
	}
	if r := getWithCookie(t, a.srv.URL+"/settings", "lull_settings", sessionCookie(t, op, a.srv.URL, "lull_admin")); r.StatusCode != http.StatusUnauthorized {
		t.Fatalf("an operator's cookie, renamed, opens /settings: %d", r.StatusCode)
	}
	raw := resp.Request.Response.Header.Get("Set-Cookie")
	for _, attr := range []string{"HttpOnly", "SameSite=Lax"} {
		if !strings.Contains(raw, attr) {
			t.Errorf("operator cookie lacks %s: %s", attr, raw)
		}
	}

	// Behind https, cookies are Secure.
	tls := &web.Server{DB: a.db, Logger: a.web.Logger, BaseURL: "https://lull.example", Links: a.web.Links, Engine: a.web.Engine}
	tsrv := httptest.NewServer(tls.Handler())
	defer tsrv.Close()
	req, _ := http.NewRequest("POST", tsrv.URL+"/admin/login", strings.NewReader(url.Values{"email": {"ops@example.com"}, "password": {"battery staple"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	tresp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	tresp.Body.Close()
	if c := tresp.Header.Get("Set-Cookie"); !strings.Contains(c, "; Secure") {
		t.Errorf("cookie behind https: %q, want Secure", c)
	}

	var hash string
	if err := a.db.Pool.QueryRow(ctx, `SELECT password_hash FROM operators`).Scan(&hash); err != nil || !strings.HasPrefix(hash, "$2a$10$") {
		t.Errorf("password stored as %q, want a bcrypt hash", hash)
	}
	throttled := false
	for range 12 {
		if postForm(t, browserClient(t), a.srv.URL+"/admin/login", url.Values{"email": {"ops@example.com"}, "password": {"guess"}}).StatusCode == http.StatusTooManyRequests {
			throttled = true
			break
		}
	}
	if !throttled {
		t.Error("twelve wrong passwords in a row were not throttled")
	}
}

// route is one pattern of routes.go.
type route struct{ method, path string }

var routePattern = regexp.MustCompile(`"(GET|POST|PUT|DELETE) (/[^"]*)"`)

// routesFromSource reads every route registered in routes.go, so the
// tests below cover a form or page added later without being told.
func routesFromSource(t *testing.T) []route {
	t.Helper()
	src, err := os.ReadFile("routes.go")
	if err != nil {
		t.Fatal(err)
	}
	var rs []route
	for _, m := range routePattern.FindAllStringSubmatch(string(src), -1) {
		rs = append(rs, route{m[1], m[2]})
	}
	if len(rs) < 30 {
		t.Fatalf("found only %d routes in routes.go", len(rs))
	}
	return rs
}

// securityFixture is a console with a flushed batch (so the outbox has an
// email), an open batch, a logged-in operator and a recipient session.
type securityFixture struct {
	a                   *apiBundle
	operator, recipient *http.Client
	vars                map[string]string // path wildcards by route prefix
}

func setupSecurityFixture(t *testing.T) *securityFixture {
	t.Helper()
	a, open := consoleSetup(t)
	sent := a.mustCall(t, "POST", "/api/v1/events", `{"type":"comment","batch_key":"b2","actor":{"id":"x","name":"X"},"recipients":["u_bob"]}`, 202)
	sentID := int64(sent["batches"].([]any)[0].(map[string]any)["id"].(float64))
	job := &river.Job[jobs.FlushArgs]{JobRow: &rivertype.JobRow{ID: 1, Attempt: 1, MaxAttempts: 8}, Args: jobs.FlushArgs{BatchID: sentID}}
	a.db.Pool.Exec(context.Background(), `UPDATE batches SET closes_at = now(), wake_at = now() WHERE id = $1`, sentID)
	if err := a.flush.Work(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	var outbox, jobID int64
	a.db.Pool.QueryRow(context.Background(), `SELECT id FROM outbox`).Scan(&outbox)
	a.db.Pool.QueryRow(context.Background(), `SELECT id FROM river_job ORDER BY id LIMIT 1`).Scan(&jobID)
	f := &securityFixture{a: a, operator: operatorClient(t, a), recipient: browserClient(t),
		vars: map[string]string{"/admin/batches/": itoa(open), "/admin/outbox/": itoa(outbox), "/admin/jobs/": itoa(jobID),
			"/api/v1/batches/": itoa(open), "/api/v1/recipients/": "u_bob", "/admin/types/": "comment", "/api/v1/types/": "comment"}}
	link := a.mustCall(t, "POST", "/api/v1/recipients/u_bob/preferences-link", "", 200)["url"].(string)
	getDoc(t, f.recipient, strings.Replace(link, "http://lull.test", a.srv.URL, 1))
	return f
}

// fill replaces a route's {wildcards} with the fixture's ids.
func (f *securityFixture) fill(path string) string {
	for prefix, v := range f.vars {
		if strings.HasPrefix(path, prefix) {
			path = regexp.MustCompile(`\{[a-z]+\}`).ReplaceAllString(path, v)
		}
	}
	return strings.TrimSuffix(path, "/")
}

// TestSecurityCrossOriginFormsRefused posts to every form route of
// routes.go from another site, with the operator's and the recipient's
// cookies: every post is refused with 403 and changes nothing. The one
// exemption is the RFC 8058 one-click unsubscribe, which mail providers
// post from their own servers and whose signed token is its authority.
func TestSecurityCrossOriginFormsRefused(t *testing.T) {
	t.Parallel()
	f := setupSecurityFixture(t)
	checked := 0
	for _, r := range routesFromSource(t) {
		if r.method != "POST" || strings.HasPrefix(r.path, "/api/") || r.path == "/unsubscribe" {
			continue
		}
		for _, c := range []*http.Client{f.operator, f.recipient} {
			for _, hdr := range []map[string]string{
				{"Sec-Fetch-Site": "cross-site", "Origin": "https://evil.example"},
				{"Origin": "https://evil.example"}, // a browser without Fetch metadata
			} {
				req, _ := http.NewRequest("POST", f.a.srv.URL+f.fill(r.path), strings.NewReader("do=save&name=Pwned&email=ops@example.com&password=x"))
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				for k, v := range hdr {
					req.Header.Set(k, v)
				}
				resp, err := c.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusForbidden {
					t.Errorf("cross-site POST %s with %v: %d, want 403", r.path, hdr, resp.StatusCode)
				}
			}
		}
		checked++
	}
	if checked < 8 {
		t.Fatalf("checked only %d form routes", checked)
	}
	if n := countRows(t, f.a.db, "SELECT count(*) FROM batches WHERE state = 'open'"); n != 1 {
		t.Fatalf("%d open batches after the refused posts, want 1", n)
	}
	if n := countRows(t, f.a.db, "SELECT count(*) FROM audit_log"); n != 0 {
		t.Fatalf("a refused post reached the audit log")
	}
	// The same post from the console itself goes through.
	if resp := postForm(t, f.operator, f.a.srv.URL+f.fill("/admin/batches/{id}/cancel"), nil); resp.StatusCode != 200 || countRows(t, f.a.db, "SELECT count(*) FROM batches WHERE state = 'open'") != 0 {
		t.Fatalf("a same-origin cancel: %d", resp.StatusCode)
	}
}

// TestSecurityHeadersOnEveryPage fetches every GET route of routes.go
// (pages, API, static files, the email HTML served into the preview
// frame) and a missing page, with an operator's and a recipient's
// session, and checks each answer's headers: a Content-Security-Policy
// without 'unsafe-inline' or 'unsafe-eval' scripts and with
// frame-ancestors, Referrer-Policy and X-Content-Type-Options: nosniff.
// Email HTML is additionally sandboxed by its policy, and every iframe in
// the console carries the strictest (empty) sandbox attribute.
func TestSecurityHeadersOnEveryPage(t *testing.T) {
	t.Parallel()
	f := setupSecurityFixture(t)
	paths := []string{"/no/such/page", "/admin/nothing"}
	for _, r := range routesFromSource(t) {
		if r.method == "GET" && !strings.HasSuffix(r.path, "/feed/stream") {
			paths = append(paths, f.fill(r.path))
		}
	}
	frames := 0
	for _, p := range paths {
		for _, c := range []*http.Client{f.operator, f.recipient} {
			req, _ := http.NewRequest("GET", f.a.srv.URL+p, nil)
			if strings.HasPrefix(p, "/api/") {
				req.Header.Set("Authorization", "Bearer "+testKey)
			}
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			h := resp.Header
			final := resp.Request.URL.Path // after a redirect to the login form
			csp := h.Get("Content-Security-Policy")
			script := directive(csp, "script-src")
			if script == "" {
				script = directive(csp, "default-src")
			}
			if script == "" || strings.Contains(script, "unsafe-inline") || strings.Contains(script, "unsafe-eval") || !strings.Contains(csp, "frame-ancestors") {
				t.Errorf("GET %s: Content-Security-Policy %q", p, csp)
			}
			if h.Get("Referrer-Policy") == "" || h.Get("X-Content-Type-Options") != "nosniff" {
				t.Errorf("GET %s: Referrer-Policy %q, X-Content-Type-Options %q", p, h.Get("Referrer-Policy"), h.Get("X-Content-Type-Options"))
			}
			if strings.HasSuffix(final, "/html") && resp.StatusCode == 200 && !strings.HasPrefix(csp, "sandbox") {
				t.Errorf("GET %s: email HTML without a sandboxing policy: %q", p, csp)
			}
			if strings.HasPrefix(h.Get("Content-Type"), "text/html") && !strings.HasSuffix(final, "/html") {
				doc, err := goquery.NewDocumentFromReader(resp.Body)
				if err != nil {
					t.Fatal(err)
				}
				doc.Find("iframe").Each(func(_ int, s *goquery.Selection) {
					frames++
					if v, ok := s.Attr("sandbox"); !ok || v != "" {
						t.Errorf("GET %s: iframe with sandbox=%q (present %v), want the empty sandbox", p, v, ok)
					}
				})
				if n := doc.Find("script:not([src])").Length(); n > 0 {
					t.Errorf("GET %s: %d inline scripts", p, n)
				}
			}
			resp.Body.Close()
		}
	}
	if frames < 2 {
		t.Fatalf("found %d iframes; the preview pages were not reached", frames)
	}
}

// directive returns the sources of one directive of a policy.
func directive(csp, name string) string {
	for _, d := range strings.Split(csp, ";") {
		if f := strings.Fields(d); len(f) > 0 && f[0] == name {
			return strings.Join(f[1:], " ")
		}
	}
	return ""
}
