package web_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/mailtemplates"
)

// muteSetup sends bob one comment of thread doc:7 and returns the mute
// link of its email, on the test server.
func muteSetup(t *testing.T) (*apiBundle, string) {
	t.Helper()
	a := brandSetup(t)
	sent, link := commentLink(t, a, "doc:7", "mute-link")
	if !strings.Contains(sent.Text, "Mute this conversation:\n<"+strings.Replace(link, a.srv.URL, "http://lull.test", 1)+">") {
		t.Fatalf("no mute link in the email:\n%s", sent.Text)
	}
	return a, link
}

// commentLink sends bob one comment of thread key and returns its email
// and the link of its element with data-testid testid, on the test server.
func commentLink(t *testing.T, a *apiBundle, key, testid string) (db.OutboxMessage, string) {
	t.Helper()
	id := a.postEvent(t, "comment", "Alice", key)
	a.workFlush(t, id)
	sent, err := db.ListOutbox(context.Background(), a.db.Pool, id, 0, 1)
	if err != nil || len(sent) != 1 {
		t.Fatal(sent, err)
	}
	email, _ := goquery.NewDocumentFromReader(strings.NewReader(sent[0].HTML))
	link, ok := email.Find(`[data-testid=` + testid + `]`).Attr("href")
	if !ok {
		t.Fatalf("no %s in the email:\n%s", testid, sent[0].Text)
	}
	return sent[0], strings.Replace(link, "http://lull.test", a.srv.URL, 1)
}

func mutedRows(t *testing.T, a *apiBundle) int {
	t.Helper()
	return countRows(t, a.db, "SELECT count(*) FROM muted_threads WHERE recipient_id = 'u_bob'")
}

// TestMuteLinkAsksThenMutesForAWeek: the email's link shows the
// choices and changes nothing; the button mutes the conversation for
// the chosen time, says until when, and its undo turns it back on.
func TestMuteLinkAsksThenMutesForAWeek(t *testing.T) {
	t.Parallel()
	a, link := muteSetup(t)
	bob := browserClient(t)
	resp, doc := getDoc(t, bob, link)
	if resp.StatusCode != 200 || doc.Find("h1").Text() != "Mute this conversation?" || doc.Find(`input[name=for]`).Length() != 3 {
		t.Fatalf("confirm page %d: %q", resp.StatusCode, doc.Find("main").Text())
	}
	if !strings.Contains(doc.Find(`[data-testid=mute-text]`).Text(), "Comments · doc:7") || mutedRows(t, a) != 0 {
		t.Fatalf("the page: %q, %d mutes", doc.Find(`[data-testid=mute-text]`).Text(), mutedRows(t, a))
	}
	action, _ := doc.Find("form").Attr("action")
	resp, doc = postDoc(t, bob, a.srv.URL+action, url.Values{"for": {"7d"}}, "")
	if resp.StatusCode != 200 || doc.Find("h1").Text() != "Conversation muted" || !strings.Contains(doc.Find(`[data-testid=mute-text]`).Text(), "until") {
		t.Fatalf("done page %d: %q", resp.StatusCode, doc.Find("main").Text())
	}
	var left time.Duration
	if err := a.db.Pool.QueryRow(context.Background(), `SELECT extract(epoch FROM until - now())::bigint * 1000000000 FROM muted_threads
		WHERE recipient_id = 'u_bob' AND batch_key = 'comment+doc:7'`).Scan(&left); err != nil || left < 6*24*time.Hour || left > 7*24*time.Hour {
		t.Fatalf("the mute ends in %v (%v), want a week", left, err)
	}
	// A comment of the thread now opens no batch.
	if res := a.mustCall(t, "POST", "/api/v1/events", `{"type":"comment","actor":{"id":"c","name":"Chen"},"batch_key":"doc:7","recipients":["u_bob"]}`, 202); len(res["batches"].([]any)) != 0 {
		t.Fatalf("a comment of the muted thread: %v", res)
	}
	undo, _ := doc.Find(`[data-testid=undo]`).Closest("form").Attr("action")
	resp, doc = postDoc(t, bob, a.srv.URL+undo, nil, "")
	if resp.StatusCode != 200 || doc.Find("h1").Text() != "Conversation unmuted" || mutedRows(t, a) != 0 {
		t.Fatalf("undo %d: %q, %d mutes", resp.StatusCode, doc.Find("main").Text(), mutedRows(t, a))
	}
}

