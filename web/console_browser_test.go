package web_test

import (
	"context"
	"net/http"
	"net/url"
	"path"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/web/browsertest"
)

// consoleBrowser logs an operator in through the form and returns the tab.
func consoleBrowser(t *testing.T, a *apiBundle) context.Context {
	t.Helper()
	ctx := browsertest.New(t)
	browsertest.Do(t, ctx,
		chromedp.Navigate(a.srv.URL+"/admin/login"),
		chromedp.WaitVisible(chromedp.CSS(`#email`)),
		chromedp.SendKeys(chromedp.CSS(`#email`), "ops@example.com"),
		chromedp.SendKeys(chromedp.CSS(`#password`), "correct horse"),
		chromedp.Click(chromedp.CSS(`[data-testid="login"]`)),
	)
	browsertest.WaitURL(t, ctx, "/admin")
	browsertest.Do(t, ctx, chromedp.WaitVisible(chromedp.CSS(`nav`)))
	return ctx
}

// open loads a page and waits until it has loaded.
func open(t *testing.T, ctx context.Context, u string) {
	t.Helper()
	browsertest.Do(t, ctx, chromedp.Navigate(u), chromedp.WaitReady(chromedp.CSS(`body`)))
}

func evalBool(t *testing.T, ctx context.Context, js string) bool {
	t.Helper()
	return browsertest.Eval[bool](t, ctx, js)
}

// consolePages lists every console page with what it needs, for the
// phone width and axe checks. The simulator is checked after a run, with
// its results.
func consolePages(a *apiBundle, id int64) []string {
	b := a.srv.URL + "/admin"
	return []string{b, b + "/batches", b + "/batches/" + itoa(id), b + "/batches/" + itoa(id) + "/preview",
		b + "/batches/" + itoa(id) + "/preview?width=phone", b + "/batches/" + itoa(id) + "/cancel",
		b + "/types", b + "/types/comment/edit", b + "/types/comment/preview", b + "/jobs", b + "/outbox",
		b + "/recipients", b + "/recipients?id=u_bob"}
}

// consoleWithMail is consoleSetup with a second, sent batch, so the
// outbox, the dashboard and the recipient have something to show.
func consoleWithMail(t *testing.T) (*apiBundle, int64) {
	t.Helper()
	a, id := consoleSetup(t)
	a.mustCall(t, "PUT", "/api/v1/recipients/u_bob", `{"email":"bartholomew.extraordinarily-long-surname@subdomain.example-company.com"}`, 200)
	res := a.mustCall(t, "POST", "/api/v1/events", `{"type":"comment","actor":{"id":"carol","name":"Carol"},
		"object":{"title":"A subject long enough to wrap on a phone screen","url":"https://app.example/doc/8"},
		"recipients":[{"id":"u_dan","email":"dan@example.com","name":"Dan"}]}`, 202)
	flushNow(t, a, int64(res["batches"].([]any)[0].(map[string]any)["id"].(float64)))
	return a, id
}

// TestConsoleFlashShowsOnce: the message after an action is on the page
// the action leads to, and on no page after it.
func TestConsoleFlashShowsOnce(t *testing.T) {
	t.Parallel()
	a, id := consoleSetup(t)
	ctx := consoleBrowser(t, a)
	open(t, ctx, a.srv.URL+"/admin/batches/"+itoa(id))
	browsertest.Eval[bool](t, ctx, `window.confirm = () => true; true`)
	browsertest.Do(t, ctx, chromedp.Click(chromedp.CSS(`[data-testid="flush"]`)), chromedp.WaitVisible(chromedp.CSS(`[data-testid="flash"]`)))
	for _, path := range []string{"/admin/batches", "/admin"} {
		open(t, ctx, a.srv.URL+path)
		if evalBool(t, ctx, `!!document.querySelector('[data-testid="flash"]')`) {
			t.Errorf("%s still shows the message of the flush before it", path)
		}
	}
}

