package web_test

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/PuerkitoBio/goquery"
	"github.com/chromedp/chromedp"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/jobs"
	"github.com/lull-dev/lull/web/browsertest"
)

// consoleSetup creates an operator and a batch with two comments.
func consoleSetup(t *testing.T) (*apiBundle, int64) {
	t.Helper()
	a := setupAPI(t)
	if err := db.UpsertOperator(context.Background(), a.db.Pool, "ops@example.com", "correct horse"); err != nil {
		t.Fatal(err)
	}
	a.mustCall(t, "PUT", "/api/v1/types/comment", `{"name":"Comments","default_mode":"cooldown","window":"1h",
		"group_text":"{{actors}} commented|{{actors}} left {{count}} comments"}`, 200)
	var id int64
	for _, who := range []string{"Alice", "<script>alert(1)</script>"} {
		res := a.mustCall(t, "POST", "/api/v1/events", `{"type":"comment","actor":{"id":"`+who+`","name":"`+strings.ReplaceAll(who, `"`, ``)+`"},
			"object":{"title":"Q3 plan","url":"https://app.example/doc/7"},
			"recipients":[{"id":"u_bob","email":"bob@example.com","name":"Bob"}]}`, 202)
		id = int64(res["batches"].([]any)[0].(map[string]any)["id"].(float64))
	}
	return a, id
}

// operatorClient logs in and returns a client holding the session.
func operatorClient(t *testing.T, a *apiBundle) *http.Client {
	t.Helper()
	c := browserClient(t)
	resp := postForm(t, c, a.srv.URL+"/admin/login", url.Values{"email": {"ops@example.com"}, "password": {"correct horse"}})
	if resp.Request.URL.Path != "/admin" || resp.StatusCode != 200 {
		t.Fatalf("login landed on %s with %d", resp.Request.URL.Path, resp.StatusCode)
	}
	return c
}