// TestMutePageSpeaksTheRecipientsLanguage: the page of a German
// recipient is German, and says so.
func TestMutePageSpeaksTheRecipientsLanguage(t *testing.T) {
	t.Parallel()
	a, link := muteSetup(t)
	a.mustCall(t, "PUT", "/api/v1/recipients/u_bob", `{"locale":"de"}`, 200)
	_, doc := getDoc(t, browserClient(t), link)
	if h1 := doc.Find("h1").Text(); h1 != "Diese Unterhaltung stummschalten?" || doc.Find("html").AttrOr("lang", "") != "de" {
		t.Errorf("a German recipient's page: %q", h1)
	}
}

// TestMuteLinkRefusesWhatItDidNotSign: a tampered, expired or unsigned
// link, a duration the page does not offer, and a required type's
// conversation each get a page saying so, and nothing is muted.
func TestMuteLinkRefusesWhatItDidNotSign(t *testing.T) {
	t.Parallel()
	a, link := muteSetup(t)
	u, _ := url.Parse(link)
	token := u.Query().Get("token")
	p, sig, _ := strings.Cut(token, ".")
	links := a.flush.Links
	other := links.SignedToken("mute", "u_bob", "comment+doc:8", time.Now().Add(time.Hour))
	op, _, _ := strings.Cut(other, ".")
	cases := map[string]struct {
		token, heading string
	}{
		"tampered":    {op + "." + sig, "This link is not valid"},
		"cut":         {p, "This link is not valid"},
		"unsubscribe": {strings.TrimPrefix(links.UnsubscribeURL("u_bob", nil, time.Now()), "http://lull.test/unsubscribe?token="), "This link is not valid"},
		"expired":     {links.SignedToken(mailtemplates.PurposeMute, "u_bob", "comment+doc:7", time.Now().Add(-time.Hour)), "This link has expired"},
		"required":    {links.SignedToken(mailtemplates.PurposeMute, "u_bob", "security+login", time.Now().Add(time.Hour)), "This conversation cannot be muted"},
		"no thread":   {links.SignedToken(mailtemplates.PurposeMute, "u_bob", "comment", time.Now().Add(time.Hour)), "This conversation cannot be muted"},
		"no type":     {links.SignedToken(mailtemplates.PurposeMute, "u_bob", "nosuch+x", time.Now().Add(time.Hour)), "This conversation cannot be muted"},
		"huge":        {links.SignedToken(mailtemplates.PurposeMute, "u_bob", "comment+"+strings.Repeat("x", 100_000), time.Now().Add(time.Hour)), "This conversation cannot be muted"},
	}
	for name, c := range cases {
		target := a.srv.URL + "/mute?" + url.Values{"token": {c.token}}.Encode()
		for _, post := range []bool{false, true} {
			var resp *http.Response
			var doc *goquery.Document
			if post {
				resp, doc = postDoc(t, browserClient(t), target, url.Values{"for": {"forever"}}, "")
			} else {
				resp, doc = getDoc(t, browserClient(t), target)
			}
			if resp.StatusCode < 400 || doc.Find("h1").Text() != c.heading {
				t.Errorf("%s (post %v): %d %q", name, post, resp.StatusCode, doc.Find("h1").Text())
			}
		}
	}
	for _, d := range []string{"", "1y", "-1d", "0", "forever\x00"} {
		resp, doc := postDoc(t, browserClient(t), link, url.Values{"for": {d}}, "")
		if resp.StatusCode != http.StatusUnprocessableEntity && resp.StatusCode != http.StatusBadRequest {
			t.Errorf("for=%q: %d %q", d, resp.StatusCode, doc.Find("h1").Text())
		}
	}
	if n := mutedRows(t, a); n != 0 {
		t.Fatalf("%d mutes after refused links", n)
	}
}

