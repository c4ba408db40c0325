package web_test

import (
	"context"
	"fmt"
	"github.com/jackc/pgx/v5"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/chromedp/chromedp"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/web/browsertest"
)

// settingsSetup registers two types and a recipient and returns the API
// bundle with the recipient's signed settings link on the test server.
func settingsSetup(t *testing.T) (*apiBundle, string) {
	t.Helper()
	a := setupAPI(t)
	a.mustCall(t, "PUT", "/api/v1/types/comment", `{"name":"Comments","category":"Documents","description":"When someone comments on your documents","default_mode":"immediate"}`, 200)
	a.mustCall(t, "PUT", "/api/v1/types/share", `{"name":"Shares","category":"Documents","default_mode":"immediate"}`, 200)
	a.mustCall(t, "PUT", "/api/v1/types/security", `{"name":"Security alerts","category":"Account","required":true}`, 200)
	a.mustCall(t, "PUT", "/api/v1/recipients/u_bob", `{"email":"bob@example.com","name":"Bob <b>Stone</b>","timezone":"Europe/Berlin"}`, 200)
	link := a.mustCall(t, "POST", "/api/v1/recipients/u_bob/preferences-link", "", 200)["url"].(string)
	return a, strings.Replace(link, "http://lull.test", a.srv.URL, 1)
}

func browserClient(t *testing.T) *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar}
}

func getDoc(t *testing.T, c *http.Client, u string) (*http.Response, *goquery.Document) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	doc, err := goquery.NewDocumentFromReader(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, doc
}

func TestSettingsLinkStartsSessionAndHidesToken(t *testing.T) {
	t.Parallel()
	a, link := settingsSetup(t)
	c := browserClient(t)
	resp, doc := getDoc(t, c, link)
	if resp.Request.URL.Path != "/settings" || resp.Request.URL.RawQuery != "" {
		t.Fatalf("landed on %s, want /settings without the token", resp.Request.URL)
	}
	if n := doc.Find(`fieldset[data-testid^="type-"]`).Length(); n != 3 {
		t.Fatalf("%d type rows, want 3", n)
	}
	if doc.Find(`input[name="types.security.mode"][value="never"][disabled]`).Length() != 1 {
		t.Fatal("a required type can be turned off")
	}
	if doc.Find("h2").First().Text() != "Account" {
		t.Fatalf("types are not grouped by category: first heading %q", doc.Find("h2").First().Text())
	}
	if html, _ := doc.Find("header").Html(); strings.Contains(html, "<b>") {
		t.Fatal("the recipient's name is not escaped")
	}
	var cookie *http.Cookie
	for _, ck := range c.Jar.Cookies(resp.Request.URL) {
		cookie = ck
	}
	if cookie == nil {
		t.Fatal("no session cookie")
	}
	raw := resp.Request.Response.Header.Get("Set-Cookie")
	for _, attr := range []string{"HttpOnly", "SameSite=Lax"} {
		if !strings.Contains(raw, attr) {
			t.Errorf("session cookie lacks %s: %s", attr, raw)
		}
	}
	_ = a
}

// tamper changes one character in the middle of tok. (Changing its last
// characters can leave the signature's bytes as they were: the last
// base64 character carries padding bits.)
func tamper(tok string) string {
	b := []byte(tok)
	i := len(b) / 2
	if b[i] == 'A' {
		b[i] = 'B'
	} else {
		b[i] = 'A'
	}
	return string(b)
}

