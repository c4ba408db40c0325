package web_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/chromedp/chromedp"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/mailtemplates"
	"github.com/lull-dev/lull/web/browsertest"
)

// acmeBrand is the brand an operator saves in the console.
var acmeBrand = url.Values{"product_name": {"Acme Docs"}, "product_url": {"https://docs.acme.example/"},
	"logo_url": {"https://cdn.acme.example/logo.png"}, "color": {"#0F5132"}, "from_name": {"Acme Docs Notifications"}}

// brandSetup is a recipient with a type of each kind (one required) and
// an operator who saved the Acme brand.
func brandSetup(t *testing.T) *apiBundle {
	t.Helper()
	a := setupAPI(t)
	if err := db.UpsertOperator(context.Background(), a.db.Pool, "ops@example.com", "correct horse"); err != nil {
		t.Fatal(err)
	}
	a.mustCall(t, "PUT", "/api/v1/types/comment", `{"name":"Comments","default_mode":"immediate"}`, 200)
	a.mustCall(t, "PUT", "/api/v1/types/share", `{"name":"Shares","default_mode":"daily"}`, 200)
	a.mustCall(t, "PUT", "/api/v1/types/security", `{"name":"Security alerts","required":true}`, 200)
	a.mustCall(t, "PUT", "/api/v1/recipients/u_bob", `{"email":"bob@example.com","name":"Bob"}`, 200)
	ops := operatorClient(t, a)
	if resp := postForm(t, ops, a.srv.URL+"/admin/brand", acmeBrand); resp.Request.URL.Path != "/admin/brand" || resp.StatusCode != 200 {
		t.Fatalf("saving the brand landed on %s with %d", resp.Request.URL.Path, resp.StatusCode)
	}
	return a
}

// wearsBrand checks a recipient page: the brand in its title and header,
// its colour's stylesheet, its logo allowed by the page's policy, and
// "lull" nowhere in it.
func wearsBrand(t *testing.T, what string, resp *http.Response, doc *goquery.Document) {
	t.Helper()
	html, _ := doc.Html()
	if i := strings.Index(strings.ToLower(html), "lull"); i >= 0 {
		t.Errorf("%s says lull: …%s…", what, html[max(0, i-80):min(len(html), i+80)])
	}
	if title := doc.Find("title").Text(); !strings.HasSuffix(title, " · Acme Docs") {
		t.Errorf("%s: title %q", what, title)
	}
	brand := doc.Find(`header [data-testid=brand]`)
	if href, _ := brand.Attr("href"); strings.TrimSpace(brand.Text()) != "Acme Docs" || href != "https://docs.acme.example/" {
		t.Errorf("%s: header brand %q linking to %q", what, brand.Text(), href)
	}
	if alt, _ := brand.Find("img").Attr("alt"); alt != "Acme Docs" {
		t.Errorf("%s: logo alt %q", what, alt)
	}
	if doc.Find(`link[href="/brand.css?c=0f5132"]`).Length() != 1 {
		t.Errorf("%s: no brand stylesheet", what)
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "img-src 'self' data: https://cdn.acme.example;") {
		t.Errorf("%s: the policy does not allow the logo: %s", what, csp)
	}
}

