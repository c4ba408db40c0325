package web_test

import (
	"bytes"
	"context"
	"fmt"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/jobs"
)

// simulationSetup posts three pings and two comments for bob through the
// API and sends the pings' emails, so there is history to replay and
// something actually sent to set beside it.
func simulationSetup(t *testing.T) *apiBundle {
	t.Helper()
	a := setupAPI(t)
	a.mustCall(t, "PUT", "/api/v1/types/ping", `{"name":"Pings","default_mode":"immediate"}`, 200)
	a.mustCall(t, "PUT", "/api/v1/types/comment", `{"name":"Comments","default_mode":"cooldown","window":"1m"}`, 200)
	for _, typ := range []string{"ping", "comment", "ping", "comment", "ping"} {
		a.mustCall(t, "POST", "/api/v1/events", `{"type":"`+typ+`","actor":{"id":"a","name":"Alice"},
			"recipients":[{"id":"u_bob","email":"bob@example.com","timezone":"Europe/Berlin"}]}`, 202)
	}
	ctx := context.Background()
	ids, err := db.DueBatches(ctx, a.db.Pool, time.Now(), 100)
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range ids {
		job := &river.Job[jobs.FlushArgs]{JobRow: &rivertype.JobRow{ID: int64(i + 1), Attempt: 1, MaxAttempts: 8}, Args: jobs.FlushArgs{BatchID: id}}
		if err := a.flush.Work(ctx, job); err != nil {
			t.Fatal(err)
		}
	}
	if n := countRows(t, a.db, "SELECT count(*) FROM deliveries WHERE state = 'sent'"); n != 3 {
		t.Fatalf("%d pings sent, want 3", n)
	}
	return a
}

func hourRange() string {
	now := time.Now().UTC()
	return `"from":"` + now.Add(-time.Hour).Format(time.RFC3339) + `","to":"` + now.Add(time.Hour).Format(time.RFC3339) + `"`
}

func TestSimulationAPIComparesPolicies(t *testing.T) {
	t.Parallel()
	a := simulationSetup(t)
	outbox := countRows(t, a.db, "SELECT count(*) FROM outbox")
	// The digest goes out two to three hours after bob's events, whatever
	// the time of day the test runs at.
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	dailyAt := fmt.Sprintf("%02d:00", time.Now().In(berlin).Add(3*time.Hour).Hour())
	rep := a.mustCall(t, "POST", "/api/v1/simulations", `{`+hourRange()+`,"policies":[
		{"name":"Pings batched","types":{"ping":{"mode":"cooldown","window":"10m"}}},
		{"name":"Daily","everyone":{"mode":"daily","daily_at":"`+dailyAt+`"}}]}`, 200)
	if rep["source"] != "stored" || rep["events"].(float64) != 5 {
		t.Fatalf("report: source %v, %v events; want stored, 5", rep["source"], rep["events"])
	}
	results := rep["results"].([]any)
	var names []string
	emails := map[string]float64{}
	for _, r := range results {
		m := r.(map[string]any)
		names = append(names, m["name"].(string))
		emails[m["name"].(string)] = m["overall"].(map[string]any)["emails"].(float64)
	}
	if strings.Join(names, ", ") != "Actually sent, Current settings, Pings batched, Daily" {
		t.Fatalf("results %v", names)
	}
	// Sent so far: the three pings. Replayed: three pings and one comment
	// email; pings in a cool-down: one email each for pings and comments;
	// all daily: one digest.
	want := map[string]float64{"Actually sent": 3, "Current settings": 4, "Pings batched": 2, "Daily": 1}
	for name, n := range want {
		if emails[name] != n {
			t.Errorf("%s: %v emails, want %v", name, emails[name], n)
		}
	}
	daily := results[3].(map[string]any)["overall"].(map[string]any)
	if w := daily["worst_hour"].(map[string]any); w["recipient"] != "u_bob" || w["emails"].(float64) != 1 {
		t.Errorf("worst hour %v", w)
	}
	if d := daily["delay"].(map[string]any); d["median_seconds"].(float64) < 3600 {
		t.Errorf("a daily digest adds hours, got %v", d)
	}
	if n := countRows(t, a.db, "SELECT count(*) FROM outbox"); n != outbox {
		t.Fatal("a simulation sent email")
	}
}

