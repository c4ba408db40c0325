package web_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/db/dbtest"
	"github.com/lull-dev/lull/jobs"
	"github.com/lull-dev/lull/web"
)

func feedSetup(t *testing.T) *apiBundle {
	t.Helper()
	a := setupAPI(t)
	a.mustCall(t, "PUT", "/api/v1/types/comment", `{"name":"Comments","default_mode":"cooldown","window":"1h",
		"group_text":"{{actors}} commented on {{object.title}}|{{actors}} left {{count}} comments on {{object.title}}"}`, 200)
	a.mustCall(t, "PUT", "/api/v1/types/share", `{"name":"Shares","default_mode":"cooldown","window":"1h"}`, 200)
	a.mustCall(t, "PUT", "/api/v1/recipients/u_bob", `{"email":"bob@example.com"}`, 200)
	return a
}

func (a *apiBundle) postEvent(t *testing.T, typ, actor, batchKey string) int64 {
	t.Helper()
	res := a.mustCall(t, "POST", "/api/v1/events", `{"type":"`+typ+`","actor":{"id":"`+actor+`","name":"`+actor+`"},
		"object":{"title":"Q3 plan"},"batch_key":"`+batchKey+`","recipients":["u_bob"]}`, 202)
	return int64(res["batches"].([]any)[0].(map[string]any)["id"].(float64))
}

func (a *apiBundle) workFlush(t *testing.T, batchID int64) {
	t.Helper()
	job := &river.Job[jobs.FlushArgs]{JobRow: &rivertype.JobRow{ID: batchID, Attempt: 1, MaxAttempts: 8}, Args: jobs.FlushArgs{BatchID: batchID}}
	if err := a.flush.Work(context.Background(), job); err != nil {
		t.Fatal(err)
	}
}

func TestFeedGroupsAndPages(t *testing.T) {
	t.Parallel()
	a := feedSetup(t)
	a.postEvent(t, "share", "Chen", "")
	for _, who := range []string{"Alice", "Fatima", "Jonas"} {
		a.postEvent(t, "comment", who, "doc:7")
	}
	feed := a.mustCall(t, "GET", "/api/v1/recipients/u_bob/feed", "", 200)
	groups := feed["groups"].([]any)
	if len(groups) != 2 {
		t.Fatalf("%d groups, want comments then shares: %v", len(groups), groups)
	}
	g := groups[0].(map[string]any)
	if g["text"] != "Jonas, Fatima and Alice left 3 comments on Q3 plan" || g["count"].(float64) != 3 || g["unread"].(float64) != 3 {
		t.Fatalf("first group = %v", g)
	}
	if feed["unread"].(float64) != 4 || feed["unread_by_type"].(map[string]any)["comment"].(float64) != 3 {
		t.Fatalf("counts = %v / %v", feed["unread"], feed["unread_by_type"])
	}
	// A page of 2 takes the third comment too, rather than cut the group
	// in two; the next page holds the share, and is the last.
	page := a.mustCall(t, "GET", "/api/v1/recipients/u_bob/feed?limit=2", "", 200)
	next := a.mustCall(t, "GET", "/api/v1/recipients/u_bob/feed?limit=2&cursor="+page["next_cursor"].(string), "", 200)
	first, second := page["groups"].([]any), next["groups"].([]any)
	if len(first) != 1 || len(first[0].(map[string]any)["notifications"].([]any)) != 3 ||
		len(second) != 1 || second[0].(map[string]any)["type"] != "share" || next["next_cursor"] != nil {
		t.Fatalf("paging by 2: %v then %v (next cursor %v)", first, second, next["next_cursor"])
	}
	for _, bad := range []string{"abc", "0", "-5", "1e3"} {
		if got, p := a.call(t, "GET", "/api/v1/recipients/u_bob/feed?cursor="+bad, ""); got != 422 || fieldOf(p) != "cursor" {
			t.Errorf("cursor %q: %d %v, want 422 naming cursor (not the first page again)", bad, got, p)
		}
	}
	if page := a.mustCall(t, "GET", "/api/v1/recipients/u_bob/feed?limit=4", "", 200); page["next_cursor"] != nil {
		t.Fatalf("a page holding the whole feed has a next cursor: %v", page["next_cursor"])
	}
	a.mustCall(t, "POST", "/api/v1/recipients/u_bob/feed/seen", "", 200)
	if c := a.mustCall(t, "GET", "/api/v1/recipients/u_bob/feed/count", "", 200); c["unseen"].(float64) != 0 || c["unread"].(float64) != 4 {
		t.Fatalf("after seen: %v", c)
	}
}