// TestSettingsListMuteWithItsEnd: the settings page lists a mute for a
// while with its end in the recipient's zone, and turns it back on.
func TestSettingsListMuteWithItsEnd(t *testing.T) {
	t.Parallel()
	a, link := muteSetup(t)
	a.mustCall(t, "PUT", "/api/v1/recipients/u_bob", `{"timezone":"Asia/Tokyo"}`, 200)
	bob := browserClient(t)
	_, doc := getDoc(t, bob, link)
	action, _ := doc.Find("form").Attr("action")
	postDoc(t, bob, a.srv.URL+action, url.Values{"for": {"1d"}}, "")

	settings := a.mustCall(t, "POST", "/api/v1/recipients/u_bob/preferences-link", "", 200)["url"].(string)
	getDoc(t, bob, strings.Replace(settings, "http://lull.test", a.srv.URL, 1))
	_, doc = getDoc(t, bob, a.srv.URL+"/settings")
	end := time.Now().Add(24 * time.Hour).In(time.FixedZone("JST", 9*3600))
	text := doc.Find(`[data-testid="muted-threads"]`).Text()
	if !strings.Contains(text, "Comments · doc:7 (muted until") || !strings.Contains(text, end.Format("January 2")) || !strings.Contains(text, "JST") {
		t.Fatalf("settings list: %q", text)
	}
	postDoc(t, bob, a.srv.URL+"/settings/threads", url.Values{"thread": {"comment+doc:7"}}, "")
	if n := mutedRows(t, a); n != 0 {
		t.Fatalf("%d mutes after turning it back on", n)
	}
	_, doc = getDoc(t, bob, a.srv.URL+"/settings")
	if doc.Find(`[data-testid="muted-threads"]`).Length() != 0 {
		t.Error("the list still shows it")
	}
}

// TestMuteAndUndoAtOnce: mutes and undos of one conversation racing end
// with every request answered and the table agreeing with the last one.
func TestMuteAndUndoAtOnce(t *testing.T) {
	t.Parallel()
	a, link := muteSetup(t)
	bob := browserClient(t)
	_, doc := postDoc(t, bob, link, url.Values{"for": {"forever"}}, "")
	undo, _ := doc.Find(`[data-testid=undo]`).Closest("form").Attr("action")
	var wg sync.WaitGroup
	codes := make(chan int, 40)
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			target, form := link, url.Values{"for": {"1d"}}
			if i%2 == 1 {
				target, form = a.srv.URL+undo, nil
			}
			resp, err := http.PostForm(target, form)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			codes <- resp.StatusCode
		}()
	}
	wg.Wait()
	close(codes)
	for c := range codes {
		if c != 200 {
			t.Errorf("a racing request got %d", c)
		}
	}
	if n := mutedRows(t, a); n > 1 {
		t.Fatalf("%d mutes of one conversation", n)
	}
	// Whatever order they ran in, the next action decides.
	postDoc(t, bob, link, url.Values{"for": {"forever"}}, "")
	if n := countRows(t, a.db, "SELECT count(*) FROM muted_threads WHERE until IS NULL"); n != 1 {
		t.Fatalf("%d mutes for good after a last mute", n)
	}
}

// TestFeedGroupsOfferAMuteLink: a feed group of a conversation carries a
// signed link to its mute page; a required type's group does not.
func TestFeedGroupsOfferAMuteLink(t *testing.T) {
	t.Parallel()
	a := brandSetup(t)
	a.postEvent(t, "comment", "Alice", "doc:7")
	a.postEvent(t, "security", "System", "login")
	feed := a.mustCall(t, "GET", "/api/v1/recipients/u_bob/feed", "", 200)
	for _, g := range feed["groups"].([]any) {
		g := g.(map[string]any)
		mute, _ := g["mute_url"].(string)
		switch g["type"] {
		case "comment":
			u, err := url.Parse(mute)
			if err != nil {
				t.Fatal(err)
			}
			who, thread, err := a.flush.Links.VerifyData(u.Query().Get("token"), mailtemplates.PurposeMute, time.Now())
			if err != nil || who != "u_bob" || thread != "comment+doc:7" || u.Path != "/mute" {
				t.Errorf("comment group's mute link %q: %s %s %v", mute, who, thread, err)
			}
		case "security":
			if mute != "" {
				t.Errorf("a required type's group offers %q", mute)
			}
		}
	}
}