// TestConsoleBatchStatesTellTheTruth: right after Flush now the batch is
// due, not open with Flush and Cancel; a canceled batch offers no job
// actions and does not say it is not sent yet; a page has one Cancel;
// Retry is offered only on jobs that ran and failed.
func TestConsoleBatchStatesTellTheTruth(t *testing.T) {
	t.Parallel()
	a, id := consoleSetup(t)
	other := a.mustCall(t, "POST", "/api/v1/events", `{"type":"comment","actor":{"id":"carol"},"object":{"title":"B"},
		"recipients":[{"id":"u_dan","email":"dan@example.com"}]}`, 202)
	canceled := int64(other["batches"].([]any)[0].(map[string]any)["id"].(float64))
	ctx := consoleBrowser(t, a)

	open(t, ctx, a.srv.URL+"/admin/batches/"+itoa(id))
	cancels := `[...document.querySelectorAll('button')].filter(b => /^cancel/i.test(b.innerText.trim())).length`
	if n := browsertest.Eval[int](t, ctx, cancels); n != 1 {
		t.Errorf("an open batch's page has %d Cancel buttons, want 1", n)
	}
	retries := `[...document.querySelectorAll('button')].filter(b => /retry/i.test(b.innerText)).length`
	open(t, ctx, a.srv.URL+"/admin/jobs")
	if n := browsertest.Eval[int](t, ctx, retries); n != 0 {
		t.Errorf("the jobs page offers Retry on %d jobs that never ran", n)
	}
	// One job ran and failed: it, and only it, offers Retry.
	if _, err := a.db.Pool.Exec(context.Background(), `UPDATE river_job SET state = 'retryable', attempt = 1,
		errors = ARRAY['{"error":"smtp down","attempt":1,"at":"2026-01-01T00:00:00Z"}'::jsonb]
		WHERE id = (SELECT min(id) FROM river_job)`); err != nil {
		t.Fatal(err)
	}
	open(t, ctx, a.srv.URL+"/admin/jobs")
	if n := browsertest.Eval[int](t, ctx, retries); n != 1 {
		t.Errorf("the jobs page offers Retry on %d jobs, want the one that failed", n)
	}
	if _, err := a.db.Pool.Exec(context.Background(), `UPDATE river_job SET state = 'scheduled', attempt = 0, errors = NULL`); err != nil {
		t.Fatal(err)
	}

	open(t, ctx, a.srv.URL+"/admin/batches/"+itoa(id))
	browsertest.Eval[bool](t, ctx, `window.confirm = () => true; true`)
	browsertest.Do(t, ctx, chromedp.Click(chromedp.CSS(`[data-testid="flush"]`)), chromedp.WaitVisible(chromedp.CSS(`[data-testid="flash"]`)))
	if got := browsertest.Eval[string](t, ctx, `document.querySelector('h1 .badge').innerText`); got == "open" {
		t.Error("right after Flush now the batch is still shown as open")
	}
	if evalBool(t, ctx, `!!document.querySelector('[data-testid="flush"], [data-testid="cancel"]')`) {
		t.Error("right after Flush now the page still offers Flush or Cancel")
	}

	a.mustCall(t, "POST", "/api/v1/batches/"+itoa(canceled)+"/cancel", "", 202)
	open(t, ctx, a.srv.URL+"/admin/batches/"+itoa(canceled))
	if n := browsertest.Eval[int](t, ctx, `[...document.querySelectorAll('main button')].filter(b => !b.closest('form[action="/admin/logout"]')).length`); n != 0 {
		t.Errorf("a canceled batch offers %d actions", n)
	}
	if text := browsertest.Eval[string](t, ctx, `document.querySelector('#content, main').innerText`); strings.Contains(text, "Not sent yet") {
		t.Error(`a canceled batch says "Not sent yet"`)
	}
}