func TestSettingsRefusesBadLinks(t *testing.T) {
	t.Parallel()
	a, link := settingsSetup(t)
	u, _ := url.Parse(link)
	tok := u.Query().Get("token")
	other := a.web.Links.Token("unsubscribe", "u_bob", time.Now().Add(time.Hour))
	expired := a.web.Links.Token("settings", "u_bob", time.Now().Add(-time.Minute))
	unknown := a.web.Links.Token("settings", "u_nobody", time.Now().Add(time.Hour))
	for name, c := range map[string]struct{ token, want string }{
		"Tampered": {tamper(tok), "not valid"}, "WrongPurpose": {other, "not valid"}, "Empty": {"", "not valid"},
		"UnknownRecipient": {unknown, "not valid"}, "Expired": {expired, "has expired"},
	} {
		t.Run(name, func(t *testing.T) {
			resp, doc := getDoc(t, browserClient(t), a.srv.URL+"/settings/enter?token="+url.QueryEscape(c.token))
			if resp.StatusCode != http.StatusForbidden || !strings.Contains(doc.Find(`[data-testid="message"]`).Text(), c.want) {
				t.Fatalf("%d %q, want 403 saying the link %s", resp.StatusCode, doc.Find("main").Text(), c.want)
			}
		})
	}
	resp, _ := getDoc(t, browserClient(t), a.srv.URL+"/settings")
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("/settings without a session = %d, want 401", resp.StatusCode)
	}
}

func TestSettingsSaveValidatesAndKeeps(t *testing.T) {
	t.Parallel()
	a, link := settingsSetup(t)
	c := browserClient(t)
	getDoc(t, c, link)
	form := url.Values{
		"timezone": {"Mars/Olympus"}, "digest.daily_at": {"07:30"}, "digest.weekly_on": {"friday"}, "digest.weekly_at": {"16:00"},
		"types.comment.mode": {"cooldown"}, "types.comment.window": {"15m"}, "types.comment.max_wait": {"1h"},
		"types.share.mode": {"never"}, "types.security.mode": {"never"},
	}
	post := func(f url.Values) (*http.Response, *goquery.Document) { return postSettings(t, c, a.srv.URL, f) }
	resp, doc := post(form)
	if resp.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("invalid form = %d, want 422", resp.StatusCode)
	}
	for _, f := range []string{"timezone", "types.security.mode"} {
		if doc.Find(`[data-testid="error-`+f+`"]`).Length() != 1 {
			t.Errorf("no error shown next to %s", f)
		}
	}
	if v, _ := doc.Find(`input[name="digest.daily_at"]`).Attr("value"); v != "07:30" {
		t.Errorf("re-rendered form lost the submitted daily time: %q", v)
	}
	form.Set("timezone", "America/New_York")
	form.Del("types.security.mode")
	resp, doc = post(form)
	if resp.StatusCode != 200 || resp.Request.URL.Path != "/settings" || doc.Find(`[data-testid="flash"]`).Length() != 1 {
		t.Fatalf("valid save = %d at %s, want a redirect to /settings with a flash", resp.StatusCode, resp.Request.URL.Path)
	}
	if !strings.Contains(doc.Find(`[data-testid="preview-comment"]`).Text(), "15 minutes after the last one") {
		t.Errorf("preview line = %q", doc.Find(`[data-testid="preview-comment"]`).Text())
	}
	prefs, err := db.TypePreferences(context.Background(), a.db.Pool, "u_bob")
	if err != nil {
		t.Fatal(err)
	}
	if prefs["comment"].Mode != "cooldown" || *prefs["comment"].WindowMS != 900000 || prefs["share"].Mode != "never" {
		t.Fatalf("stored preferences = %+v", prefs)
	}
	if _, ok := prefs["security"]; ok {
		t.Fatal("a type left at its defaults was stored as an override")
	}
	// A cross-site form post is refused.
	req, _ := http.NewRequest("POST", a.srv.URL+"/settings", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	resp2, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp2.Body.Close()
	if resp2.StatusCode != http.StatusForbidden {
		t.Fatalf("cross-site post = %d, want 403", resp2.StatusCode)
	}
}