// TestPreferencesAPIMutesConversations: the host mutes and turns back on
// conversations through the preferences API, and what a mute cannot be
// is refused naming the field, with nothing changed.
func TestPreferencesAPIMutesConversations(t *testing.T) {
	t.Parallel()
	a := brandSetup(t)
	until := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	got := a.mustCall(t, "PUT", "/api/v1/recipients/u_bob/preferences",
		`{"muted":{"comment+doc:7":{"until":"`+until.Format(time.RFC3339)+`"},"comment+doc:8":{}}}`, 200)["muted"].(map[string]any)
	if len(got) != 2 || got["comment+doc:7"].(map[string]any)["until"] != until.Format(time.RFC3339) || got["comment+doc:8"].(map[string]any)["until"] != nil {
		t.Fatalf("muted: %v", got)
	}
	if res := a.mustCall(t, "POST", "/api/v1/events", `{"type":"comment","actor":{"id":"c","name":"Chen"},"batch_key":"doc:7","recipients":["u_bob"]}`, 202); len(res["batches"].([]any)) != 0 {
		t.Fatalf("a comment of a muted conversation: %v", res)
	}
	got = a.mustCall(t, "PUT", "/api/v1/recipients/u_bob/preferences", `{"muted":{"comment+doc:7":null}}`, 200)["muted"].(map[string]any)
	if len(got) != 1 || got["comment+doc:8"] == nil {
		t.Fatalf("after turning doc:7 back on: %v", got)
	}
	many := map[string]any{}
	for i := range 101 {
		many["comment+doc:"+itoa(int64(i))] = map[string]any{}
	}
	manyJSON, _ := json.Marshal(map[string]any{"muted": many})
	for body, field := range map[string]string{
		`{"muted":{"security+login":{}}}`:                                                  "muted.security+login",
		`{"muted":{"nosuch+x":{}}}`:                                                        "muted.nosuch+x",
		`{"muted":{"comment":{}}}`:                                                         "muted.comment",
		`{"muted":{"comment+` + strings.Repeat("x", 400) + `":{}}}`:                        "muted.comment+" + strings.Repeat("x", 400),
		`{"muted":{"comment+doc:9":{"until":"2020-01-01T00:00:00Z"}}}`:                     "muted.comment+doc:9.until",
		`{"muted":{"comment+doc:9":{"until":"2099-01-01T00:00:00Z"}}}`:                     "muted.comment+doc:9.until",
		`{"muted":{"comment+doc:9":{}, "comment+doc:8":{"until":"2020-01-01T00:00:00Z"}}}`: "muted.comment+doc:8.until",
		string(manyJSON): "muted",
	} {
		status, p := a.call(t, "PUT", "/api/v1/recipients/u_bob/preferences", body)
		if status != 422 || fieldOf(p) != field {
			t.Errorf("%.80s: %d %v", body, status, p)
		}
	}
	if n := mutedRows(t, a); n != 1 {
		t.Fatalf("%d mutes after refused requests, want 1", n)
	}
	if got := a.mustCall(t, "PUT", "/api/v1/recipients/u_bob/preferences", `{"muted":null}`, 200)["muted"].(map[string]any); len(got) != 0 {
		t.Fatalf("after muted: null: %v", got)
	}
}

// TestSimulatorHonoursMutes: replayed under the current settings, a
// muted conversation sends nothing, as the engine sent nothing, while
// another of its type still makes its email.
func TestSimulatorHonoursMutes(t *testing.T) {
	t.Parallel()
	a := brandSetup(t)
	a.mustCall(t, "PUT", "/api/v1/recipients/u_bob/preferences", `{"muted":{"comment+doc:7":{}}}`, 200)
	for _, thread := range []string{"doc:7", "doc:7", "doc:8"} {
		a.mustCall(t, "POST", "/api/v1/events", `{"type":"comment","actor":{"id":"a","name":"Alice"},"batch_key":"`+thread+`","recipients":["u_bob"]}`, 202)
	}
	if n := countRows(t, a.db, "SELECT count(*) FROM batches"); n != 1 {
		t.Fatalf("the engine opened %d batches, want 1", n)
	}
	rep := a.mustCall(t, "POST", "/api/v1/simulations", `{`+hourRange()+`}`, 200)
	for _, r := range rep["results"].([]any) {
		m := r.(map[string]any)
		if m["name"] == "Current settings" && m["overall"].(map[string]any)["emails"].(float64) != 1 {
			t.Errorf("the simulator sends %v emails, want 1: %v", m["overall"].(map[string]any)["emails"], m["overall"])
		}
	}
}