func postForm(t *testing.T, c *http.Client, u string, f url.Values) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("POST", u, strings.NewReader(f.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

func TestConsoleNeedsAnOperator(t *testing.T) {
	t.Parallel()
	a, id := consoleSetup(t)
	// A stranger and a recipient with a settings session are both sent to
	// the login form, and their posts are refused.
	link := a.mustCall(t, "PUT", "/api/v1/recipients/u_bob", `{"email":"bob@example.com"}`, 200)
	_ = link
	recipient := browserClient(t)
	settings := a.mustCall(t, "POST", "/api/v1/recipients/u_bob/preferences-link", "", 200)["url"].(string)
	getDoc(t, recipient, strings.Replace(settings, "http://lull.test", a.srv.URL, 1))
	for name, c := range map[string]*http.Client{"Stranger": browserClient(t), "Recipient": recipient} {
		t.Run(name, func(t *testing.T) {
			for _, path := range []string{"/admin", "/admin/batches", "/admin/outbox", "/admin/jobs", "/admin/types", "/admin/batches/" + itoa(id) + "/preview/html"} {
				resp, _ := getDoc(t, c, a.srv.URL+path)
				if resp.Request.URL.Path != "/admin/login" {
					t.Errorf("%s reached %s without an operator session", path, resp.Request.URL.Path)
				}
			}
			if resp := postForm(t, c, a.srv.URL+"/admin/batches/"+itoa(id)+"/cancel", nil); resp.StatusCode != http.StatusForbidden {
				t.Errorf("cancel without an operator = %d, want 403", resp.StatusCode)
			}
		})
	}
	if got := countRows(t, a.db, "SELECT count(*) FROM batches WHERE state = 'open'"); got != 1 {
		t.Fatal("a refused action changed the batch")
	}
	wrong := postForm(t, browserClient(t), a.srv.URL+"/admin/login", url.Values{"email": {"ops@example.com"}, "password": {"wrong"}})
	if wrong.StatusCode != http.StatusUnauthorized {
		t.Fatalf("wrong password = %d, want 401", wrong.StatusCode)
	}
}

func TestConsolePagesAndActions(t *testing.T) {
	t.Parallel()
	a, id := consoleSetup(t)
	c := operatorClient(t, a)
	pages := map[string]string{
		"/admin":                                   `[data-testid="stat-Open batches"]`,
		"/admin/batches?state=open":                `[data-testid="batch-row"]`,
		"/admin/batches/" + itoa(id):               `[data-testid="items"] tbody tr`,
		"/admin/batches/" + itoa(id) + "/preview":  `[data-testid="preview-frame"]`,
		"/admin/types":                             `[data-testid="types"] tbody tr`,
		"/admin/types/comment/preview?width=phone": `.preview-grid.phone`,
		"/admin/jobs":                              `[data-testid="jobs"]`,
		"/admin/outbox":                            `[data-testid="outbox"]`,
	}
	for path, sel := range pages {
		resp, doc := getDoc(t, c, a.srv.URL+path)
		if resp.StatusCode != 200 || doc.Find(sel).Length() == 0 {
			t.Errorf("%s: %d, %q not found", path, resp.StatusCode, sel)
		}
		if doc.Find("script:not([src])").Length() != 0 {
			t.Errorf("%s: an inline script reached the page", path)
		}
	}
	if _, doc := getDoc(t, c, a.srv.URL+"/admin/batches?from=2000-01-01T00:00&until=2000-01-02T00:00"); doc.Find(`[data-testid="batch-row"]`).Length() != 0 {
		t.Error("the time range filter let a batch from today through")
	}
	_, doc := getDoc(t, c, a.srv.URL+"/admin/batches/"+itoa(id)+"/preview")
	if !strings.Contains(doc.Find(`[data-testid="text-part"]`).Text(), "left 2 comments") {
		t.Errorf("preview text part: %q", doc.Find(`[data-testid="text-part"]`).Text())
	}
	if got := doc.Find(`[data-testid="headers"]`).Text(); !strings.Contains(got, "List-Unsubscribe") || !strings.Contains(got, "batch-"+itoa(id)+".") {
		t.Errorf("preview headers: %q", got)
	}
	frame, _ := doc.Find(`iframe`).Attr("sandbox")
	if frame != "" {
		t.Errorf("iframe sandbox = %q, want the empty (strictest) sandbox", frame)
	}
	resp, err := c.Get(a.srv.URL + "/admin/batches/" + itoa(id) + "/preview/html")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "sandbox") || !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("email HTML served with CSP %q", csp)
	}
	if n := countRows(t, a.db, "SELECT count(*) FROM outbox") + countRows(t, a.db, "SELECT count(*) FROM deliveries"); n != 0 {
		t.Fatal("previewing stored or sent something")
	}

	_, doc = postDoc(t, c, a.srv.URL+"/admin/batches/"+itoa(id)+"/cancel", nil, "")
	if !strings.Contains(doc.Find(`[data-testid="flash"]`).Text(), "cancel") {
		t.Errorf("no confirmation message after the action")
	}
	b, _ := db.GetBatch(context.Background(), a.db.Pool, id)
	if b.State != db.StateCanceled || b.Reason != db.SkipOperator {
		t.Fatalf("after cancel the batch is %s (%q)", b.State, b.Reason)
	}
	_, doc = getDoc(t, c, a.srv.URL+"/admin/batches/"+itoa(id))
	if !strings.Contains(doc.Find(`[data-testid="audit"]`).Text(), "ops@example.com") || doc.Find(`[data-testid="skips"]`).Length() != 1 {
		t.Errorf("the cancel is not in the audit and skip logs")
	}
	if doc.Find(`[data-testid="flash"]`).Length() != 0 {
		t.Errorf("the message stayed on the next page")
	}
	postForm(t, c, a.srv.URL+"/admin/logout", nil)
	if resp, _ := getDoc(t, c, a.srv.URL+"/admin"); resp.Request.URL.Path != "/admin/login" {
		t.Fatal("logout did not end the session")
	}
}