// TestBrandReachesEveryRecipient saves a brand in the console and finds
// it, and no "lull", in an email as it is sent and on every recipient
// page: settings, unsubscribe (ask, done, undo) and an error page.
func TestBrandReachesEveryRecipient(t *testing.T) {
	t.Parallel()
	a := brandSetup(t)

	batch := a.mustCall(t, "POST", "/api/v1/events", `{"type":"comment","actor":{"id":"u_al","name":"Alice"},
		"object":{"title":"Q3 plan","url":"https://docs.acme.example/d/7"},"recipients":["u_bob"]}`, 202)
	id := int64(batch["batches"].([]any)[0].(map[string]any)["id"].(float64))
	a.workFlush(t, id)
	sent, err := db.ListOutbox(context.Background(), a.db.Pool, id, 0, 1)
	if err != nil || len(sent) != 1 {
		t.Fatalf("outbox: %v %v", sent, err)
	}
	m := sent[0]
	for part, s := range map[string]string{"subject": m.Subject, "html": m.HTML, "text": m.Text} {
		// The test server's own address is lull.test; a real one is the
		// operator's LULL_BASE_URL.
		if strings.Contains(strings.ToLower(strings.ReplaceAll(s, "http://lull.test/", "")), "lull") {
			t.Errorf("the email's %s says lull:\n%s", part, s)
		}
	}
	if !strings.Contains(m.Headers["From"], "Acme Docs Notifications") || !strings.Contains(m.Text, "Sent by Acme Docs to bob@example.com.") {
		t.Errorf("the email does not speak for Acme Docs: From %q\n%s", m.Headers["From"], m.Text)
	}

	bob := browserClient(t)
	settings := a.mustCall(t, "POST", "/api/v1/recipients/u_bob/preferences-link", "", 200)["url"].(string)
	resp, doc := getDoc(t, bob, strings.Replace(settings, "http://lull.test", a.srv.URL, 1))
	wearsBrand(t, "settings", resp, doc)

	email, err := goquery.NewDocumentFromReader(strings.NewReader(m.HTML))
	if err != nil {
		t.Fatal(err)
	}
	link, _ := email.Find(`[data-testid=unsubscribe-link]`).Attr("href")
	link = strings.Replace(link, "http://lull.test", a.srv.URL, 1)
	resp, doc = getDoc(t, bob, link)
	wearsBrand(t, "unsubscribe", resp, doc)
	if h1 := doc.Find("h1").Text(); h1 != "Stop emails about Comments?" || !strings.Contains(doc.Text(), "bob@example.com") {
		t.Errorf("unsubscribe asks %q", h1)
	}

	resp, doc = postDoc(t, bob, link, nil, "")
	wearsBrand(t, "unsubscribed", resp, doc)
	undo, _ := doc.Find(`[data-testid=undo]`).Closest("form").Attr("action")
	resp, doc = postDoc(t, bob, a.srv.URL+undo, nil, "")
	wearsBrand(t, "undone", resp, doc)

	resp, doc = getDoc(t, bob, link+"x")
	wearsBrand(t, "a broken link", resp, doc)
}

// TestBrandPageRefusesBadValues: each bad field gets its message beside
// it, the form keeps what was typed, and nothing is stored.
func TestBrandPageRefusesBadValues(t *testing.T) {
	t.Parallel()
	a := brandSetup(t)
	ops := operatorClient(t, a)
	bad := url.Values{"product_name": {strings.Repeat("A", 61)}, "product_url": {"javascript:alert(1)"},
		"logo_url": {"ftp://cdn.acme.example/logo.png"}, "color": {"#ffeb3b"}, "from_name": {"Acme"}}
	resp, doc := postDoc(t, ops, a.srv.URL+"/admin/brand", bad, "")
	if resp.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("bad brand = %d, want 422", resp.StatusCode)
	}
	for _, f := range []string{"product_name", "product_url", "logo_url", "color"} {
		msg := doc.Find(`[data-testid="error-` + f + `"]`)
		if msg.Length() != 1 || msg.Parent().Find(`input[name="`+f+`"]`).Length() != 1 {
			t.Errorf("%s: no message beside the field", f)
		}
		if v, _ := doc.Find(`input[name="` + f + `"]`).Attr("value"); v != bad.Get(f) {
			t.Errorf("%s: the form lost %q (shows %q)", f, bad.Get(f), v)
		}
	}
	if doc.Find(`[data-testid="error-from_name"]`).Length() != 0 {
		t.Error("a good field was refused")
	}
	_, doc = getDoc(t, ops, a.srv.URL+"/admin/brand")
	if v, _ := doc.Find(`input[name="product_name"]`).Attr("value"); v != "Acme Docs" {
		t.Errorf("after a refused save the stored name is %q", v)
	}
}

