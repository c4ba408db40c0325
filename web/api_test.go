package web_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/db/dbtest"
	"github.com/lull-dev/lull/jobs"
	"github.com/lull-dev/lull/mail"
	"github.com/lull-dev/lull/mailtemplates"
	"github.com/lull-dev/lull/preferences/batching"
	"github.com/lull-dev/lull/web"
)

const testKey = "lull_test_key_0123456789"

type apiBundle struct {
	db    *db.DB
	srv   *httptest.Server
	web   *web.Server
	flush *jobs.FlushWorker
	// http checks every API call against openapi.json (contractCheck).
	http *http.Client
}

// setupAPI serves the real router on a test database with one API key.
func setupAPI(t *testing.T) *apiBundle {
	t.Helper()
	return serveAPI(t, dbtest.New(t))
}

// serveAPI is setupAPI on a database the test opened itself.
func serveAPI(t *testing.T, d *db.DB) *apiBundle {
	t.Helper()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	if err := db.AddAPIKey(context.Background(), d.Pool, "test", testKey); err != nil {
		t.Fatal(err)
	}
	links := mailtemplates.Links{BaseURL: "http://lull.test", Secret: []byte("0123456789abcdef0123456789abcdef")}
	brands := &batching.Brands{DB: d.Pool}
	flush := &jobs.FlushWorker{DB: d, Sender: &mail.Outbox{DB: d}, Links: links, Logger: logger, From: "lull@example.com", Brands: brands}
	client, err := jobs.NewClient(d, jobs.Config{Workers: 1, JobTimeout: time.Minute, RescueAfter: time.Hour, SweepEvery: time.Hour, Retention: 720 * time.Hour}, flush, logger, true)
	if err != nil {
		t.Fatal(err)
	}
	s := &web.Server{DB: d, Logger: logger, BaseURL: "http://lull.test", Links: links, MailFrom: "lull@example.com", Brands: brands, Jobs: jobs.Control{Client: client},
		Engine: &batching.Engine{DB: d, Scheduler: &jobs.Scheduler{Client: client}, Logger: logger}}
	s.Feed = &web.FeedHub{DB: d, Logger: logger}
	ctx, cancel := context.WithCancel(context.Background())
	go s.Feed.Run(ctx)
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(func() { cancel(); srv.Close() })
	return &apiBundle{db: d, srv: srv, web: s, flush: flush, http: &http.Client{Transport: contractCheck{http.DefaultTransport}}}
}

// call sends a request with the API key and decodes the JSON answer. The
// call is checked against openapi.json.
func (a *apiBundle) call(t *testing.T, method, path, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, a.srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	raw, _ := io.ReadAll(resp.Body)
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatalf("%s %s: answer is not JSON: %s", method, path, raw)
		}
	}
	if resp.StatusCode >= 400 && resp.Header.Get("Content-Type") != "application/problem+json" {
		t.Errorf("%s %s: error answered as %q, want application/problem+json", method, path, resp.Header.Get("Content-Type"))
	}
	return resp.StatusCode, out
}

func (a *apiBundle) mustCall(t *testing.T, method, path, body string, want int) map[string]any {
	t.Helper()
	got, out := a.call(t, method, path, body)
	if got != want {
		t.Fatalf("%s %s = %d, want %d: %v", method, path, got, want, out)
	}
	return out
}

// fieldOf returns the first invalid field a problem names.
func fieldOf(p map[string]any) string {
	errs, _ := p["errors"].([]any)
	if len(errs) == 0 {
		return ""
	}
	e, _ := errs[0].(map[string]any)
	f, _ := e["field"].(string)
	return f
}