// TestReplayedUndoKeepsALaterMute: the undo of a mute turns back on only
// that mute. Replayed (a reload, the browser's history) after the
// recipient muted the conversation again, it leaves the later mute and
// says so; the later mute's own undo turns the conversation back on. So
// does the undo of an unsubscribe from the thread.
func TestReplayedUndoKeepsALaterMute(t *testing.T) {
	t.Parallel()
	a, link := muteSetup(t)
	bob := browserClient(t)
	mute := func(choice string) string {
		t.Helper()
		_, doc := postDoc(t, bob, link, url.Values{"for": {choice}}, "")
		undo, ok := doc.Find(`[data-testid=undo]`).Closest("form").Attr("action")
		if !ok {
			t.Fatalf("no undo after muting: %q", doc.Find("main").Text())
		}
		return a.srv.URL + undo
	}
	undo := func(target, heading string, rows int) {
		t.Helper()
		resp, doc := postDoc(t, bob, target, nil, "")
		if resp.StatusCode != 200 || doc.Find("h1").Text() != heading || mutedRows(t, a) != rows {
			t.Fatalf("undo %d: %q, %q, %d mutes; want %q and %d", resp.StatusCode, doc.Find("h1").Text(), doc.Find("main").Text(),
				mutedRows(t, a), heading, rows)
		}
	}
	first := mute("1d")
	later := mute("forever")
	undo(first, "Still muted", 1)
	if n := countRows(t, a.db, "SELECT count(*) FROM muted_threads WHERE until IS NULL"); n != 1 {
		t.Fatalf("the later mute (for good) was changed: %d for good", n)
	}
	undo(later, "Conversation unmuted", 0)
	undo(later, "Conversation unmuted", 0) // again: nothing to keep

	// The same through the thread's unsubscribe link.
	a.mustCall(t, "PUT", "/api/v1/types/comment", `{"name":"Comments","default_mode":"immediate","unsubscribe":"thread"}`, 200)
	_, unsub := commentLink(t, a, "doc:7", "unsubscribe-link")
	_, doc := postDoc(t, bob, unsub, nil, "")
	unsubUndo, ok := doc.Find(`[data-testid=undo]`).Closest("form").Attr("action")
	if !ok || mutedRows(t, a) != 1 {
		t.Fatalf("unsubscribe from the thread: %q, %d mutes", doc.Find("main").Text(), mutedRows(t, a))
	}
	mute("7d")
	undo(a.srv.URL+unsubUndo, "Still muted", 1)
}

// TestPreferencesAPIMuteCap: the API refuses a change that would leave
// more than db.MaxMutes conversations muted, naming the field, with
// nothing changed. Mutes by the links in emails are never refused, so a
// recipient can be past the cap already: a change that leaves fewer
// muted, or as many, is then taken, and one that adds is refused.
func TestPreferencesAPIMuteCap(t *testing.T) {
	t.Parallel()
	a := brandSetup(t)
	put := func(body string) (int, map[string]any) {
		t.Helper()
		return a.call(t, "PUT", "/api/v1/recipients/u_bob/preferences", body)
	}
	if _, err := a.db.Pool.Exec(context.Background(), `INSERT INTO muted_threads (recipient_id, batch_key)
		SELECT 'u_bob', 'comment+doc:' || i FROM generate_series(1, $1::int) i`, db.MaxMutes-1); err != nil {
		t.Fatal(err)
	}
	if status, p := put(`{"muted":{"comment+new:1":{}}}`); status != 200 {
		t.Fatalf("the last mute under the cap: %d %v", status, p)
	}
	if status, p := put(`{"muted":{"comment+new:2":{}}}`); status != 422 || fieldOf(p) != "muted" {
		t.Fatalf("a mute past the cap: %d %v", status, p)
	}
	// Two more by the emails' links, past the cap.
	if _, err := a.db.Pool.Exec(context.Background(), `INSERT INTO muted_threads (recipient_id, batch_key) VALUES ('u_bob', 'comment+link:1'), ('u_bob', 'comment+link:2')`); err != nil {
		t.Fatal(err)
	}
	for body, want := range map[string]int{
		`{"muted":{"comment+doc:1":null}}`:                     200, // one fewer, still past the cap
		`{"muted":{"comment+doc:2":null, "comment+new:3":{}}}`: 200, // as many
		`{"muted":{"comment+new:4":{}}}`:                       422, // one more
	} {
		if status, p := put(body); status != want {
			t.Errorf("%s: %d %v, want %d", body, status, p, want)
		}
	}
	if n := mutedRows(t, a); n != db.MaxMutes+1 {
		t.Errorf("%d mutes, want %d", n, db.MaxMutes+1)
	}
}
