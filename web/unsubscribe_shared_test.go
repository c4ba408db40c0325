package web_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/lull-dev/lull/mailtemplates"
)

// mailbox is a web.Mailer that hands every email to the test.
type mailbox chan *mailtemplates.Message

func (m mailbox) Send(_ context.Context, msg *mailtemplates.Message) error { m <- msg; return nil }

// A shared email's unsubscribe link names only its type. Its page asks
// for an address and mails that address's recipient their own link;
// opening the page, or asking for someone else's address, unsubscribes
// nobody. Unknown addresses get the same answer and no email, and one
// address gets at most one link every ten minutes.
func TestSharedUnsubscribeMailsEachTheirOwnLink(t *testing.T) {
	t.Parallel()
	a := setupAPI(t)
	box := make(mailbox, 10)
	a.web.Mail = box
	a.mustCall(t, "PUT", "/api/v1/types/task.failed", `{"name":"Failed tasks","shared_delivery":true,"texts":{"de":{"name":"Fehlgeschlagene Aufgaben"}}}`, 200)
	a.mustCall(t, "PUT", "/api/v1/recipients/u_ann", `{"email":"ann@example.com","name":"Ann"}`, 200)
	a.mustCall(t, "PUT", "/api/v1/recipients/u_bob", `{"email":"Bob@Example.com","name":"Bob","locale":"de"}`, 200)
	a.mustCall(t, "POST", "/api/v1/events", `{"type":"task.failed","actor":{"id":"ci"},"object":{"title":"build"},
		"recipients":[{"id":"u_bob"}]}`, 202)
	link := a.web.Links.SharedUnsubscribeURL("task.failed", time.Now())
	link = a.srv.URL + strings.TrimPrefix(link, "http://lull.test")
	c := browserClient(t)

	resp, doc := getDoc(t, c, link)
	if resp.StatusCode != 200 || doc.Find(`[data-testid="send-link"]`).Length() != 1 {
		t.Fatalf("the page answered %d without its form", resp.StatusCode)
	}
	if resp, _ := getDoc(t, c, link+"x"); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a tampered link answered %d", resp.StatusCode)
	}
	resp, doc = postDoc(t, c, link, url.Values{"email": {"nobody@example.com"}}, "")
	answer := doc.Find(`[data-testid="intro"]`).Text()
	if resp.StatusCode != 200 || !strings.Contains(answer, "nobody@example.com") {
		t.Fatalf("an unknown address: %d %q", resp.StatusCode, answer)
	}
	resp, doc = postDoc(t, c, link, url.Values{"email": {" bob@example.com "}}, "")
	if resp.StatusCode != 200 || doc.Find("form").Length() != 0 {
		t.Fatalf("a member's address: %d", resp.StatusCode)
	}
	var m *mailtemplates.Message
	select {
	case m = <-box:
	case <-time.After(5 * time.Second):
		t.Fatal("no link mailed to the member")
	}
	if m.To != "Bob@Example.com" || !strings.Contains(m.Subject, "Fehlgeschlagene Aufgaben") {
		t.Fatalf("mailed %q to %s; want Bob's link, in German", m.Subject, m.To)
	}
	postDoc(t, c, link, url.Values{"email": {"bob@example.com"}}, "")
	select {
	case m := <-box:
		t.Fatalf("a second link within ten minutes, to %s", m.To)
	case <-time.After(300 * time.Millisecond):
	}
	if st := a.mustCall(t, "GET", "/api/v1/recipients/u_bob/preferences", "", 200); strings.Contains(mustJSON(t, st), `"never"`) {
		t.Fatal("asking for the link already unsubscribed Bob")
	}
	personal := regexp.MustCompile(`http://lull\.test/unsubscribe\?token=[^>\s]+`).FindString(m.Text)
	if personal == "" {
		t.Fatalf("no personal link in %q", m.Text)
	}
	req, _ := http.NewRequest("POST", a.srv.URL+strings.TrimPrefix(personal, "http://lull.test"), strings.NewReader("List-Unsubscribe=One-Click"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if r, err := http.DefaultClient.Do(req); err != nil || r.StatusCode != 200 {
		t.Fatalf("the personal link: %v %v", r, err)
	}
	bob := mustJSON(t, a.mustCall(t, "GET", "/api/v1/recipients/u_bob/preferences", "", 200))
	ann := mustJSON(t, a.mustCall(t, "GET", "/api/v1/recipients/u_ann/preferences", "", 200))
	if !strings.Contains(bob, `"never"`) || strings.Contains(ann, `"never"`) {
		t.Fatalf("after Bob's link: Bob %s, Ann %s; want only Bob's failed tasks off", bob, ann)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