func TestReadInAppIsNotEmailed(t *testing.T) {
	t.Parallel()
	a := feedSetup(t)
	id := a.postEvent(t, "comment", "Alice", "doc:7")
	a.postEvent(t, "comment", "Fatima", "doc:7")
	feed := a.mustCall(t, "GET", "/api/v1/recipients/u_bob/feed", "", 200)
	notes := feed["groups"].([]any)[0].(map[string]any)["notifications"].([]any)
	alice := notes[1].(map[string]any)["id"].(float64)
	a.mustCall(t, "POST", "/api/v1/recipients/u_bob/feed/read", `{"ids":[`+itoa(int64(alice))+`]}`, 200)
	if b, _ := db.GetBatch(context.Background(), a.db.Pool, id); b.ItemCount != 1 {
		t.Fatalf("batch has %d items after one was read, want 1", b.ItemCount)
	}
	if n := countRows(t, a.db, "SELECT coalesce(sum(items), 0) FROM skips WHERE reason = 'read in app' AND batch_id = "+itoa(id)); n != 1 {
		t.Fatalf("the skip log has %d items read in app, want the one", n)
	}
	a.mustCall(t, "POST", "/api/v1/batches/"+itoa(id)+"/flush", "", 202)
	a.workFlush(t, id)
	out, err := db.ListOutbox(context.Background(), a.db.Pool, id, 0, 10)
	if err != nil || len(out) != 1 {
		t.Fatalf("outbox: %v, %d emails", err, len(out))
	}
	if strings.Contains(out[0].Text, "Alice") || !strings.Contains(out[0].Text, "Fatima") {
		t.Fatalf("the email still carries the notification read in the app:\n%s", out[0].Text)
	}
}

func TestAllReadCancelsTheBatch(t *testing.T) {
	t.Parallel()
	a := feedSetup(t)
	id := a.postEvent(t, "comment", "Alice", "doc:7")
	a.postEvent(t, "comment", "Fatima", "doc:7")
	res := a.mustCall(t, "POST", "/api/v1/recipients/u_bob/feed/read", `{"all":true}`, 200)
	if res["read"].(float64) != 2 || len(res["canceled_batches"].([]any)) != 1 {
		t.Fatalf("read all = %v", res)
	}
	b, _ := db.GetBatch(context.Background(), a.db.Pool, id)
	if b.State != db.StateCanceled || b.Reason != db.SkipRead {
		t.Fatalf("batch %s (%q), want canceled as read in app", b.State, b.Reason)
	}
	if n := countRows(t, a.db, "SELECT coalesce(sum(items), 0) FROM skips WHERE reason = 'read in app'"); n != 2 {
		t.Fatalf("the skip log says %d items were read in app, want 2", n)
	}
}

func TestFeedStreamSendsCountChanges(t *testing.T) {
	t.Parallel()
	a := feedSetup(t)
	req, _ := http.NewRequest("GET", a.srv.URL+"/api/v1/recipients/u_bob/feed/stream", nil)
	req.Header.Set("Authorization", "Bearer "+testKey)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp, err := a.http.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	events := make(chan string, 10)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if line, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				events <- line
			}
		}
	}()
	next := func() string {
		select {
		case e := <-events:
			return e
		case <-time.After(10 * time.Second):
			t.Fatal("no event from the stream")
		}
		return ""
	}
	if first := next(); !strings.Contains(first, `"unread":0`) {
		t.Fatalf("first event %s, want unread 0", first)
	}
	a.postEvent(t, "comment", "Alice", "doc:7")
	if got := next(); !strings.Contains(got, `"unread":1`) {
		t.Fatalf("after an event: %s, want unread 1", got)
	}
	// A closed stream stops the watch, so ingest stops notifying.
	cancel()
	watchers := func() (n int) {
		a.db.Pool.QueryRow(context.Background(), "SELECT count(*) FROM feed_watchers").Scan(&n)
		return n
	}
	for deadline := time.Now().Add(10 * time.Second); watchers() > 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the watch outlived its stream")
		}
	}
}