// TestSettingsInBrowser walks the page in headless Chromium: open the
// signed link, set comments to a 15-minute cool-down and shares to never,
// save, reload, and find the choices kept.
func TestSettingsInBrowser(t *testing.T) {
	t.Parallel()
	a, link := settingsSetup(t)
	ctx := browsertest.New(t)
	browsertest.Do(t, ctx,
		chromedp.Navigate(link),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="save"]`)),
		chromedp.Click(chromedp.CSS(`input[name="types.comment.mode"][value="cooldown"]`)),
		chromedp.WaitVisible(chromedp.CSS(`select[name="types.comment.window"]`)),
		chromedp.SetValue(chromedp.CSS(`select[name="types.comment.window"]`), "15m"),
		chromedp.Click(chromedp.CSS(`input[name="types.share.mode"][value="never"]`)),
		chromedp.Click(chromedp.CSS(`[data-testid="save"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="flash"]`)),
		chromedp.Reload(),
	)
	browsertest.WaitURL(t, ctx, "/settings")
	browsertest.Do(t, ctx, chromedp.WaitVisible(chromedp.CSS(`[data-testid="save"]`)))
	checked := func(name string) string {
		return browsertest.Eval[string](t, ctx, `document.querySelector('input[name="`+name+`"]:checked').value`)
	}
	if got := checked("types.comment.mode"); got != "cooldown" {
		t.Errorf("comments after reload: %q, want cooldown", got)
	}
	if got := checked("types.share.mode"); got != "never" {
		t.Errorf("shares after reload: %q, want never", got)
	}
	if got := browsertest.Eval[string](t, ctx, `document.querySelector('select[name="types.comment.window"]').value`); got != "15m" {
		t.Errorf("window after reload: %q, want 15m", got)
	}
	browsertest.Screenshot(t, ctx, "settings.png")

	u, _ := url.Parse(link)
	q := u.Query()
	q.Set("token", q.Get("token")+"x")
	u.RawQuery = q.Encode()
	browsertest.Do(t, ctx, chromedp.Navigate(u.String()), chromedp.WaitVisible(chromedp.CSS(`[data-testid="message"]`)))
	if text := browsertest.Eval[string](t, ctx, `document.querySelector('[data-testid="message"]').innerText`); !strings.Contains(text, "not valid") {
		t.Errorf("tampered link shows %q", text)
	}
	_ = a
}

// TestSettingsCadences saves the hourly, several-day weekly and monthly
// digests from the form, shows them back, and refuses a form with no
// weekly day or a cleared monthly time, next to those fields.
func TestSettingsCadences(t *testing.T) {
	t.Parallel()
	a, link := settingsSetup(t)
	c := browserClient(t)
	getDoc(t, c, link)
	post := func(f url.Values) (*http.Response, *goquery.Document) { return postSettings(t, c, a.srv.URL, f) }
	form := url.Values{
		"timezone": {"Europe/Berlin"}, "digest.shown": {"1"}, "digest.daily_at": {"07:30"}, "digest.weekly_at": {"16:00"},
		"digest.weekly_days": {"monday", "thursday"}, "digest.every_hours": {"2"}, "digest.monthly_day": {"31"}, "digest.monthly_at": {"09:00"},
		"types.comment.mode": {"hourly"}, "types.share.mode": {"monthly"}, "types.security.mode": {"immediate"},
	}
	if resp, doc := post(form); resp.StatusCode != http.StatusOK {
		t.Fatalf("save = %d: %s", resp.StatusCode, doc.Find(".error").Text())
	}
	got := a.mustCall(t, "GET", "/api/v1/recipients/u_bob/preferences", "", 200)["digest"].(map[string]any)
	if fmt.Sprintf("%v %v %v %v", got["weekly_days"], got["every_hours"], got["monthly_day"], got["monthly_at"]) != "[monday thursday] 2 31 09:00" {
		t.Fatalf("stored digest %v", got)
	}
	_, doc := getDoc(t, c, a.srv.URL+"/settings")
	var checked []string
	doc.Find(`input[name="digest.weekly_days"][checked]`).Each(func(_ int, s *goquery.Selection) { checked = append(checked, s.AttrOr("value", "")) })
	if strings.Join(checked, ",") != "monday,thursday" {
		t.Errorf("weekly days shown checked: %v", checked)
	}
	if v := doc.Find(`select[name="digest.monthly_day"] option[selected]`).AttrOr("value", ""); v != "31" {
		t.Errorf("monthly day shown %q", v)
	}
	if p := doc.Find(`[data-testid="preview-comment"]`).Text(); !strings.Contains(p, "every 2 hours") {
		t.Errorf("hourly type described as %q", p)
	}

	form.Del("digest.weekly_days")
	form.Set("digest.monthly_at", "")
	resp, doc := post(form)
	if resp.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("no weekly day and no monthly time = %d, want 422", resp.StatusCode)
	}
	for _, f := range []string{"digest.weekly_days", "digest.monthly_at"} {
		if doc.Find(`[data-testid="error-`+f+`"]`).Length() != 1 {
			t.Errorf("no error shown next to %s", f)
		}
	}
}

// postSettings posts the settings form as a browser would (the Origin
// header is what a browser sends with a same-origin form) and reads the
// page it answers with.
func postSettings(t *testing.T, c *http.Client, base string, f url.Values) (*http.Response, *goquery.Document) {
	t.Helper()
	req, _ := http.NewRequest("POST", base+"/settings", strings.NewReader(f.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", base)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	doc, _ := goquery.NewDocumentFromReader(resp.Body)
	return resp, doc
}

// TestSettingsFromAnOldPage: a settings page loaded before the new
// cadences (one weekly day in a select, no hourly or monthly fields)
// posts only what it showed. Left as it was, the day keeps every stored
// weekly day and the other cadences stay; a day chosen on it is the only
// one, as weekly_on alone is in the API. A hand-made "-0" or "0" is a
// period named as wrong, not a field left out.
func TestSettingsFromAnOldPage(t *testing.T) {
	t.Parallel()
	a, link := settingsSetup(t)
	c := browserClient(t)
	getDoc(t, c, link)
	const prefs = "/api/v1/recipients/u_bob/preferences"
	a.mustCall(t, "PUT", prefs, `{"digest":{"weekly_days":["monday","thursday"],"every_hours":2,"monthly_day":31,"monthly_at":"09:00"}}`, 200)
	digest := func() string {
		d := a.mustCall(t, "GET", prefs, "", 200)["digest"].(map[string]any)
		return fmt.Sprintf("%v %v %v %v", d["weekly_days"], d["every_hours"], d["monthly_day"], d["monthly_at"])
	}
	old := url.Values{"timezone": {"Europe/Berlin"}, "digest.daily_at": {"07:30"}, "digest.weekly_on": {"monday"}, "digest.weekly_at": {"16:00"},
		"types.comment.mode": {"daily"}, "types.share.mode": {"weekly"}, "types.security.mode": {"immediate"}}
	if resp, doc := postDoc(t, c, a.srv.URL+"/settings", old, ""); resp.StatusCode != http.StatusOK {
		t.Fatalf("old page save = %d: %s", resp.StatusCode, doc.Find(".error").Text())
	}
	if got := digest(); got != "[monday thursday] 2 31 09:00" {
		t.Errorf("an old page left as it was stored %s, want [monday thursday] 2 31 09:00", got)
	}
	old.Set("digest.weekly_on", "friday")
	postDoc(t, c, a.srv.URL+"/settings", old, "")
	if got := digest(); got != "[friday] 2 31 09:00" {
		t.Errorf("a day chosen on an old page stored %s, want [friday] 2 31 09:00", got)
	}
	for _, n := range []string{"-0", "0", "+0"} {
		old.Set("digest.every_hours", n)
		resp, doc := postDoc(t, c, a.srv.URL+"/settings", old, "")
		if resp.StatusCode != http.StatusUnprocessableEntity || doc.Find(`[data-testid="error-digest.every_hours"]`).Length() != 1 {
			t.Errorf("every_hours %q: %d, no error beside the field", n, resp.StatusCode)
		}
	}
}

// TestSettingsSaveWaitsForAChangeInFlight: a settings page saved while
// the API changes the recipient (here the monthly day, which a page from
// before the monthly fields does not post) waits for that change and
// keeps it, rather than writing back what it read before.
func TestSettingsSaveWaitsForAChangeInFlight(t *testing.T) {
	t.Parallel()
	a, link := settingsSetup(t)
	c := browserClient(t)
	getDoc(t, c, link)
	ctx := context.Background()
	tx, err := a.db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT 1 FROM recipients WHERE id = 'u_bob' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	old := url.Values{"timezone": {"Europe/Berlin"}, "digest.daily_at": {"07:30"}, "digest.weekly_on": {"monday"}, "digest.weekly_at": {"16:00"},
		"types.comment.mode": {"daily"}, "types.share.mode": {"weekly"}, "types.security.mode": {"immediate"}}
	done := make(chan int)
	go func() {
		req, _ := http.NewRequest("POST", a.srv.URL+"/settings", strings.NewReader(old.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		resp, err := c.Do(req)
		if err != nil {
			done <- 0
			return
		}
		resp.Body.Close()
		done <- resp.StatusCode
	}()
	// The change commits only once the save is waiting for the row.
	for waiting := 0; waiting == 0; {
		select {
		case code := <-done:
			t.Fatalf("the save finished (%d) while the recipient was locked", code)
		default:
		}
		a.db.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting)
	}
	if _, err := tx.Exec(ctx, `UPDATE recipients SET monthly_day = 15 WHERE id = 'u_bob'`); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if code := <-done; code != http.StatusOK {
		t.Fatalf("save = %d", code)
	}
	d := a.mustCall(t, "GET", "/api/v1/recipients/u_bob/preferences", "", 200)["digest"].(map[string]any)
	if d["monthly_day"] != 15.0 || d["daily_at"] != "07:30" {
		t.Errorf("after the save: monthly_day %v, daily_at %v; want 15 (kept) and 07:30 (saved)", d["monthly_day"], d["daily_at"])
	}
}

// TestSettingsCadencesByKeyboard: the weekly days are reached with Tab,
// show their focus and toggle with Space; a form saved with none ticked
// (and the monthly time cleared) moves focus to one summary, and axe
// finds nothing on the page with those errors.
func TestSettingsCadencesByKeyboard(t *testing.T) {
	t.Parallel()
	_, link := settingsSetup(t)
	ctx := browsertest.New(t)
	browsertest.Do(t, ctx, chromedp.Navigate(link), chromedp.WaitVisible(chromedp.CSS(`[data-testid="save"]`)))
	active := func() string {
		return browsertest.Eval[string](t, ctx, `(e => e.name + "=" + e.value + (e.checked ? " checked" : ""))(document.activeElement)`)
	}
	browsertest.Do(t, ctx, chromedp.Focus(chromedp.CSS(`#f-digest-daily_at`)))
	for i := 0; i < 10 && !strings.HasPrefix(active(), "digest.weekly_days="); i++ {
		browsertest.Tab(t, ctx)
	}
	first := browsertest.Eval[string](t, ctx, `document.querySelector('input[name="digest.weekly_days"]').value`)
	if got := active(); !strings.HasPrefix(got, "digest.weekly_days="+first) {
		t.Fatalf("Tab from the daily time reached %q, want the first weekly day", got)
	}
	if browsertest.Eval[string](t, ctx, `getComputedStyle(document.activeElement).outlineStyle`) == "none" {
		t.Error("a focused weekly day shows no focus")
	}
	for got := active(); strings.HasPrefix(got, "digest.weekly_days="); got = active() {
		if strings.HasSuffix(got, " checked") {
			browsertest.Do(t, ctx, chromedp.KeyEvent(" "))
		}
		browsertest.Tab(t, ctx)
	}
	if n := browsertest.Eval[int](t, ctx, `document.querySelectorAll('input[name="digest.weekly_days"]:checked').length`); n != 0 {
		t.Fatalf("%d weekly days still ticked after Space on each", n)
	}
	browsertest.Do(t, ctx, chromedp.SetValue(chromedp.CSS(`#f-digest-monthly_at`), ""),
		chromedp.Focus(chromedp.CSS(`[data-testid="save"]`)), chromedp.KeyEvent("\r"),
		chromedp.WaitReady(chromedp.CSS(`[data-testid="error-digest.weekly_days"]`)))
	if role := browsertest.Eval[string](t, ctx, `document.activeElement.getAttribute("role") || ""`); role != "alert" {
		t.Errorf("after a refused save focus is on %q, want the one error summary", role)
	}
	if n := browsertest.Eval[int](t, ctx, `document.querySelectorAll('[role="alert"]').length`); n != 1 {
		t.Errorf("%d alerts on the page, want 1", n)
	}
	for _, v := range browsertest.Axe(t, ctx) {
		t.Errorf("settings with cadence errors: %s", v)
	}
}