// flushNow closes batch id and works its flush job as River would.
func flushNow(t *testing.T, a *apiBundle, id int64) {
	t.Helper()
	ctx := context.Background()
	if _, err := a.db.Pool.Exec(ctx, `UPDATE batches SET closes_at = now(), wake_at = now() WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	job := &river.Job[jobs.FlushArgs]{JobRow: &rivertype.JobRow{ID: 1, Attempt: 1, MaxAttempts: 8}, Args: jobs.FlushArgs{BatchID: id}}
	if err := a.flush.Work(ctx, job); err != nil {
		t.Fatal(err)
	}
}

// TestPreviewOfAMutedBatchAgreesWithTheFlush mutes a type after its batch
// opened: the preview says the email would not be sent, changes nothing,
// and the flush then cancels the batch for the same reason.
func TestPreviewOfAMutedBatchAgreesWithTheFlush(t *testing.T) {
	t.Parallel()
	a, id := consoleSetup(t)
	c := operatorClient(t, a)
	a.mustCall(t, "PUT", "/api/v1/recipients/u_bob/preferences", `{"types":{"comment":{"mode":"never"}}}`, 200)

	preview := a.srv.URL + "/admin/batches/" + itoa(id) + "/preview"
	_, doc := getDoc(t, c, preview)
	if got := doc.Find(`[data-testid="unsent"]`).Text(); got != "Would not be sent: "+db.SkipMuted {
		t.Errorf("preview of a muted batch says %q, want it would not be sent", got)
	}
	if doc.Find(`[data-testid="preview-frame"]`).Length() != 0 {
		t.Error("the preview shows an email the flush will not send")
	}
	if resp, _ := getDoc(t, c, preview+"/html"); resp.StatusCode != http.StatusNotFound {
		t.Errorf("email HTML of a muted batch = %d, want 404", resp.StatusCode)
	}
	b, _ := db.GetBatch(context.Background(), a.db.Pool, id)
	if n := countRows(t, a.db, "SELECT count(*) FROM outbox") + countRows(t, a.db, "SELECT count(*) FROM deliveries") + countRows(t, a.db, "SELECT count(*) FROM skips"); n != 0 || b.State != db.StateOpen {
		t.Fatalf("the preview changed something: batch %s, %d rows of outbox, deliveries and skips", b.State, n)
	}

	flushNow(t, a, id)
	b, _ = db.GetBatch(context.Background(), a.db.Pool, id)
	if b.State != db.StateCanceled || b.Reason != db.SkipMuted {
		t.Fatalf("the flush left the batch %s (%q), want canceled as muted", b.State, b.Reason)
	}
	if _, doc := getDoc(t, c, preview); doc.Find(`[data-testid="unsent"]`).Text() != "Not sent: "+db.SkipMuted {
		t.Errorf("preview of the canceled batch says %q", doc.Find(`[data-testid="unsent"]`).Text())
	}
}

// TestPreviewOfASentBatchShowsTheStoredEmail changes a type's texts after
// its batch went out: the preview shows the email as it was stored, not
// the batch rendered again with the new texts.
func TestPreviewOfASentBatchShowsTheStoredEmail(t *testing.T) {
	t.Parallel()
	a, id := consoleSetup(t)
	c := operatorClient(t, a)
	flushNow(t, a, id)
	var text, html string
	a.db.Pool.QueryRow(context.Background(), `SELECT text_body, html_body FROM outbox WHERE batch_id = $1`, id).Scan(&text, &html)
	if !strings.Contains(text, "left 2 comments") {
		t.Fatalf("stored email text: %q", text)
	}
	a.mustCall(t, "PUT", "/api/v1/types/comment", `{"name":"Comments","default_mode":"cooldown","window":"1h",
		"group_text":"{{actors}} wrote|{{actors}} wrote {{count}} replies"}`, 200)

	preview := a.srv.URL + "/admin/batches/" + itoa(id) + "/preview"
	_, doc := getDoc(t, c, preview)
	if got := doc.Find(`[data-testid="text-part"]`).Text(); got != text {
		t.Errorf("preview of a sent batch shows %q, want the stored email %q", got, text)
	}
	if !strings.Contains(doc.Find(`[data-testid="preview-note"]`).Text(), "as it went out") {
		t.Errorf("preview note: %q", doc.Find(`[data-testid="preview-note"]`).Text())
	}
	resp, err := c.Get(preview + "/html")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if got, _ := io.ReadAll(resp.Body); string(got) != html {
		t.Error("the preview frame does not serve the stored email's HTML")
	}
}

// TestConsoleInBrowser logs in, filters batches, opens one, previews it,
// flushes it and finds the email in the outbox, in headless Chromium.
func TestConsoleInBrowser(t *testing.T) {
	t.Parallel()
	a, id := consoleSetup(t)
	ctx := browsertest.New(t)
	browsertest.Do(t, ctx,
		chromedp.Navigate(a.srv.URL+"/admin"),
		chromedp.WaitVisible(chromedp.CSS(`#email`)),
		chromedp.SendKeys(chromedp.CSS(`#email`), "ops@example.com"),
		chromedp.SendKeys(chromedp.CSS(`#password`), "correct horse"),
		chromedp.Click(chromedp.CSS(`[data-testid="login"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="chart"]`)),
	)
	browsertest.Screenshot(t, ctx, "dashboard.png")
	browsertest.Do(t, ctx,
		chromedp.Navigate(a.srv.URL+"/admin/batches"),
		chromedp.SetValue(chromedp.CSS(`#state`), "open"),
		chromedp.SetValue(chromedp.CSS(`#recipient`), "u_bob"),
		chromedp.Click(chromedp.CSS(`[data-testid="filter"]`)),
	)
	browsertest.WaitURL(t, ctx, "recipient=u_bob")
	browsertest.Do(t, ctx, chromedp.WaitVisible(chromedp.CSS(`[data-testid="batch-row"]`)))
	browsertest.Screenshot(t, ctx, "batches.png")
	browsertest.Do(t, ctx,
		chromedp.Click(chromedp.CSS(`[data-testid="batch-row"] a`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="preview"]`)),
		chromedp.Click(chromedp.CSS(`[data-testid="preview"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="preview-frame"]`)),
		chromedp.Sleep(300e6),
	)
	browsertest.Screenshot(t, ctx, "preview.png")
	// No script from the hostile actor name ran anywhere.
	if got := browsertest.Eval[bool](t, ctx, `typeof window.alerted === "undefined" && document.querySelectorAll("script:not([src])").length === 0`); !got {
		t.Error("an inline script reached the preview page")
	}
	// Confirmation dialogs are accepted automatically by overriding confirm.
	browsertest.Do(t, ctx,
		chromedp.Navigate(a.srv.URL+"/admin/batches/"+itoa(id)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="flush"]`)),
	)
	browsertest.Eval[bool](t, ctx, `window.confirm = () => true; true`)
	browsertest.Do(t, ctx,
		chromedp.Click(chromedp.CSS(`[data-testid="flush"]`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="flash"]`)),
	)
	// The console enqueued the flush; work it as a River worker would.
	job := &river.Job[jobs.FlushArgs]{JobRow: &rivertype.JobRow{ID: 1, Attempt: 1, MaxAttempts: 8}, Args: jobs.FlushArgs{BatchID: id}}
	if err := a.flush.Work(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	browsertest.Do(t, ctx,
		chromedp.Navigate(a.srv.URL+"/admin/outbox"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="outbox-row"]`)),
	)
	if got := browsertest.Eval[string](t, ctx, `document.querySelector('[data-testid="outbox-row"]').innerText`); !strings.Contains(got, "bob@example.com") {
		t.Errorf("outbox row: %q", got)
	}
}