func TestSimulationAPIUploadedEvents(t *testing.T) {
	t.Parallel()
	a := simulationSetup(t)
	rep := a.mustCall(t, "POST", "/api/v1/simulations", `{"events":[
		{"type":"comment","occurred_at":"2026-10-24T20:00:00Z","recipients":[{"id":"u_new","timezone":"America/New_York"}]},
		{"type":"comment","occurred_at":"2026-10-24T20:00:30Z","recipients":["u_new","u_bob"]},
		{"type":"newtype","occurred_at":"2026-10-24T20:10:00Z","recipients":["u_new"]}],
		"policies":[{"types":{"newtype":{"mode":"daily"}}}]}`, 200)
	// u_new, given inline, is no stranger; newtype is not registered.
	if rep["source"] != "upload" || rep["events"].(float64) != 3 || len(rep["notes"].([]any)) != 1 || !strings.Contains(rep["notes"].([]any)[0].(string), "newtype") {
		t.Fatalf("report %v", rep)
	}
	results := rep["results"].([]any)
	if len(results) != 2 || results[1].(map[string]any)["name"] != "Proposal 1" {
		t.Fatalf("results %v", results)
	}
	// Current: comments batch per recipient (2), newtype is immediate (1).
	// Proposed: newtype waits for u_new's digest, 08:00 in New York.
	if got := results[0].(map[string]any)["overall"].(map[string]any)["emails"].(float64); got != 3 {
		t.Errorf("current settings: %v emails, want 3", got)
	}
	types := results[1].(map[string]any)["types"].([]any)
	if nt := types[1].(map[string]any); nt["type"] != "newtype" || nt["worst_hour"].(map[string]any)["start"] != "2026-10-25T12:00:00Z" {
		t.Errorf("newtype proposed: %v", nt)
	}
}

func TestSimulationAPINamesTheField(t *testing.T) {
	t.Parallel()
	a := simulationSetup(t)
	cases := []struct{ name, body, field string }{
		{"BadWindow", `{` + hourRange() + `,"policies":[{"types":{"ping":{"mode":"cooldown","window":"soon"}}}]}`, "policies[0].types.ping.window"},
		{"UnknownType", `{` + hourRange() + `,"policies":[{},{"types":{"pong":{"mode":"daily"}}}]}`, "policies[1].types.pong"},
		{"BadDigestTime", `{` + hourRange() + `,"policies":[{"everyone":{"mode":"daily","daily_at":"25:00"}}]}`, "policies[0].everyone.daily_at"},
		{"ToBeforeFrom", `{"from":"2026-11-20","to":"2026-11-19","policies":[]}`, "to"},
		{"RangeTooLong", `{"from":"2026-01-01","to":"2026-03-01","policies":[]}`, "to"},
		{"BadFrom", `{"from":"last week","to":"2026-11-19","policies":[]}`, "from"},
		{"NoRange", `{"policies":[]}`, "from"},
		{"BothSources", `{` + hourRange() + `,"events":[{}],"policies":[]}`, "events"},
		{"BadEvent", `{"events":[{"type":"ping","occurred_at":"2026-10-24T20:00:00Z","recipients":["u_bob"]},{"type":"ping","recipients":["u_bob"]}]}`, "events[1].occurred_at"},
		{"UnknownField", `{` + hourRange() + `,"policy":[]}`, "policy"},
		{"TooManyPolicies", `{` + hourRange() + `,"policies":[{},{},{},{},{},{}]}`, "policies"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			status, p := a.call(t, "POST", "/api/v1/simulations", tc.body)
			if status != http.StatusUnprocessableEntity || fieldOf(p) != tc.field {
				t.Errorf("%d naming %q, want 422 naming %q: %v", status, fieldOf(p), tc.field, p)
			}
		})
	}
	if status, _ := a.call(t, "POST", "/api/v1/simulations", `{"policies":`); status != http.StatusBadRequest {
		t.Errorf("cut-off JSON = %d, want 400", status)
	}
}