// TestConsoleDashboardExplains: the page says why the two windows can
// match, the emails' figures add up, and the chart has axes and hours.
func TestConsoleDashboardExplains(t *testing.T) {
	t.Parallel()
	a, _ := consoleWithMail(t)
	ctx := consoleBrowser(t, a)
	open(t, ctx, a.srv.URL+"/admin")
	if text := browsertest.Eval[string](t, ctx, `document.querySelector('main').innerText`); !strings.Contains(text, "equal when nothing happened before the last hour") {
		t.Error("nothing explains why the last hour and the last 24 hours can show the same figures")
	}
	stat := func(label string) (int, string) {
		v := browsertest.Eval[[]string](t, ctx, `[...document.querySelectorAll('[data-testid="stat-`+label+`"] span, [data-testid="stat-`+label+`"] b')].map(e => e.innerText)`)
		if len(v) < 2 {
			t.Fatalf("stat %s: %q", label, v)
		}
		n, _ := strconv.Atoi(v[1])
		return n, strings.Join(v, " ")
	}
	sent, sentText := stat("Emails sent")
	saved, _ := stat("Emails saved")
	m := regexp.MustCompile(`carrying (\d+) notifications?`).FindStringSubmatch(sentText)
	if m == nil || m[1] != strconv.Itoa(sent+saved) {
		t.Errorf("emails sent %d and saved %d: the card says %q, not how many notifications they carried", sent, saved, sentText)
	}
	labels := browsertest.Eval[[]string](t, ctx, `[...document.querySelectorAll('[data-testid="chart"] text')].map(e => e.textContent)`)
	hours := 0
	for _, l := range labels {
		if regexp.MustCompile(`^\d\d:\d\d$`).MatchString(l) {
			hours++
		}
	}
	if hours < 4 || !evalBool(t, ctx, `document.querySelectorAll('[data-testid="chart"] line').length >= 2`) {
		t.Errorf("the chart has %d hour labels (%q) or lacks axes", hours, labels)
	}
}

// TestConsoleFitsAPhone: at 390 px no console page is wider than the
// screen; wide tables scroll inside their box.
func TestConsoleFitsAPhone(t *testing.T) {
	t.Parallel()
	a, id := consoleWithMail(t)
	link := a.mustCall(t, "POST", "/api/v1/recipients/u_bob/preferences-link", "", 200)["url"].(string)
	ctx := consoleBrowser(t, a)
	browsertest.Do(t, ctx, chromedp.EmulateViewport(390, 844))
	pages := append(consolePages(a, id), a.srv.URL+"/admin/outbox/"+firstOutboxID(t, a))
	for _, u := range pages {
		open(t, ctx, u)
		if w := browsertest.Eval[int](t, ctx, `document.documentElement.scrollWidth`); w > 390 {
			t.Errorf("%s is %d px wide at 390", strings.TrimPrefix(u, a.srv.URL), w)
		}
		if strings.HasSuffix(u, "/admin") || strings.HasSuffix(u, "/admin/batches/"+itoa(id)) || strings.HasSuffix(u, "/outbox") {
			browsertest.Screenshot(t, ctx, "phone-"+path.Base(u)+".png")
		}
	}
	runSimulation(t, ctx, a)
	if w := browsertest.Eval[int](t, ctx, `document.documentElement.scrollWidth`); w > 390 {
		t.Errorf("the simulator with results is %d px wide at 390", w)
	}
	open(t, ctx, a.srv.URL+"/admin/recipients?id=u_bob")
	if evalBool(t, ctx, `[...document.querySelectorAll('.stat b')].some(e => e.scrollWidth > e.clientWidth + 1)`) {
		t.Error("the recipient page clips a value (the email)")
	}
	open(t, ctx, strings.Replace(link, "http://lull.test", a.srv.URL, 1))
	if w := browsertest.Eval[int](t, ctx, `document.documentElement.scrollWidth`); w > 390 {
		t.Errorf("the settings page is %d px wide at 390", w)
	}
}