// TestFeedAnnouncesLargeFanOutOnce: an event to 15,000 recipients, 1,200
// of whom have a feed stream open (600 in each of its first two chunks),
// is announced to listening processes as one "*", not per recipient.
func TestFeedAnnouncesLargeFanOutOnce(t *testing.T) {
	t.Parallel()
	a := hostileSetup(t)
	ctx := context.Background()
	var watched []string
	for i := range 600 {
		watched = append(watched, fmt.Sprintf("u_%07d", i), fmt.Sprintf("u_%07d", 10_000+i))
	}
	if err := db.WatchFeed(ctx, a.db.Pool, "test", watched, time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	heard := feedAnnouncements(t, a, func() {
		if status, _, p := a.raw(t, "POST", "/api/v1/events", recipientsBody(15_000, true)); status != http.StatusAccepted {
			t.Fatalf("15,000 recipients: %d %v", status, p)
		}
	})
	if len(heard) != 1 || heard[0] != "*" {
		t.Fatalf("heard %d announcements (%v first), want one \"*\"", len(heard), heard[:min(len(heard), 3)])
	}
}

// TestFeedAnnouncesTheWatchedOfAFanOut: an event to 15,000 recipients,
// three of whom have a feed stream open, is announced for those three,
// and for no one else watched: what the narrowing of db.WatchedAmong
// must keep (its own test, in db, fails when it narrows nothing).
func TestFeedAnnouncesTheWatchedOfAFanOut(t *testing.T) {
	t.Parallel()
	a := hostileSetup(t)
	ctx := context.Background()
	watched := []string{"u_0000003", "u_0012000", "u_0014999", "u_elsewhere"}
	if err := db.WatchFeed(ctx, a.db.Pool, "test", watched, time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	heard := feedAnnouncements(t, a, func() {
		if status, _, p := a.raw(t, "POST", "/api/v1/events", recipientsBody(15_000, true)); status != http.StatusAccepted {
			t.Fatalf("15,000 recipients: %d %v", status, p)
		}
	})
	slices.Sort(heard)
	if want := watched[:3]; !slices.Equal(heard, want) {
		t.Fatalf("heard %v, want %v", heard, want)
	}
}

// feedAnnouncements returns what lull announced to listening processes
// while do ran.
func feedAnnouncements(t *testing.T, a *apiBundle, do func()) []string {
	ctx := context.Background()
	conn, err := a.db.Pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "LISTEN lull_feed"); err != nil {
		t.Fatal(err)
	}
	do()
	var heard []string
	for {
		wait, cancel := context.WithTimeout(ctx, time.Second)
		n, err := conn.Conn().WaitForNotification(wait)
		cancel()
		if err != nil {
			return heard
		}
		heard = append(heard, n.Payload)
	}
}

// TestProblemListsAtMostAHundredFields: an event naming 5,000 bad inline
// recipients is answered with the first hundred errors and a count of
// the rest, not a list as long as the request.
func TestProblemListsAtMostAHundredFields(t *testing.T) {
	t.Parallel()
	a := setupAPI(t)
	a.mustCall(t, "PUT", "/api/v1/types/comment", `{"name":"Comments"}`, 200)
	var b strings.Builder
	b.WriteString(`{"type":"comment","recipients":[`)
	for i := range 5000 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"id":"r` + itoa(int64(i)) + `","email":"not an address"}`)
	}
	b.WriteString(`]}`)
	got, p := a.call(t, "POST", "/api/v1/events", b.String())
	errs, _ := p["errors"].([]any)
	if got != 422 || len(errs) != 101 {
		t.Fatalf("status %d with %d errors, want 422 with 100 and a count", got, len(errs))
	}
	if last := errs[100].(map[string]any); last["field"] != "body" || !strings.Contains(last["message"].(string), "4900 more") {
		t.Fatalf("last error %v", last)
	}
}

// A stream opened before its process's hub listens (lull just started)
// is woken once the hub does: a change made in between was not heard,
// and would otherwise show only with the next.
func TestFeedHubWakesWhoSubscribedBeforeItListened(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	hub := &web.FeedHub{DB: d, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	wake, stop, err := hub.Subscribe(context.Background(), "u_early")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go hub.Run(ctx)
	select {
	case <-wake:
	case <-time.After(10 * time.Second):
		t.Fatal("a stream subscribed before the hub listened was never woken")
	}
}
