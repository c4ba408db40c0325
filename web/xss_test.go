package web_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/lull-dev/lull/web/browsertest"
)

// xssPayload tries every way of running script that escaping must stop:
// a script element, event handlers on injected elements, breaking out of
// an attribute, of a JS string, of <title>, <textarea> and <style>, a
// javascript: link and an iframe with script inside. Each would set
// window.__xss.
const xssPayload = `<script>window.__xss=1</script><img src=x onerror="window.__xss=2">` +
	`"><svg onload="window.__xss=3"></svg>'-(window.__xss=4)-'</title></textarea></style>` +
	`<script>window.__xss=5</script><a href="javascript:window.__xss=6">x</a>` +
	`<iframe srcdoc="<script>parent.__xss=7</script>"></iframe>`

// xssShort fits fields with a tighter length limit (type name, category,
// recipient id, batch key).
const xssShort = `<img src=x onerror="window.__xss=8"><script>window.__xss=9</script>`

// xssSetup fills a console with hostile data everywhere data can go: a
// type whose name, description, category and texts are payloads, a
// recipient whose id and name are, and events with a payload in every
// field (the object URL a javascript: one). Bob's batch is flushed to the
// outbox; the hostile recipient's stays open.
func xssSetup(t *testing.T) (a *apiBundle, hostile string, open, sent int64) {
	t.Helper()
	a, _ = consoleSetup(t)
	put := func(path string, v any) map[string]any {
		b, _ := json.Marshal(v)
		return a.mustCall(t, "PUT", path, string(b), 200)
	}
	put("/api/v1/types/xss", map[string]any{"name": xssShort, "description": xssPayload, "category": xssShort, "default_mode": "cooldown",
		"window": "1h", "item_text": "{{actor.name}} " + xssPayload + " {{object.title}} {{data.excerpt}} {{object.url}}",
		"group_text": xssPayload + " {{actors}} on {{object.title}}|" + xssPayload + " {{count}} by {{actors}}"})
	hostile = "u_" + xssShort
	for i, url := range []string{"javascript:window.__xss=10", `https://app.example/doc?q="><script>window.__xss=11</script>`} {
		ev := map[string]any{"type": "xss", "key": xssShort + strconv.Itoa(i), "batch_key": xssShort,
			"actor":      map[string]any{"id": xssShort, "name": xssPayload},
			"object":     map[string]any{"type": xssShort, "id": xssShort, "title": xssPayload, "url": url},
			"data":       map[string]any{"excerpt": xssPayload, xssShort: xssPayload, "list": []any{xssPayload}},
			"recipients": []any{map[string]any{"id": hostile, "email": "hostile@example.com", "name": xssPayload}, map[string]any{"id": "u_bob", "email": "bob@example.com", "name": xssPayload}},
		}
		b, _ := json.Marshal(ev)
		res := a.mustCall(t, "POST", "/api/v1/events", string(b), 202)
		for _, br := range res["batches"].([]any) {
			m := br.(map[string]any)
			if m["recipient"] == hostile {
				open = int64(m["id"].(float64))
			} else {
				sent = int64(m["id"].(float64))
			}
		}
	}
	flushNow(t, a, sent)
	if n := countRows(t, a.db, "SELECT count(*) FROM outbox"); n != 1 {
		t.Fatalf("%d emails in the outbox, want 1", n)
	}
	return a, hostile, open, sent
}

// inertCheck is JavaScript that reports, as one line, whether anything
// ran or could run: window.__xss, inline scripts, on* attributes and
// javascript: URLs anywhere in the document.
const inertCheck = `(() => {
	const all = [...document.querySelectorAll('*')];
	const handlers = all.filter(e => [...e.attributes].some(a => a.name.toLowerCase().startsWith('on'))).length;
	const js = all.filter(e => ['href', 'src', 'action', 'formaction', 'srcdoc'].some(n => /^\s*javascript:|<script/i.test(e.getAttribute(n) || ''))).length;
	const inline = document.querySelectorAll('script:not([src])').length;
	return 'xss=' + (typeof window.__xss === 'undefined' ? 'none' : window.__xss) + ' inline=' + inline + ' handlers=' + handlers + ' js=' + js;
})()`

const inert = "xss=none inline=0 handlers=0 js=0"