func firstOutboxID(t *testing.T, a *apiBundle) string {
	t.Helper()
	var id int64
	if err := a.db.Pool.QueryRow(context.Background(), `SELECT id FROM outbox ORDER BY id LIMIT 1`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return itoa(id)
}

// runSimulation runs the simulator on the stored events and waits for
// its results.
func runSimulation(t *testing.T, ctx context.Context, a *apiBundle) {
	t.Helper()
	open(t, ctx, a.srv.URL+"/admin/simulate")
	browsertest.Do(t, ctx, chromedp.Click(chromedp.CSS(`[data-testid="simulate"]`)), chromedp.WaitReady(chromedp.CSS(`[data-testid="summary"]`)))
}

// TestConsoleLoginReturnsToDeepLink: a console page opened without a
// session returns there after login; a return path that is not a local
// console page is ignored.
func TestConsoleLoginReturnsToDeepLink(t *testing.T) {
	t.Parallel()
	a, id := consoleSetup(t)
	ctx := browsertest.New(t)
	deep := "/admin/batches/" + itoa(id)
	browsertest.Do(t, ctx,
		chromedp.Navigate(a.srv.URL+deep),
		chromedp.WaitVisible(chromedp.CSS(`#email`)),
		chromedp.SendKeys(chromedp.CSS(`#email`), "ops@example.com"),
		chromedp.SendKeys(chromedp.CSS(`#password`), "correct horse"),
		chromedp.Click(chromedp.CSS(`[data-testid="login"]`)),
	)
	browsertest.WaitURL(t, ctx, deep)
	if got := browsertest.Eval[string](t, ctx, `location.pathname`); got != deep {
		t.Errorf("login from %s landed on %s", deep, got)
	}

	noFollow := browserClient(t)
	noFollow.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	for _, next := range []string{"//evil.com", "/\\evil.com", "https://evil.com/admin", "/admin@evil.com", "/admin.evil.com", "/\t/evil.com", "javascript:alert(1)", "/admin/../../x", ""} {
		resp := postForm(t, noFollow, a.srv.URL+"/admin/login", url.Values{"email": {"ops@example.com"}, "password": {"correct horse"}, "next": {next}})
		if loc := resp.Header.Get("Location"); loc != "/admin" {
			t.Errorf("next %q sent the operator to %q, want /admin", next, loc)
		}
	}
}

// TestConsoleFindsItsWay: after Simulate the results are in view (with
// JavaScript off); a skip link is first in tab order; every time names
// its zone; the preview's width toggle says which is on; a favicon is
// served.
func TestConsoleFindsItsWay(t *testing.T) {
	t.Parallel()
	a, id := consoleWithMail(t)
	ctx := consoleBrowser(t, a)
	browsertest.Do(t, ctx, chromedp.EmulateViewport(1100, 800))
	scripts(t, ctx, false)
	runSimulation(t, ctx, a)
	scripts(t, ctx, true)
	if !evalBool(t, ctx, `(() => { const r = document.querySelector('[data-testid="summary"]').getBoundingClientRect(); return r.top >= 0 && r.bottom <= innerHeight; })()`) {
		t.Errorf("after Simulate the results start %v px down, out of view", browsertest.Eval[float64](t, ctx, `document.querySelector('[data-testid="summary"]').getBoundingClientRect().top`))
	}

	open(t, ctx, a.srv.URL+"/admin")
	browsertest.Tab(t, ctx)
	if got := browsertest.Eval[string](t, ctx, `document.activeElement.getAttribute('href') + " " + document.activeElement.innerText`); !strings.HasPrefix(got, "#") || !strings.Contains(strings.ToLower(got), "skip") {
		t.Errorf("the first Tab reaches %q, not a skip link", got)
	}

	bare := regexp.MustCompile(`\d\d:\d\d:\d\d(?: [A-Z]{3}|[+-]\d\d:?\d\d|Z)?`)
	for _, u := range []string{"/admin/batches", "/admin/batches/" + itoa(id), "/admin/outbox", "/admin/jobs", "/admin/recipients?id=u_bob"} {
		open(t, ctx, a.srv.URL+u)
		cells := browsertest.Eval[[]string](t, ctx, `[...document.querySelectorAll('td, .stat b, .desc')].map(e => e.innerText)`)
		for _, c := range cells {
			for _, m := range bare.FindAllString(c, -1) {
				if len(m) == len("15:04:05") {
					t.Errorf("%s: a time without its zone: %q", u, c)
				}
			}
		}
	}

	open(t, ctx, a.srv.URL+"/admin/batches/"+itoa(id)+"/preview?width=phone")
	on := browsertest.Eval[[]string](t, ctx, `[...document.querySelectorAll('a[aria-current="true"], a[aria-pressed="true"], button[aria-pressed="true"]')].map(e => e.innerText)`)
	if len(on) != 1 || !strings.Contains(on[0], "Phone") {
		t.Errorf("the width toggle marks %q as on, want the phone width only", on)
	}
	tctx, cancel := context.WithTimeout(ctx, 30e9)
	defer cancel()
	status, err := chromedp.Run(tctx, chromedp.Evaluate[int](`fetch('/favicon.ico').then(r => r.ok && r.headers.get('content-type').startsWith('image/') ? 200 : r.status)`, chromedp.EvalAwaitPromise))
	if err != nil || status != 200 {
		t.Errorf("/favicon.ico = %d", status)
	}
}

// scripts turns the page's JavaScript on or off for the tab.
func scripts(t *testing.T, ctx context.Context, on bool) {
	t.Helper()
	browsertest.Do(t, ctx, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: !on})
		return err
	}))
}