// TestUnsubscribeStopsTheEmailsTypes: the one-click link of an email
// stops the types that email showed and nothing else (a required type
// keeps coming); "everything" is one click further; undo puts back what
// was there; and a link signed before links named types still
// unsubscribes from everything, by one-click POST as by the page.
func TestUnsubscribeStopsTheEmailsTypes(t *testing.T) {
	t.Parallel()
	a := brandSetup(t)
	a.mustCall(t, "PUT", "/api/v1/recipients/u_bob/preferences", `{"types":{"comment":{"mode":"cooldown","window":"15m"}}}`, 200)
	modes := func() string {
		var s string
		err := a.db.Pool.QueryRow(context.Background(), `
			SELECT string_agg(type_key || '=' || mode || coalesce('/' || window_ms, ''), ' ' ORDER BY type_key) || ' all=' || bool_or(r.unsubscribed)
			FROM recipients r LEFT JOIN type_preferences p ON p.recipient_id = r.id WHERE r.id = 'u_bob' GROUP BY r.id`).Scan(&s)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	before := modes()
	local := func(u string) string { return strings.Replace(u, "http://lull.test", a.srv.URL, 1) }
	oneClick := func(link string) {
		t.Helper()
		resp, err := http.Post(local(link), "application/x-www-form-urlencoded", strings.NewReader("List-Unsubscribe=One-Click"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("one-click = %d", resp.StatusCode)
		}
	}

	// A digest's link names its types; one is required.
	link := a.web.Links.UnsubscribeURL("u_bob", []string{"comment", "share", "security"}, time.Now())
	bob := browserClient(t)
	resp, doc := postDoc(t, bob, local(link), nil, "")
	done := doc.Find(`[data-testid=done]`)
	if resp.StatusCode != 200 || done.HasClass("problem") || !done.HasClass("done") ||
		!strings.Contains(done.Text(), "bob@example.com will no longer get emails about Comments and Shares.") ||
		!strings.Contains(done.Text(), "Security alerts cannot be turned off") {
		t.Fatalf("done page %d: %q", resp.StatusCode, done.Text())
	}
	if got := modes(); got != "comment=never/900000 share=never all=false" {
		t.Fatalf("after the page's button: %s, want comments and shares off, security on, not unsubscribed from all", got)
	}
	if href, _ := doc.Find(`[data-testid=settings-link]`).Attr("href"); !strings.HasPrefix(href, "/settings/enter?token=") {
		t.Errorf("settings link %q", href)
	}
	undo, _ := doc.Find(`[data-testid=undo]`).Closest("form").Attr("action")
	everything, _ := doc.Find(`[data-testid=unsubscribe-all]`).Closest("form").Attr("action")

	// Everything, one click further, and its own undo.
	_, doc = postDoc(t, bob, a.srv.URL+everything, url.Values{"scope": {"all"}}, "")
	if got := modes(); !strings.HasSuffix(got, "all=true") {
		t.Fatalf("everything: %s", got)
	}
	undoAll, _ := doc.Find(`[data-testid=undo]`).Closest("form").Attr("action")
	if doc.Find(`[data-testid=unsubscribe-all]`).Length() != 0 {
		t.Error("after everything, the page still offers everything")
	}
	postDoc(t, bob, a.srv.URL+undoAll, nil, "")
	postDoc(t, bob, a.srv.URL+undo, nil, "")
	if got := modes(); got != before {
		t.Fatalf("after both undos: %s, want %s as before", got, before)
	}

	// The same by one-click POST, as a mail client sends it.
	oneClick(link)
	if got := modes(); got != "comment=never/900000 share=never all=false" {
		t.Fatalf("after one-click: %s", got)
	}
	// Clicked again in the browser, the types are off already; undo
	// still turns them back on (to the types' defaults).
	_, doc = postDoc(t, bob, local(link), nil, "")
	undo, _ = doc.Find(`[data-testid=undo]`).Closest("form").Attr("action")
	postDoc(t, bob, a.srv.URL+undo, nil, "")
	if got := modes(); strings.Contains(got, "never") {
		t.Fatalf("undo after one-click: %s, want the types on", got)
	}

	// A link as every email sent before this change carried it.
	old := a.web.Links.Token(mailtemplates.PurposeUnsubscribe, "u_bob", time.Now().Add(24*time.Hour))
	oneClick("http://lull.test/unsubscribe?token=" + url.QueryEscape(old))
	if got := modes(); !strings.HasSuffix(got, "all=true") {
		t.Fatalf("old link: %s, want unsubscribed from all", got)
	}
}

// acmeLogo is a small mark in the brand's colour.
const acmeLogo = `<svg xmlns="http://www.w3.org/2000/svg" width="28" height="28" viewBox="0 0 28 28">` +
	`<rect width="28" height="28" rx="6" fill="#0f5132"/><path d="M8 21 14 7l6 14M10.5 16h7" stroke="#fff" stroke-width="2.4" fill="none"/></svg>`

// TestBrandInBrowser opens a branded email and unsubscribes from it in
// Chromium: the logo loads (the page's policy allows its origin), the
// done page shows, and both are kept as screenshots for the README.
func TestBrandInBrowser(t *testing.T) {
	t.Parallel()
	var email string
	host := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/logo.svg" {
			w.Header().Set("Content-Type", "image/svg+xml")
			w.Write([]byte(acmeLogo))
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Write([]byte(email))
	}))
	t.Cleanup(host.Close)
	brand := url.Values{}
	for k, v := range acmeBrand {
		brand[k] = v
	}
	brand.Set("logo_url", host.URL+"/logo.svg")
	a := setupAPI(t)
	if err := db.UpsertOperator(context.Background(), a.db.Pool, "ops@example.com", "correct horse"); err != nil {
		t.Fatal(err)
	}
	a.mustCall(t, "PUT", "/api/v1/types/comment", `{"name":"Comments","default_mode":"immediate",
		"group_text":"{{actors}} commented on {{object.title}}|{{actors}} left {{count}} comments on {{object.title}}"}`, 200)
	a.mustCall(t, "PUT", "/api/v1/recipients/u_bob", `{"email":"bob@example.com","name":"Bob"}`, 200)
	postForm(t, operatorClient(t, a), a.srv.URL+"/admin/brand", brand)
	res := a.mustCall(t, "POST", "/api/v1/events", `{"type":"comment","actor":{"id":"u_al","name":"Alice"},
		"object":{"title":"Q3 plan","url":"https://docs.acme.example/d/7"},"data":{},"recipients":["u_bob"]}`, 202)
	id := int64(res["batches"].([]any)[0].(map[string]any)["id"].(float64))
	a.workFlush(t, id)
	sent, err := db.ListOutbox(context.Background(), a.db.Pool, id, 0, 1)
	if err != nil || len(sent) != 1 {
		t.Fatalf("outbox: %v %v", sent, err)
	}
	email = strings.ReplaceAll(sent[0].HTML, "http://lull.test", a.srv.URL)

	ctx := browsertest.New(t)
	// The logo's load event decides, not a moment's look at it.
	logoLoaded := func() bool {
		v, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`new Promise(done => {
			const i = document.querySelector('[data-testid=brand] img');
			if (!i) return done(false);
			if (i.complete) return done(i.naturalWidth > 0);
			i.onload = () => done(true); i.onerror = () => done(false);
		})`, chromedp.EvalAwaitPromise))
		return err == nil && v
	}
	browsertest.Do(t, ctx, chromedp.Navigate(host.URL+"/email"), chromedp.WaitVisible(chromedp.CSS(`[data-testid=unsubscribe-link]`)))
	if !logoLoaded() {
		t.Error("the email's logo did not load")
	}
	browsertest.Screenshot(t, ctx, "branded-email.png")
	// Clicked from the page's own script: a click by node id failed now
	// and then with "Could not find node with given id" when the page's
	// document changed between finding the node and clicking it.
	browsertest.Eval[bool](t, ctx, `(document.querySelector('[data-testid=unsubscribe-link]').click(), true)`)
	browsertest.Do(t, ctx, chromedp.WaitVisible(chromedp.CSS(`[data-testid=unsubscribe]`)))
	browsertest.Eval[bool](t, ctx, `(document.querySelector('[data-testid=unsubscribe]').click(), true)`)
	browsertest.Do(t, ctx, chromedp.WaitVisible(chromedp.CSS(`[data-testid=done]`)))
	if !logoLoaded() {
		t.Error("the page's logo did not load: is its origin allowed?")
	}
	if got := browsertest.Eval[string](t, ctx, `getComputedStyle(document.querySelector('[data-testid=done]')).borderLeftColor`); got == "rgb(185, 28, 28)" {
		t.Error("the done page wears the error colour")
	}
	if got := browsertest.Eval[string](t, ctx, `getComputedStyle(document.querySelector('a[data-testid=settings-link]')).color`); got != "rgb(15, 81, 50)" {
		t.Errorf("links are %s, not the brand's colour", got)
	}
	browsertest.Screenshot(t, ctx, "unsubscribed.png")
}

