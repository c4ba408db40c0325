package web_test

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/mailtemplates"
)

// sendDigest closes bob's digest batch id now, flushes it and returns
// its email and the HTML part read as a document.
func sendDigest(t *testing.T, a *apiBundle, id int64) (db.OutboxMessage, *goquery.Document) {
	t.Helper()
	ctx := context.Background()
	if _, err := a.db.Pool.Exec(ctx, `UPDATE batches SET closes_at = now() - interval '1 second', wake_at = now() - interval '1 second' WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	a.workFlush(t, id)
	sent, err := db.ListOutbox(ctx, a.db.Pool, id, 0, 1)
	if err != nil || len(sent) != 1 {
		t.Fatal(sent, err)
	}
	doc, err := goquery.NewDocumentFromReader(strings.NewReader(sent[0].HTML))
	if err != nil {
		t.Fatal(err)
	}
	return sent[0], doc
}

// itemMuteLinks are a digest's per-conversation mute links, by the text
// of the item each follows.
func itemMuteLinks(doc *goquery.Document) map[string]string {
	out := map[string]string{}
	doc.Find(`[data-testid=item-mute]`).Each(func(_ int, s *goquery.Selection) {
		item := s.Closest(`[data-testid=item]`)
		out[strings.TrimSpace(item.Find("a.l-link, span.l-text").First().Text())] = s.AttrOr("href", "")
	})
	return out
}

// TestDigestOffersToMuteEachConversation: a digest of comments on two
// documents has a mute link for each, in both parts; following one (the
// page, then its button) mutes that document's conversation, so the next
// digest holds only the other, whose one item's email offers its mute in
// the footer.
func TestDigestOffersToMuteEachConversation(t *testing.T) {
	t.Parallel()
	a := brandSetup(t)
	a.mustCall(t, "PUT", "/api/v1/recipients/u_bob/preferences", `{"types":{"comment":{"mode":"daily"}}}`, 200)
	id := a.postEvent(t, "comment", "Alice", "doc:7")
	if other := a.postEvent(t, "comment", "Fatima", "doc:8"); other != id {
		t.Fatalf("two digests: %d and %d", id, other)
	}
	email, doc := sendDigest(t, a, id)
	links := itemMuteLinks(doc)
	if len(links) != 2 {
		t.Fatalf("mute links by item: %v\n%s", links, email.Text)
	}
	var alice, fatima string
	for item, link := range links {
		if !strings.Contains(email.Text, "Mute conversation:\n  <"+link+">") {
			t.Errorf("the text part lacks the mute link of %q:\n%s", item, email.Text)
		}
		switch {
		case strings.Contains(item, "Alice"):
			alice = link
		case strings.Contains(item, "Fatima"):
			fatima = link
		}
	}
	if alice == "" || fatima == "" || alice == fatima || doc.Find(`[data-testid=mute-link]`).Length() != 0 {
		t.Fatalf("no mute link by Alice's comment, or one in the footer: %v", links)
	}

	bob := browserClient(t)
	resp, page := getDoc(t, bob, strings.Replace(alice, "http://lull.test", a.srv.URL, 1))
	if resp.StatusCode != 200 || !strings.Contains(page.Find(`[data-testid=mute-text]`).Text(), "Comments · doc:7") || mutedRows(t, a) != 0 {
		t.Fatalf("confirm page %d: %q, %d mutes", resp.StatusCode, page.Find("main").Text(), mutedRows(t, a))
	}
	action, _ := page.Find("form").Attr("action")
	if resp, page = postDoc(t, bob, a.srv.URL+action, url.Values{"for": {"forever"}}, ""); resp.StatusCode != 200 {
		t.Fatalf("mute %d: %q", resp.StatusCode, page.Find("main").Text())
	}
	if n := countRows(t, a.db, `SELECT count(*) FROM muted_threads WHERE recipient_id = 'u_bob' AND batch_key = 'comment+doc:7'`); n != 1 {
		t.Fatalf("%d mutes of doc:7", n)
	}

	// The muted document's comment opens no batch; the other's does.
	if res := a.mustCall(t, "POST", "/api/v1/events", `{"type":"comment","actor":{"id":"c","name":"Chen"},"batch_key":"doc:7","recipients":["u_bob"]}`, 202); len(res["batches"].([]any)) != 0 {
		t.Fatalf("a comment of the muted conversation: %v", res)
	}
	next := a.postEvent(t, "comment", "Jonas", "doc:8")
	email, doc = sendDigest(t, a, next)
	if !strings.Contains(email.Text, "Jonas") || strings.Contains(email.Text, "Chen") {
		t.Fatalf("the next digest:\n%s", email.Text)
	}
	footer, _ := doc.Find(`[data-testid=mute-link]`).Attr("href")
	u, _ := url.Parse(footer)
	who, thread, err := a.flush.Links.VerifyData(u.Query().Get("token"), mailtemplates.PurposeMute, time.Now())
	if err != nil || who != "u_bob" || thread != "comment+doc:8" || !strings.Contains(email.Text, "Mute this conversation:\n<"+footer+">") {
		t.Fatalf("a digest of one conversation's one item offers no mute of it (%q: %s %s %v):\n%s", footer, who, thread, err, email.Text)
	}
}

// TestDigestOffersNoMuteForRequired: in a digest holding a required
// type's items and a plain type's, only the plain type's conversation
// has a mute link, in either part.
func TestDigestOffersNoMuteForRequired(t *testing.T) {
	t.Parallel()
	a := brandSetup(t)
	a.mustCall(t, "PUT", "/api/v1/types/security", `{"name":"Security alerts","required":true,"default_mode":"daily"}`, 200)
	a.mustCall(t, "PUT", "/api/v1/recipients/u_bob/preferences", `{"types":{"comment":{"mode":"daily"}}}`, 200)
	id := a.postEvent(t, "security", "Guard", "login:1")
	if other := a.postEvent(t, "security", "Guard", "login:2"); other != id {
		t.Fatalf("two digests: %d and %d", id, other)
	}
	if other := a.postEvent(t, "comment", "Alice", "doc:7"); other != id {
		t.Fatalf("two digests: %d and %d", id, other)
	}
	email, doc := sendDigest(t, a, id)
	links := itemMuteLinks(doc)
	if len(links) != 1 || strings.Count(email.Text, "Mute conversation:") != 1 || doc.Find(`[data-testid=mute-link]`).Length() != 0 {
		t.Fatalf("mute links %v in:\n%s", links, email.Text)
	}
	for item := range links {
		if !strings.Contains(item, "Alice") {
			t.Errorf("a mute link by %q", item)
		}
	}
}