// TestConsoleRecipientPage: the email is whole, yes and no read as words,
// and the page links to the recipient's settings and batches.
func TestConsoleRecipientPage(t *testing.T) {
	t.Parallel()
	a, _ := consoleWithMail(t)
	ctx := consoleBrowser(t, a)
	open(t, ctx, a.srv.URL+"/admin/recipients?id=u_bob")
	values := browsertest.Eval[[]string](t, ctx, `[...document.querySelectorAll('.stat b')].map(e => e.innerText)`)
	for _, v := range values {
		if v == "true" || v == "false" {
			t.Errorf("a raw boolean on the recipient page: %q", values)
			break
		}
	}
	if evalBool(t, ctx, `[...document.querySelectorAll('.stat b')].some(e => e.scrollWidth > e.clientWidth + 1)`) {
		t.Error("the recipient page clips the email")
	}
	batches := browsertest.Eval[string](t, ctx, `(document.querySelector('a[href*="/admin/batches?"][href*="recipient=u_bob"]') || {}).href || ""`)
	settings := browsertest.Eval[string](t, ctx, `(document.querySelector('a[href*="/settings/enter?token="]') || {}).href || ""`)
	if batches == "" || settings == "" {
		t.Fatalf("no link to the recipient's batches (%q) or settings (%q)", batches, settings)
	}
	open(t, ctx, batches)
	if got := browsertest.Eval[[]string](t, ctx, `[...document.querySelectorAll('[data-testid="batch-row"] td:nth-child(2)')].map(e => e.innerText)`); len(got) == 0 || strings.Join(got, "") != strings.Repeat("u_bob", len(got)) {
		t.Errorf("the batches link lists %q", got)
	}
	open(t, ctx, strings.Replace(settings, "http://lull.test", a.srv.URL, 1))
	if !evalBool(t, ctx, `location.pathname === "/settings" && !!document.querySelector('[data-testid="save"]')`) {
		t.Error("the settings link does not open the recipient's settings page")
	}
}

// formErrorsWired checks the page's errors: one alert, focused, and each
// invalid field pointing at its message.
func formErrorsWired(t *testing.T, ctx context.Context, page string) {
	t.Helper()
	if n := browsertest.Eval[int](t, ctx, `document.querySelectorAll('[role="alert"]').length`); n != 1 {
		t.Errorf("%s: %d alerts, want one summary", page, n)
	}
	if !evalBool(t, ctx, `document.activeElement && document.activeElement.getAttribute('role') === 'alert'`) {
		t.Errorf("%s: the focus is on %q, not on the error summary", page, browsertest.Eval[string](t, ctx, `document.activeElement.outerHTML.slice(0, 80)`))
	}
	bad := browsertest.Eval[[]string](t, ctx, `[...document.querySelectorAll('.error')].filter(e => !e.closest('[role="alert"]')).filter(e =>
		!document.querySelector('[aria-invalid="true"][aria-describedby~="' + e.id + '"]')).map(e => e.innerText)`)
	if len(bad) > 0 {
		t.Errorf("%s: errors no field points at with aria-invalid and aria-describedby: %q", page, bad)
	}
}