// TestUnsubscribeLinkIsNoKeyToSettings: an unsubscribe link works for 90
// days, a settings link for 7; the page after an old unsubscribe link
// must not hand out a fresh way into the settings.
func TestUnsubscribeLinkIsNoKeyToSettings(t *testing.T) {
	t.Parallel()
	a := brandSetup(t)
	for _, c := range []struct {
		age      time.Duration
		settings bool
	}{{time.Hour, true}, {30 * 24 * time.Hour, false}} {
		link := a.web.Links.UnsubscribeURL("u_bob", []string{"comment"}, time.Now().Add(-c.age))
		_, doc := postDoc(t, browserClient(t), strings.Replace(link, "http://lull.test", a.srv.URL, 1), nil, "")
		if got := doc.Find(`[data-testid=settings-link]`).Length() == 1; got != c.settings {
			t.Errorf("a link %v old: settings link shown %v, want %v", c.age, got, c.settings)
		}
		undo, _ := doc.Find(`[data-testid=undo]`).Closest("form").Attr("action")
		_, doc = postDoc(t, browserClient(t), a.srv.URL+undo, nil, "")
		if got := doc.Find(`[data-testid=settings-link]`).Length() == 1; got != c.settings || !strings.Contains(doc.Text(), "Undone") {
			t.Errorf("undo of a link %v old: settings link shown %v, want %v", c.age, got, c.settings)
		}
	}
}