// TestSettingsDigestFieldsSayWhichDigest: each digest field's name, as a
// screen reader reads it (its label, inside its group's legend), says
// which digest it sets; two inputs called just "at" do not.
func TestSettingsDigestFieldsSayWhichDigest(t *testing.T) {
	t.Parallel()
	_, link := settingsSetup(t)
	_, doc := getDoc(t, browserClient(t), link)
	want := map[string]string{"digest.every_hours": "every", "digest.daily_at": "daily", "digest.weekly_days": "weekly",
		"digest.weekly_at": "weekly", "digest.monthly_day": "monthly", "digest.monthly_at": "monthly"}
	for name, word := range want {
		field := doc.Find(`[name="` + name + `"]`).First()
		label := doc.Find(`label[for="` + field.AttrOr("id", "-") + `"]`).Text()
		if label == "" {
			label = field.Parent().Text()
		}
		name := strings.ToLower(field.Closest("fieldset").Find("legend").Text() + " " + label)
		if !strings.Contains(name, word) {
			t.Errorf("%s is read as %q, which does not say %q", field.AttrOr("name", ""), strings.Join(strings.Fields(name), " "), word)
		}
	}
}

// TestSettingsListsStoppedThreads: the conversations a recipient stopped
// are listed on the settings page, and one click turns one back on.
func TestSettingsListsStoppedThreads(t *testing.T) {
	t.Parallel()
	a, link := settingsSetup(t)
	ctx := context.Background()
	for _, key := range []string{"comment+document:7", "comment+document:8"} {
		if err := a.db.InTx(ctx, func(tx pgx.Tx) error { _, err := db.MuteThread(ctx, tx, "u_bob", key); return err }); err != nil {
			t.Fatal(err)
		}
	}
	c := browserClient(t)
	getDoc(t, c, link)
	_, doc := getDoc(t, c, a.srv.URL+"/settings")
	var shown []string
	doc.Find(`[data-testid="muted-threads"] [data-testid="unmute"]`).Each(func(_ int, s *goquery.Selection) { shown = append(shown, s.AttrOr("value", "")) })
	if len(shown) != 2 || !strings.Contains(doc.Find(`[data-testid="muted-threads"]`).Text(), "document:7") {
		t.Fatalf("stopped threads shown: %v", shown)
	}
	resp, doc := postDoc(t, c, a.srv.URL+"/settings/threads", url.Values{"thread": {"comment+document:7"}}, "")
	if resp.StatusCode != http.StatusOK || !strings.Contains(doc.Find(`[data-testid="flash"]`).Text(), "again") {
		t.Fatalf("turning a thread back on: %d %q", resp.StatusCode, doc.Find(`[data-testid="flash"]`).Text())
	}
	if n := countRows(t, a.db, "SELECT count(*) FROM muted_threads WHERE recipient_id = 'u_bob'"); n != 1 {
		t.Fatalf("%d threads still stopped, want 1", n)
	}
	// Another recipient's session cannot turn bob's thread back on.
	stranger := browserClient(t)
	if resp, _ := postDoc(t, stranger, a.srv.URL+"/settings/threads", url.Values{"thread": {"comment+document:8"}}, ""); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("without a session: %d", resp.StatusCode)
	}
}