// postDoc submits a form (multipart when file is set) and parses the page.
func postDoc(t *testing.T, c *http.Client, u string, form url.Values, file string) (*http.Response, *goquery.Document) {
	t.Helper()
	var body bytes.Buffer
	ctype := "application/x-www-form-urlencoded"
	if file != "" {
		mw := multipart.NewWriter(&body)
		for k, vs := range form {
			for _, v := range vs {
				mw.WriteField(k, v)
			}
		}
		fw, _ := mw.CreateFormFile("events", "events.jsonl")
		fw.Write([]byte(file))
		mw.Close()
		ctype = mw.FormDataContentType()
	} else {
		body.WriteString(form.Encode())
	}
	req, _ := http.NewRequest("POST", u, &body)
	req.Header.Set("Content-Type", ctype)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	resp, err := c.Do(req)
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

func TestConsoleSimulator(t *testing.T) {
	t.Parallel()
	a := simulationSetup(t)
	if err := db.UpsertOperator(context.Background(), a.db.Pool, "ops@example.com", "correct horse"); err != nil {
		t.Fatal(err)
	}
	c := operatorClient(t, a)
	u := a.srv.URL + "/admin/simulate"

	resp, doc := getDoc(t, c, u)
	if resp.StatusCode != 200 || doc.Find(`[data-testid="proposal-a-comment"] select[name="a.types.comment.mode"]`).Length() != 1 {
		t.Fatalf("simulator page: %d, no mode field for comments", resp.StatusCode)
	}
	if doc.Find(`nav.admin a[href="/admin/simulate"][aria-current="page"]`).Length() != 1 {
		t.Error("no current menu entry for the simulator")
	}
	if doc.Find(`#f-from`).AttrOr("value", "") == "" {
		t.Error("the range has no default")
	}

	// "What if comments used a 10-minute cool-down, and pings one of 5?"
	now := time.Now().UTC()
	form := url.Values{"source": {"stored"}, "from": {now.Add(-time.Hour).Format("2006-01-02T15:04")}, "to": {now.Add(time.Hour).Format("2006-01-02T15:04")},
		"a.types.comment.mode": {"cooldown"}, "a.types.comment.window": {"10m"}, "a.types.ping.mode": {"cooldown"}, "a.types.ping.window": {"5m"},
		"b.name": {"All daily"}, "b.everyone.mode": {"daily"}, "b.everyone.daily_at": {"07:00"}}
	resp, doc = postDoc(t, c, u, form, "")
	if resp.StatusCode != 200 {
		t.Fatalf("simulate: %d %s", resp.StatusCode, doc.Find(".error").Text())
	}
	var cols []string
	doc.Find(`[data-testid="result-column"]`).Each(func(_ int, s *goquery.Selection) { cols = append(cols, s.Contents().First().Text()) })
	if strings.Join(cols, ", ") != "Actually sent, Current settings, Proposal A, All daily" {
		t.Fatalf("columns %v", cols)
	}
	var emails []string
	doc.Find(`[data-testid="metric-Emails"] td`).Each(func(_ int, s *goquery.Selection) { emails = append(emails, s.Text()) })
	if strings.Join(emails, " ") != "3 4 2 1" {
		t.Errorf("emails %v, want 3 4 2 1", emails)
	}
	if got := doc.Find(`[data-testid="metric-Change"] td`).Eq(2).Text(); got != "-2 (-50%)" {
		t.Errorf("change for proposal A %q", got)
	}
	if n := doc.Find(`[data-testid="chart"] rect`).Length(); n != 4 {
		t.Errorf("chart has %d bars, want 4", n)
	}
	if doc.Find(`[data-testid="type-comment"]`).Length() != 1 {
		t.Error("no row for comments in the by-type table")
	}
	if v := doc.Find(`input[name="a.types.comment.window"]`).AttrOr("value", ""); v != "10m" {
		t.Errorf("the form lost the window: %q", v)
	}

	// Mistakes are shown next to their fields, and nothing is run.
	form.Set("a.types.comment.window", "soon")
	form.Set("a.types.ping.max_items", "many")
	form.Set("b.everyone.daily_at", "7am")
	resp, doc = postDoc(t, c, u, form, "")
	if resp.StatusCode != http.StatusUnprocessableEntity || doc.Find(`[data-testid="results"]`).Length() != 0 {
		t.Fatalf("bad form: %d, results shown: %v", resp.StatusCode, doc.Find(`[data-testid="results"]`).Length() != 0)
	}
	if doc.Find(`[data-testid="error-a.types.ping.max_items"]`).Length() != 1 {
		t.Errorf("no error next to max items: %s", doc.Find(".error").Text())
	}
	form.Set("a.types.ping.max_items", "")
	resp, doc = postDoc(t, c, u, form, "")
	for _, f := range []string{"a.types.comment.window", "b.everyone.daily_at"} {
		if doc.Find(`[data-testid="error-`+f+`"]`).Length() != 1 {
			t.Errorf("no error next to %s: %d %s", f, resp.StatusCode, doc.Find(".error").Text())
		}
	}
	form.Set("a.types.comment.window", "10m")
	form.Set("b.everyone.daily_at", "07:00")
	form.Set("from", "yesterday")
	resp, doc = postDoc(t, c, u, form, "")
	if resp.StatusCode != http.StatusUnprocessableEntity || doc.Find(`[data-testid="error-from"]`).Length() != 1 {
		t.Errorf("bad range: %d %s", resp.StatusCode, doc.Find(".error").Text())
	}

	// A file of events instead of stored ones.
	file := `{"type":"comment","occurred_at":"2026-10-24T20:00:00Z","recipients":["u_bob"]}
{"type":"comment","occurred_at":"2026-10-24T20:03:00Z","recipients":["u_bob"]}
`
	resp, doc = postDoc(t, c, u, url.Values{"source": {"upload"}, "a.types.comment.window": {"10m"}}, file)
	if resp.StatusCode != 200 || doc.Find(`[data-testid="result-column"]`).Length() != 2 {
		t.Fatalf("upload: %d, %d columns: %s", resp.StatusCode, doc.Find(`[data-testid="result-column"]`).Length(), doc.Find(".error").Text())
	}
	resp, doc = postDoc(t, c, u, url.Values{"source": {"upload"}}, "{\"type\":\"comment\"}\n")
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(doc.Find(`[data-testid="error-events"]`).Text(), "line 1") {
		t.Errorf("bad file: %d %q", resp.StatusCode, doc.Find(`[data-testid="error-events"]`).Text())
	}
	if doc.Find("script:not([src])").Length() != 0 {
		t.Error("an inline script reached the page")
	}
}