// TestUnsubscribeFromOnlyRequiredTypes: a link whose types are all
// required changes nothing and says so, offering everything instead.
func TestUnsubscribeFromOnlyRequiredTypes(t *testing.T) {
	t.Parallel()
	a := brandSetup(t)
	link := a.web.Links.UnsubscribeURL("u_bob", []string{"security", "gone.type"}, time.Now())
	_, doc := postDoc(t, browserClient(t), strings.Replace(link, "http://lull.test", a.srv.URL, 1), nil, "")
	if h1 := doc.Find("h1").Text(); h1 != "Nothing to unsubscribe from" || doc.Find(`[data-testid=unsubscribe-all]`).Length() != 1 {
		t.Errorf("page says %q", h1)
	}
	if n := countRows(t, a.db, "SELECT count(*) FROM type_preferences WHERE recipient_id = 'u_bob'"); n != 0 {
		t.Errorf("%d preferences written", n)
	}
}

// TestUnsubscribeFromAThread: a type that unsubscribes by thread gives
// its emails a link that stops only their thread (the batch key), as
// GitHub's do; later batches of that thread are canceled with the
// reason "muted thread", other threads still arrive, and undo brings the
// thread back.
func TestUnsubscribeFromAThread(t *testing.T) {
	t.Parallel()
	a := brandSetup(t)
	a.mustCall(t, "PUT", "/api/v1/types/comment", `{"name":"Comments","default_mode":"immediate","unsubscribe":"thread"}`, 200)
	if got := a.mustCall(t, "GET", "/api/v1/types/comment", "", 200)["unsubscribe"]; got != "thread" {
		t.Fatalf("type answers unsubscribe %v", got)
	}
	if _, p := a.call(t, "PUT", "/api/v1/types/comment", `{"unsubscribe":"everything"}`); fieldOf(p) != "unsubscribe" {
		t.Errorf("a bad unsubscribe choice: %v", p)
	}
	send := func(thread string) (int64, string) {
		t.Helper()
		id := a.postEvent(t, "comment", "Alice", thread)
		a.workFlush(t, id)
		var state, reason string
		if err := a.db.Pool.QueryRow(context.Background(), `SELECT state, reason FROM batches WHERE id = $1`, id).Scan(&state, &reason); err != nil {
			t.Fatal(err)
		}
		return id, state + " " + reason
	}
	id, got := send("doc:7")
	if got != "sent " {
		t.Fatalf("first email: %s", got)
	}
	sent, err := db.ListOutbox(context.Background(), a.db.Pool, id, 0, 1)
	if err != nil || len(sent) != 1 {
		t.Fatal(sent, err)
	}
	email, _ := goquery.NewDocumentFromReader(strings.NewReader(sent[0].HTML))
	link, _ := email.Find(`[data-testid=unsubscribe-link]`).Attr("href")
	if label := email.Find(`[data-testid=unsubscribe-link]`).Text(); label != "Unsubscribe from this thread" ||
		!strings.Contains(sent[0].Text, "Unsubscribe from this thread:\n<") {
		t.Errorf("footer says %q", label)
	}
	if sent[0].Headers["List-Unsubscribe"] != "<"+link+">" {
		t.Errorf("header %q and footer %q differ", sent[0].Headers["List-Unsubscribe"], link)
	}
	link = strings.Replace(link, "http://lull.test", a.srv.URL, 1)

	bob := browserClient(t)
	_, doc := getDoc(t, bob, link)
	if h1 := doc.Find("h1").Text(); h1 != "Stop emails about this thread?" {
		t.Errorf("the link asks %q", h1)
	}
	resp, err := http.Post(link, "application/x-www-form-urlencoded", strings.NewReader("List-Unsubscribe=One-Click"))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("one-click: %v %v", resp, err)
	}
	resp.Body.Close()
	// The muted thread's next comment opens no batch: the skip log
	// says why.
	res := a.mustCall(t, "POST", "/api/v1/events", `{"type":"comment","actor":{"id":"a","name":"Alice"},
		"object":{"title":"Q3 plan"},"batch_key":"doc:7","recipients":["u_bob"]}`, 202)
	if len(res["batches"].([]any)) != 0 || res["suppressed"] != float64(1) {
		t.Errorf("the muted thread's next comment: %v", res)
	}
	if n := countRows(t, a.db, "SELECT count(*) FROM skips WHERE recipient_id = 'u_bob' AND reason = 'muted thread'"); n != 1 {
		t.Errorf("%d muted-thread skips, want 1", n)
	}
	if _, got := send("doc:8"); got != "sent " {
		t.Errorf("another thread: %s", got)
	}
	if n := countRows(t, a.db, "SELECT count(*) FROM type_preferences WHERE recipient_id = 'u_bob'"); n != 0 {
		t.Errorf("the type was turned off too (%d preferences)", n)
	}

	_, doc = postDoc(t, bob, link, nil, "")
	if text := doc.Find(`[data-testid=done]`).Text(); !strings.Contains(text, "bob@example.com will no longer get emails about this thread. Other Comments still arrive.") {
		t.Errorf("done page: %q", text)
	}
	undo, _ := doc.Find(`[data-testid=undo]`).Closest("form").Attr("action")
	postDoc(t, bob, a.srv.URL+undo, nil, "")
	if _, got := send("doc:7"); got != "sent " {
		t.Errorf("after undo: %s", got)
	}
}

// TestConsoleTypeEditKeepsUnsubscribe: the console's type form has no
// unsubscribe field, so saving it must keep the API's choice.
func TestConsoleTypeEditKeepsUnsubscribe(t *testing.T) {
	t.Parallel()
	a := brandSetup(t)
	a.mustCall(t, "PUT", "/api/v1/types/comment", `{"name":"Comments","unsubscribe":"thread"}`, 200)
	postForm(t, operatorClient(t, a), a.srv.URL+"/admin/types/comment/edit", url.Values{"name": {"Comments"}, "default_mode": {"immediate"},
		"window": {"5m"}, "max_wait": {"1h"}, "max_items": {"0"}, "display_limit": {"10"}, "item_order": {"latest"}, "do": {"save"}})
	if got := a.mustCall(t, "GET", "/api/v1/types/comment", "", 200)["unsubscribe"]; got != "thread" {
		t.Errorf("after a console save: unsubscribe %v", got)
	}
}