// TestXSSNothingRunsAnywhere posts script and HTML payloads into every
// event field, the type's name and texts and the recipient's id and name,
// then opens every page that shows them in headless Chromium: the
// recipient's settings page, the console's dashboard, batch list (also
// filtered by the hostile recipient), batch detail, preview (with its
// email frame), types, type preview and edit form, recipient lookup,
// outbox list and email, and the feed API's JSON. On each, no payload ran,
// no element carries an event handler or a javascript: URL, and the
// payload's text is visible where the page shows event data, so the test
// would see an escaping failure. Each page's HTML and each email's HTML is
// also written into a blank page with no Content-Security-Policy, so
// escaping is checked on its own, not only behind the CSP.
func TestXSSNothingRunsAnywhere(t *testing.T) {
	t.Parallel()
	a, hostile, open, sent := xssSetup(t)
	ctx := browsertest.New(t)
	base := a.srv.URL
	var outboxID int64
	a.db.Pool.QueryRow(context.Background(), `SELECT id FROM outbox`).Scan(&outboxID)

	// The recipient's settings page, through the hostile recipient's link.
	link := a.mustCall(t, "POST", "/api/v1/recipients/"+url.PathEscape(hostile)+"/preferences-link", "", 200)["url"].(string)
	link = strings.Replace(link, "http://lull.test", base, 1)
	check := func(t *testing.T, what string, showsData bool) {
		t.Helper()
		time.Sleep(150 * time.Millisecond) // let any onerror or onload fire
		if got := browsertest.Eval[string](t, ctx, inertCheck); got != inert {
			t.Errorf("%s: %s", what, got)
		}
		if showsData {
			shown := `document.body.innerText + [...document.querySelectorAll('input, textarea')].map(e => e.value).join(' ')`
			if text := browsertest.Eval[string](t, ctx, shown); !strings.Contains(text, "window.__xss=") {
				t.Errorf("%s: the payload is not shown as text, so escaping was not exercised:\n%.400s", what, text)
			}
		}
	}
	browsertest.Do(t, ctx, chromedp.Navigate(link))
	browsertest.WaitURL(t, ctx, "/settings")
	check(t, "settings page", true)

	// The console.
	browsertest.Do(t, ctx,
		chromedp.Navigate(base+"/admin/login"),
		chromedp.WaitVisible(chromedp.CSS(`#email`)),
		chromedp.SendKeys(chromedp.CSS(`#email`), "ops@example.com"),
		chromedp.SendKeys(chromedp.CSS(`#password`), "correct horse"),
		chromedp.Click(chromedp.CSS(`[data-testid="login"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="chart"]`)),
	)
	pages := []struct {
		path      string
		showsData bool
	}{
		{"/admin", false},
		{"/admin/batches", true},
		{"/admin/batches?recipient=" + url.QueryEscape(hostile), true},
		{"/admin/batches/" + itoa(open), true},
		{"/admin/batches/" + itoa(sent), true},
		{"/admin/batches/" + itoa(open) + "/preview", true},
		{"/admin/batches/" + itoa(sent) + "/preview", true},
		{"/admin/types", true},
		{"/admin/types/xss/preview", true},
		{"/admin/types/xss/edit", true},
		{"/admin/recipients?id=" + url.QueryEscape(hostile), true},
		{"/admin/outbox", true},
		{"/admin/outbox/" + itoa(outboxID), true},
		{"/admin/jobs", false},
	}
	for _, p := range pages {
		browsertest.Do(t, ctx, chromedp.Navigate(base+p.path))
		browsertest.WaitURL(t, ctx, strings.SplitN(p.path, "?", 2)[0])
		check(t, p.path, p.showsData)
	}

	// The same pages' markup and the emails' HTML, without the CSP: what
	// the escaping alone achieves. The emails matter most, since mail
	// clients apply no policy of ours.
	c := operatorClient(t, a)
	bodies := map[string]string{}
	for _, p := range append(pages, struct {
		path      string
		showsData bool
	}{"/admin/batches/" + itoa(sent) + "/preview/html", true}, struct {
		path      string
		showsData bool
	}{"/admin/outbox/" + itoa(outboxID) + "/html", true}, struct {
		path      string
		showsData bool
	}{"/admin/batches/" + itoa(open) + "/preview/html", true}) {
		resp, err := c.Get(base + p.path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		bodies[p.path] = string(b)
	}
	settings := browserClient(t)
	resp, err := settings.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	bodies["settings page"] = string(b)
	for what, html := range bodies {
		browsertest.Do(t, ctx, chromedp.Navigate("about:blank"))
		quoted, _ := json.Marshal(html)
		browsertest.Eval[bool](t, ctx, `document.open(); document.write(`+string(quoted)+`); document.close(); true`)
		check(t, what+" (markup alone, no CSP)", strings.Contains(what, "/html") || what == "settings page")
	}

	// The feed API answers JSON that no browser renders as HTML.
	req, _ := http.NewRequest("GET", base+"/api/v1/recipients/"+url.PathEscape(hostile)+"/feed", nil)
	req.Header.Set("Authorization", "Bearer "+testKey)
	fresp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	feed, _ := io.ReadAll(fresp.Body)
	fresp.Body.Close()
	if fresp.Header.Get("Content-Type") != "application/json" || fresp.Header.Get("X-Content-Type-Options") != "nosniff" ||
		strings.ContainsAny(string(feed), "<>") || !strings.Contains(string(feed), `window.__xss=`) {
		t.Errorf("feed answered %s (%s) with <, > unescaped or no payload: %.300s", fresp.Header.Get("Content-Type"), fresp.Header.Get("X-Content-Type-Options"), feed)
	}
	browsertest.Do(t, ctx, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		if _, err := cdp.Call(ctx, tg, network.Enable, network.EnableParams{}); err != nil {
			return err
		}
		_, err := cdp.Call(ctx, tg, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{Headers: network.Headers{"Authorization": "Bearer " + testKey}})
		return err
	}), chromedp.Navigate(base+"/api/v1/recipients/"+url.PathEscape(hostile)+"/feed"))
	check(t, "feed API in the browser", true)
}