// TestConsoleFormsSayWhatIsWrong: the type editor keeps "lots" as typed
// and refuses an empty name; a daily type hides cool-down fields; the
// settings page refuses an empty daily time and offers the browser's zone
// from a list; errors are wired and one summary takes the focus.
func TestConsoleFormsSayWhatIsWrong(t *testing.T) {
	t.Parallel()
	a, _ := consoleSetup(t)
	ctx := consoleBrowser(t, a)
	open(t, ctx, a.srv.URL+"/admin/types/comment/edit")
	setValue(t, ctx, `#f-name`, "")
	setValue(t, ctx, `#f-max_items`, "lots")
	browsertest.Do(t, ctx,
		chromedp.Click(chromedp.CSS(`[data-testid="type-save"]`)),
		chromedp.WaitReady(chromedp.CSS(`[data-testid="error-max_items"]`)),
	)
	if got := browsertest.Eval[string](t, ctx, `document.querySelector('#f-max_items').value`); got != "lots" {
		t.Errorf("Max items came back as %q, want lots as typed", got)
	}
	if !evalBool(t, ctx, `!!document.querySelector('[data-testid="error-name"]')`) {
		t.Error("an empty name is accepted")
	}
	formErrorsWired(t, ctx, "type editor")
	browsertest.Screenshot(t, ctx, "type-editor-errors.png")
	if typ, _ := db.GetType(context.Background(), a.db.Pool, "comment"); typ.Name != "Comments" {
		t.Errorf("the refused form changed the type: name %q", typ.Name)
	}
	setValue(t, ctx, `#f-default_mode`, "daily")
	if evalBool(t, ctx, `document.querySelector('#f-window').offsetParent !== null`) {
		t.Error("a daily type shows the cool-down window")
	}

	open(t, ctx, a.srv.URL+"/admin/simulate")
	setValue(t, ctx, `#f-a-everyone-mode`, "daily")
	setValue(t, ctx, `#f-a-everyone-daily_at`, "25:99")
	browsertest.Do(t, ctx, chromedp.Click(chromedp.CSS(`[data-testid="simulate"]`)),
		chromedp.WaitReady(chromedp.CSS(`[data-testid^="error-a."]`)))
	formErrorsWired(t, ctx, "simulator")

	a.mustCall(t, "PUT", "/api/v1/recipients/u_zed", `{"email":"zed@example.com"}`, 200)
	a.mustCall(t, "PUT", "/api/v1/recipients/u_zed/preferences", `{"types":{"comment":{"mode":"daily"}}}`, 200)
	link := a.mustCall(t, "POST", "/api/v1/recipients/u_zed/preferences-link", "", 200)["url"].(string)
	browsertest.Do(t, ctx, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, emulation.SetTimezoneOverride, emulation.SetTimezoneOverrideParams{TimezoneID: "Asia/Tokyo"})
		return err
	}))
	open(t, ctx, strings.Replace(link, "http://lull.test", a.srv.URL, 1))
	if got := browsertest.Eval[string](t, ctx, `(() => { const z = document.querySelector('[name="timezone"]'); return z.tagName + " " + z.value; })()`); got != "SELECT Asia/Tokyo" {
		t.Errorf("the zone field is %q, want a list with the browser's zone chosen", got)
	}
	if got := browsertest.Eval[string](t, ctx, `document.querySelector('.preview').textContent`); !strings.Contains(got, "(Asia/Tokyo)") {
		t.Errorf("with Asia/Tokyo chosen the page says %q", got)
	}
	setValue(t, ctx, `[name="digest.daily_at"]`, "")
	browsertest.Do(t, ctx, chromedp.Click(chromedp.CSS(`[data-testid="save"]`)))
	browsertest.Do(t, ctx, chromedp.WaitReady(chromedp.CSS(`[data-testid="error-digest.daily_at"]`)))
	formErrorsWired(t, ctx, "settings")
	browsertest.Screenshot(t, ctx, "settings-errors.png")
	if got := browsertest.Eval[string](t, ctx, `document.querySelector('main').innerText`); strings.Contains(got, "(UTC)") {
		t.Errorf("the refused settings page describes UTC, not the zone chosen")
	}
}