func TestConsoleTypeEditValidatesAndSaves(t *testing.T) {
	t.Parallel()
	a, _ := consoleSetup(t)
	c := operatorClient(t, a)
	form := url.Values{"name": {"Comments"}, "default_mode": {"daily"}, "window": {"5m"}, "max_wait": {"1h"}, "max_items": {"0"},
		"display_limit": {"5"}, "item_order": {"latest"}, "item_text": {"{{actor.nam}} wrote"}, "group_text": {"{{count}} comments"}, "do": {"save"}}
	req, _ := http.NewRequest("POST", a.srv.URL+"/admin/types/comment/edit", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	doc, _ := goquery.NewDocumentFromReader(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(doc.Find(`[data-testid="error-item_text"]`).Text(), "actor.nam") {
		t.Fatalf("bad placeholder: %d, error %q", resp.StatusCode, doc.Find(`[data-testid="error-item_text"]`).Text())
	}
	form.Set("item_text", "{{actor.name}} wrote")
	postForm(t, c, a.srv.URL+"/admin/types/comment/edit", form)
	typ, err := db.GetType(context.Background(), a.db.Pool, "comment")
	if err != nil {
		t.Fatal(err)
	}
	if typ.ItemText != "{{actor.name}} wrote" || typ.DefaultMode != "daily" || typ.DisplayLimit != 5 {
		t.Fatalf("saved type = %+v", typ)
	}
	if n := countRows(t, a.db, "SELECT count(*) FROM audit_log WHERE action = 'edit type'"); n != 1 {
		t.Fatal("the edit is not in the audit log")
	}
}

// TestConsoleActsOnlyOnOpenBatches: a second Flush (a double click, a
// reload) and a Cancel confirmed after the batch was flushed in another
// tab change nothing: the batch is due, its flush job has it, and the
// console says so instead of "Done".
func TestConsoleActsOnlyOnOpenBatches(t *testing.T) {
	t.Parallel()
	a, id := consoleSetup(t)
	c := operatorClient(t, a)
	batch := a.srv.URL + "/admin/batches/" + itoa(id)
	if _, doc := getDoc(t, c, batch+"/cancel"); doc.Find(`[data-testid="confirm-cancel"]`).Length() != 1 {
		t.Fatal("the open batch's cancel page asks nothing")
	}
	if _, doc := postDoc(t, c, batch+"/flush", nil, ""); !strings.Contains(doc.Find(`[data-testid="flash"]`).Text(), "Done") {
		t.Fatalf("first Flush: %q", doc.Find(`[data-testid="flash"]`).Text())
	}
	for _, action := range []string{"flush", "cancel"} {
		_, doc := postDoc(t, c, batch+"/"+action, nil, "")
		if msg := doc.Find(`[data-testid="flash"]`).Text(); !strings.Contains(msg, "Nothing done") || !strings.Contains(msg, "due") {
			t.Errorf("%s on a flushed batch said %q", action, msg)
		}
	}
	if b, _ := db.GetBatch(context.Background(), a.db.Pool, id); b.State != db.StateOpen {
		t.Errorf("a Cancel confirmed after Flush left the batch %s, want it left to its flush job", b.State)
	}
	audit, err := db.AuditFor(context.Background(), a.db.Pool, "batch", itoa(id))
	if err != nil || len(audit) != 1 {
		t.Errorf("audit log has %d entries (%v), want the one flush", len(audit), err)
	}
}

// TestConsoleJobActionsOnlyWhereOffered: Retry and Cancel on the jobs page
// act only on the jobs they are shown for. A scheduled flush job that has
// not run is not pulled forward by a hand-made Retry, and a second Cancel
// (a double click) neither acts nor is audited again.
func TestConsoleJobActionsOnlyWhereOffered(t *testing.T) {
	t.Parallel()
	a, id := consoleSetup(t)
	c := operatorClient(t, a)
	ctx := context.Background()
	var job int64
	var state string
	if err := a.db.Pool.QueryRow(ctx, `SELECT id, state::text FROM river_job WHERE kind = 'flush_batch' AND (args->>'batch_id')::bigint = $1`, id).Scan(&job, &state); err != nil {
		t.Fatal(err)
	}
	jobState := func() string {
		a.db.Pool.QueryRow(ctx, `SELECT state::text FROM river_job WHERE id = $1`, job).Scan(&state)
		return state
	}
	if before := jobState(); before != "scheduled" {
		t.Fatalf("the batch's flush job is %s, want scheduled", before)
	}
	_, doc := postDoc(t, c, a.srv.URL+"/admin/jobs/"+itoa(job)+"/retry", nil, "")
	if got := jobState(); got != "scheduled" || !strings.Contains(doc.Find(`[data-testid="flash"]`).Text(), "Nothing done") {
		t.Errorf("Retry on a job that never ran: job %s, message %q", got, doc.Find(`[data-testid="flash"]`).Text())
	}
	for i := 0; i < 2; i++ {
		postDoc(t, c, a.srv.URL+"/admin/jobs/"+itoa(job)+"/cancel", nil, "")
	}
	if got := jobState(); got != "cancelled" {
		t.Fatalf("after Cancel the job is %s", got)
	}
	if n := countRows(t, a.db, `SELECT count(*) FROM audit_log WHERE object_type = 'job'`); n != 1 {
		t.Errorf("%d job actions audited, want the one cancel", n)
	}
}

// TestConsoleIsolatesRightToLeftValues: a batch key or recipient id with
// a right-to-left override cannot reorder the text after it on the batch
// and cancel pages ("· cooldown · 1 item"): each value is isolated.
func TestConsoleIsolatesRightToLeftValues(t *testing.T) {
	t.Parallel()
	a, _ := consoleSetup(t)
	res := a.mustCall(t, "POST", "/api/v1/events", `{"type":"comment","batch_key":"doc\u202e7","actor":{"id":"a"},
		"object":{"title":"T"},"recipients":[{"id":"u_\u202eeve","email":"eve@example.com"}]}`, 202)
	id := itoa(int64(res["batches"].([]any)[0].(map[string]any)["id"].(float64)))
	c := operatorClient(t, a)
	for _, page := range []string{"/admin/batches/" + id, "/admin/batches/" + id + "/cancel"} {
		_, doc := getDoc(t, c, a.srv.URL+page)
		var isolated []string
		doc.Find(`.card p`).First().Find(`bdi`).Each(func(_ int, s *goquery.Selection) { isolated = append(isolated, s.Text()) })
		if strings.Join(isolated, "|") != "u_\u202eeve|comment+doc\u202e7" {
			t.Errorf("%s isolates %q, want the recipient and the batch key", page, isolated)
		}
	}
}