func TestAPIRefusesMissingOrWrongKey(t *testing.T) {
	t.Parallel()
	a := setupAPI(t)
	for _, auth := range []string{"", "Bearer nope", "Basic abc"} {
		req, _ := http.NewRequest("GET", a.srv.URL+"/api/v1/types", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := a.http.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("Content-Type") != "application/problem+json" {
			t.Errorf("Authorization %q: %d %s, want 401 problem+json", auth, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
	}
}

func TestAPIEventLifecycle(t *testing.T) {
	t.Parallel()
	a := setupAPI(t)
	a.mustCall(t, "PUT", "/api/v1/types/comment.created", `{"name":"Comments","default_mode":"cooldown","window":"5m","max_wait":"1h"}`, 200)
	a.mustCall(t, "PUT", "/api/v1/recipients/u_bob", `{"email":"bob@example.com","name":"Bob","timezone":"Europe/Berlin"}`, 200)
	ev := `{"type":"comment.created","key":"c-1","actor":{"id":"u_alice","name":"Alice"},
		"object":{"type":"document","id":"doc_7","title":"Q3 plan","url":"https://app.example/doc/7"},
		"recipients":["u_bob",{"id":"u_carol","email":"carol@example.com","name":"Carol","timezone":"Asia/Tokyo"}],
		"batch_key":"document:doc_7","data":{"excerpt":"Looks good"}}`
	first := a.mustCall(t, "POST", "/api/v1/events", ev, 202)
	if first["notifications"].(float64) != 2 {
		t.Fatalf("notifications = %v, want 2", first["notifications"])
	}
	again := a.mustCall(t, "POST", "/api/v1/events", ev, 202)
	if again["id"] != first["id"] {
		t.Fatalf("replayed key gave event %v, want %v", again["id"], first["id"])
	}
	batches := first["batches"].([]any)
	b0 := batches[0].(map[string]any)
	if b0["batch_key"] != "comment.created+document:doc_7" {
		t.Fatalf("batch_key = %v", b0["batch_key"])
	}
	id := int64(b0["id"].(float64))

	detail := a.mustCall(t, "GET", "/api/v1/batches/"+itoa(id), "", 200)
	if detail["state"] != "open" || len(detail["items"].([]any)) != 1 {
		t.Fatalf("batch detail = %v", detail)
	}
	list := a.mustCall(t, "GET", "/api/v1/batches?state=open&limit=1", "", 200)
	if len(list["batches"].([]any)) != 1 || list["next_cursor"] == nil {
		t.Fatalf("listing with limit 1 = %v, want one batch and a cursor", list)
	}
	next := a.mustCall(t, "GET", "/api/v1/batches?state=open&limit=1&cursor="+list["next_cursor"].(string), "", 200)
	if len(next["batches"].([]any)) != 1 {
		t.Fatalf("second page = %v", next)
	}
	if next["batches"].([]any)[0].(map[string]any)["id"] == list["batches"].([]any)[0].(map[string]any)["id"] {
		t.Fatal("second page repeats the first")
	}

	ret := a.mustCall(t, "DELETE", "/api/v1/events?key=c-1", "", 200)
	if ret["removed"].(float64) != 2 || len(ret["canceled_batches"].([]any)) != 2 {
		t.Fatalf("retraction = %v, want 2 removed and 2 batches canceled", ret)
	}
	a.mustCall(t, "POST", "/api/v1/batches/"+itoa(id)+"/cancel", "", 409)
}

func TestAPIValidationNamesTheField(t *testing.T) {
	t.Parallel()
	a := setupAPI(t)
	a.mustCall(t, "PUT", "/api/v1/types/comment", `{"name":"Comments"}`, 200)
	a.mustCall(t, "PUT", "/api/v1/recipients/u_bob", `{"email":"bob@example.com"}`, 200)
	cases := []struct {
		name, method, path, body string
		status                   int
		field                    string
	}{
		{"UnknownType", "POST", "/api/v1/events", `{"type":"nope","recipients":["u_bob"]}`, 422, "type"},
		{"UnknownRecipient", "POST", "/api/v1/events", `{"type":"comment","recipients":["u_bob","u_ghost"]}`, 422, "recipients[1]"},
		{"BadEmail", "POST", "/api/v1/events", `{"type":"comment","recipients":[{"id":"x","email":"not-an-email"}]}`, 422, "recipients[0].email"},
		{"BadZone", "POST", "/api/v1/events", `{"type":"comment","recipients":[{"id":"x","timezone":"Mars/Base"}]}`, 422, "recipients[0].timezone"},
		{"NoRecipients", "POST", "/api/v1/events", `{"type":"comment","recipients":[]}`, 422, "recipients"},
		{"UnknownField", "POST", "/api/v1/events", `{"type":"comment","recipient":["u_bob"]}`, 422, "recipient"},
		{"WrongJSONType", "POST", "/api/v1/events", `{"type":7,"recipients":["u_bob"]}`, 422, "type"},
		{"NUL", "POST", "/api/v1/events", `{"type":"comment","recipients":["u_bob"],"data":{"x":"a\u0000b"}}`, 422, "body"},
		{"Malformed", "POST", "/api/v1/events", `{"type":`, 400, ""},
		{"WindowTooShort", "PUT", "/api/v1/types/t2", `{"window":"500ms"}`, 422, "window"},
		{"WindowUnparseable", "PUT", "/api/v1/types/t2", `{"window":"soon"}`, 422, "window"},
		{"MaxWaitBelowOneSecond", "PUT", "/api/v1/types/t2", `{"max_wait":"100ms"}`, 422, "max_wait"},
		{"BadMode", "PUT", "/api/v1/types/t2", `{"default_mode":"fortnightly"}`, 422, "default_mode"},
		{"BadPlaceholder", "PUT", "/api/v1/types/t2", `{"item_text":"{{actor.nam}} did it"}`, 422, "item_text"},
		{"PrefBadWindow", "PUT", "/api/v1/recipients/u_bob/preferences", `{"types":{"comment":{"mode":"cooldown","window":"0s"}}}`, 422, "types.comment.window"},
		{"PrefUnknownType", "PUT", "/api/v1/recipients/u_bob/preferences", `{"types":{"nope":{"mode":"daily"}}}`, 422, "types.nope"},
		{"PrefBadTime", "PUT", "/api/v1/recipients/u_bob/preferences", `{"digest":{"daily_at":"25:00"}}`, 422, "digest.daily_at"},
		{"RecipientBadZone", "PUT", "/api/v1/recipients/u_x", `{"timezone":"Nowhere"}`, 422, "timezone"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, p := a.call(t, tc.method, tc.path, tc.body)
			if got != tc.status {
				t.Fatalf("status %d, want %d: %v", got, tc.status, p)
			}
			if f := fieldOf(p); f != tc.field {
				t.Fatalf("field %q, want %q: %v", f, tc.field, p)
			}
			if p["type"] == nil || p["title"] == nil || p["status"] == nil {
				t.Fatalf("problem lacks type/title/status: %v", p)
			}
		})
	}
	if n := countRows(t, a.db, "SELECT count(*) FROM events"); n != 0 {
		t.Fatalf("refused requests stored %d events", n)
	}
}

func TestAPIBodyLimit(t *testing.T) {
	t.Parallel()
	a := setupAPI(t)
	body := `{"description":"` + strings.Repeat("a", 5<<20) + `"}`
	got, _ := a.call(t, "PUT", "/api/v1/types/comment", body)
	if got != http.StatusRequestEntityTooLarge {
		t.Fatalf("5 MiB body = %d, want 413", got)
	}
}

func TestAPIPreferencesRoundTrip(t *testing.T) {
	t.Parallel()
	a := setupAPI(t)
	a.mustCall(t, "PUT", "/api/v1/types/comment", `{}`, 200)
	a.mustCall(t, "PUT", "/api/v1/recipients/u_bob", `{"email":"bob@example.com"}`, 200)
	body := `{"timezone":"America/New_York","digest":{"daily_at":"07:30","weekly_on":"friday","weekly_at":"16:00"},
		"quiet_hours":{"start":"22:00","end":"07:00"},"unsubscribed":false,
		"types":{"comment":{"mode":"cooldown","window":"15m","max_wait":"1h"}}}`
	a.mustCall(t, "PUT", "/api/v1/recipients/u_bob/preferences", body, 200)
	got := a.mustCall(t, "GET", "/api/v1/recipients/u_bob/preferences", "", 200)
	d := got["digest"].(map[string]any)
	c := got["types"].(map[string]any)["comment"].(map[string]any)
	if got["timezone"] != "America/New_York" || d["daily_at"] != "07:30" || d["weekly_on"] != "friday" ||
		c["mode"] != "cooldown" || c["window"] != "15m" || c["max_wait"] != "1h" ||
		got["quiet_hours"].(map[string]any)["start"] != "22:00" {
		t.Fatalf("preferences did not round-trip: %v", got)
	}
	link := a.mustCall(t, "POST", "/api/v1/recipients/u_bob/preferences-link", "", 200)
	if !strings.HasPrefix(link["url"].(string), "http://lull.test/settings/enter?token=") || link["expires_at"] == nil {
		t.Fatalf("preferences link = %v", link)
	}
}

// TestUnsubscribeInBrowser: the link opened in a browser asks first, with
// a styled page that needs no style attribute (the content security
// policy allows none), and the button unsubscribes; an expired link gets
// a friendly page and no button.
func TestUnsubscribeInBrowser(t *testing.T) {
	t.Parallel()
	a := setupAPI(t)
	a.mustCall(t, "PUT", "/api/v1/recipients/u_bob", `{"email":"bob@example.com"}`, 200)
	page := func(method, link string) (int, *goquery.Document) {
		link = strings.Replace(link, "http://lull.test", a.srv.URL, 1)
		req, _ := http.NewRequest(method, link, nil)
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		doc, err := goquery.NewDocumentFromReader(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		if n := doc.Find("[style], style").Length(); n > 0 || doc.Find(`link[rel=stylesheet]`).Length() != 1 {
			t.Errorf("%s %s: %d inline styles, %d stylesheets; want none and the app's", method, link, n, doc.Find(`link[rel=stylesheet]`).Length())
		}
		return resp.StatusCode, doc
	}
	link := a.web.Links.UnsubscribeURL("u_bob", nil, time.Now())
	status, doc := page("GET", link)
	action, _ := doc.Find("form").Attr("action")
	if status != 200 || !strings.HasPrefix(link, "http://lull.test"+action) || doc.Find(`[data-testid=unsubscribe]`).Length() != 1 {
		t.Fatalf("confirm page: %d, form to %q, want 200 and a button posting to the link", status, action)
	}
	if n := countRows(t, a.db, "SELECT count(*) FROM recipients WHERE unsubscribed"); n != 0 {
		t.Fatal("opening the link unsubscribed")
	}
	status, doc = page("POST", "http://lull.test"+action)
	if status != 200 || !strings.Contains(doc.Find("h1").Text(), "You are unsubscribed") ||
		countRows(t, a.db, "SELECT count(*) FROM recipients WHERE id = 'u_bob' AND unsubscribed") != 1 {
		t.Fatalf("pressing the button: %d %q, want bob unsubscribed", status, doc.Find("h1").Text())
	}
	expired := a.web.Links.UnsubscribeURL("u_bob", nil, time.Now().Add(-91*24*time.Hour))
	status, doc = page("GET", expired)
	if status != http.StatusForbidden || !strings.Contains(doc.Find("h1").Text(), "expired") || doc.Find("form").Length() != 0 {
		t.Fatalf("expired link: %d %q, want 403, a friendly page and no button", status, doc.Find("h1").Text())
	}
}

func TestOneClickUnsubscribe(t *testing.T) {
	t.Parallel()
	a := setupAPI(t)
	a.mustCall(t, "PUT", "/api/v1/recipients/u_bob", `{"email":"bob@example.com"}`, 200)
	url := a.web.Links.UnsubscribeURL("u_bob", nil, time.Now())
	url = strings.Replace(url, "http://lull.test", a.srv.URL, 1)
	resp, err := http.Post(url, "application/x-www-form-urlencoded", strings.NewReader("List-Unsubscribe=One-Click"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("one-click POST = %d, want 200", resp.StatusCode)
	}
	if n := countRows(t, a.db, "SELECT count(*) FROM recipients WHERE id = 'u_bob' AND unsubscribed"); n != 1 {
		t.Fatal("one-click POST did not unsubscribe")
	}
	resp, err = http.Post(url+"x", "application/x-www-form-urlencoded", strings.NewReader("List-Unsubscribe=One-Click"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("tampered token = %d, want 403", resp.StatusCode)
	}
}

func countRows(t *testing.T, d *db.DB, sql string) int {
	t.Helper()
	var n int
	if err := d.Pool.QueryRow(context.Background(), sql).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