// TestConsoleCancelAsksWithoutJavaScript: with scripts off, Cancel leads
// to a question, and only its answer cancels.
func TestConsoleCancelAsksWithoutJavaScript(t *testing.T) {
	t.Parallel()
	a, id := consoleSetup(t)
	ctx := consoleBrowser(t, a)
	scripts(t, ctx, false)
	open(t, ctx, a.srv.URL+"/admin/batches/"+itoa(id))
	browsertest.Do(t, ctx, chromedp.Click(chromedp.CSS(`[data-testid="cancel"]`)))
	browsertest.WaitURL(t, ctx, "/cancel")
	if b, _ := db.GetBatch(context.Background(), a.db.Pool, id); b.State != db.StateOpen {
		t.Fatalf("one click on Cancel with JavaScript off left the batch %s", b.State)
	}
	browsertest.Do(t, ctx, chromedp.Click(chromedp.CSS(`[data-testid="confirm-cancel"]`)), chromedp.WaitVisible(chromedp.CSS(`[data-testid="flash"]`)))
	if b, _ := db.GetBatch(context.Background(), a.db.Pool, id); b.State != db.StateCanceled {
		t.Fatalf("after the confirmation the batch is %s", b.State)
	}
}

// TestConsoleAxe runs axe-core on every console page, the settings page
// and the forms with errors; no violation of any impact is allowed.
func TestConsoleAxe(t *testing.T) {
	t.Parallel()
	a, id := consoleWithMail(t)
	link := a.mustCall(t, "POST", "/api/v1/recipients/u_bob/preferences-link", "", 200)["url"].(string)
	ctx := browsertest.New(t)
	open(t, ctx, a.srv.URL+"/admin/login")
	check := func(name string) {
		t.Helper()
		for _, v := range browsertest.Axe(t, ctx) {
			t.Errorf("%s: %s", name, v)
		}
	}
	check("login")
	ctx = consoleBrowser(t, a)
	for _, u := range consolePages(a, id) {
		open(t, ctx, u)
		check(strings.TrimPrefix(u, a.srv.URL))
	}
	runSimulation(t, ctx, a)
	check("simulator with results")
	open(t, ctx, a.srv.URL+"/admin/types/comment/edit")
	setValue(t, ctx, `#f-max_items`, "lots")
	browsertest.Do(t, ctx,
		chromedp.Click(chromedp.CSS(`[data-testid="type-save"]`)), chromedp.WaitReady(chromedp.CSS(`[data-testid="error-max_items"]`)))
	check("type editor with an error")
	open(t, ctx, a.srv.URL+"/admin/simulate")
	setValue(t, ctx, `#f-a-everyone-mode`, "daily")
	setValue(t, ctx, `#f-a-everyone-daily_at`, "25:99")
	browsertest.Do(t, ctx, chromedp.Click(chromedp.CSS(`[data-testid="simulate"]`)),
		chromedp.WaitReady(chromedp.CSS(`[data-testid^="error-a."]`)))
	check("simulator with an error")
	// At phone width the tables scroll in their boxes: checked too.
	browsertest.Do(t, ctx, chromedp.EmulateViewport(390, 844))
	for _, u := range consolePages(a, id) {
		open(t, ctx, u)
		check(strings.TrimPrefix(u, a.srv.URL) + " (390 px)")
	}
	browsertest.Do(t, ctx, chromedp.EmulateViewport(1100, 1600))
	// The console follows the system's dark mode: its colors are checked too.
	browsertest.Do(t, ctx, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "dark"}}})
		return err
	}))
	for _, u := range consolePages(a, id) {
		open(t, ctx, u)
		check(strings.TrimPrefix(u, a.srv.URL) + " (dark)")
	}
	open(t, ctx, strings.Replace(link, "http://lull.test", a.srv.URL, 1))
	check("settings (dark)")
	browsertest.Do(t, ctx, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{})
		return err
	}))
	open(t, ctx, strings.Replace(link, "http://lull.test", a.srv.URL, 1))
	check("settings")
	setValue(t, ctx, `[name="timezone"]`, "")
	browsertest.Do(t, ctx,
		chromedp.Click(chromedp.CSS(`[data-testid="save"]`)), chromedp.WaitReady(chromedp.CSS(`[data-testid="error-timezone"]`)))
	check("settings with an error")
}

// setValue sets a field as a person would and lets the page react.
func setValue(t *testing.T, ctx context.Context, sel, v string) {
	t.Helper()
	browsertest.Eval[bool](t, ctx, `(() => { const e = document.querySelector(`+strconv.Quote(sel)+`); e.value = `+strconv.Quote(v)+`;
		e.dispatchEvent(new Event("change", {bubbles: true})); return true; })()`)
}

// TestConsoleFitsAPhoneWithHostileValues: the longest values the API
// takes (a 254-character email, a 200-character type name without a
// space, a long batch key and recipient id) and right-to-left text keep
// every console page and the settings page within 390 px.
func TestConsoleFitsAPhoneWithHostileValues(t *testing.T) {
	t.Parallel()
	a, _ := consoleSetup(t)
	email := strings.Repeat("a", 64) + "@" + strings.Repeat("b", 61) + "." + strings.Repeat("c", 61) + "." + strings.Repeat("d", 61) + ".com"
	if len(email) != 254 {
		t.Fatalf("email is %d characters", len(email))
	}
	rid := "u_" + strings.Repeat("r", 120)
	a.mustCall(t, "PUT", "/api/v1/types/comment", `{"name":"`+strings.Repeat("N", 200)+`","category":"`+strings.Repeat("C", 100)+`","default_mode":"cooldown","window":"1h"}`, 200)
	res := a.mustCall(t, "POST", "/api/v1/events", `{"type":"comment","batch_key":"`+strings.Repeat("k", 200)+`",
		"actor":{"id":"`+strings.Repeat("x", 100)+`","name":"مستخدم بأسم طويل جدا جدا جدا"},
		"object":{"title":"`+strings.Repeat("שלום", 60)+`","url":"https://app.example/doc/7"},
		"recipients":[{"id":"`+rid+`","email":"`+email+`","name":"`+strings.Repeat("W", 150)+`"}]}`, 202)
	id := int64(res["batches"].([]any)[0].(map[string]any)["id"].(float64))
	link := a.mustCall(t, "POST", "/api/v1/recipients/"+rid+"/preferences-link", "", 200)["url"].(string)
	ctx := consoleBrowser(t, a)
	browsertest.Do(t, ctx, chromedp.EmulateViewport(390, 844))
	b := a.srv.URL + "/admin"
	pages := []string{b, b + "/batches", b + "/batches?recipient=" + rid, b + "/batches/" + itoa(id), b + "/batches/" + itoa(id) + "/cancel",
		b + "/batches/" + itoa(id) + "/preview", b + "/types", b + "/types/comment/edit", b + "/recipients?id=" + rid,
		strings.Replace(link, "http://lull.test", a.srv.URL, 1)}
	for _, u := range pages {
		open(t, ctx, u)
		if w := browsertest.Eval[int](t, ctx, `document.documentElement.scrollWidth`); w > 390 {
			t.Errorf("%.60s is %d px wide at 390", strings.TrimPrefix(u, a.srv.URL), w)
		}
		if strings.Contains(u, "/batches/") && !strings.Contains(u, "preview") && !evalBool(t, ctx, `/· 1 item$/m.test(document.querySelector('main .card p').innerText)`) {
			t.Errorf("%.60s does not count its one item as 1 item", strings.TrimPrefix(u, a.srv.URL))
		}
	}
}
