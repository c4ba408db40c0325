package web_test

import (
	"net/url"
	"strings"
	"testing"
	"time"
)

// The shared page mails a link only to recipients who get the type: an
// address of a recipient who never had one of its emails (found in
// another type's email, or guessed) gets nothing, so the page cannot make
// lull mail strangers links about emails they never received.
func TestSharedUnsubscribeMailsOnlyMembersOfTheType(t *testing.T) {
	t.Parallel()
	a := setupAPI(t)
	box := make(mailbox, 10)
	a.web.Mail = box
	a.mustCall(t, "PUT", "/api/v1/types/task.failed", `{"name":"Failed tasks","shared_delivery":true}`, 200)
	a.mustCall(t, "PUT", "/api/v1/recipients/u_ann", `{"email":"ann@example.com","name":"Ann"}`, 200)
	a.mustCall(t, "PUT", "/api/v1/recipients/u_bob", `{"email":"bob@example.com","name":"Bob"}`, 200)
	a.mustCall(t, "POST", "/api/v1/events", `{"type":"task.failed","actor":{"id":"ci"},"object":{"title":"build"},
		"recipients":[{"id":"u_bob"}]}`, 202)
	link := a.web.Links.SharedUnsubscribeURL("task.failed", time.Now())
	link = a.srv.URL + strings.TrimPrefix(link, "http://lull.test")
	c := browserClient(t)
	if resp, _ := postDoc(t, c, link, url.Values{"email": {"ann@example.com"}}, ""); resp.StatusCode != 200 {
		t.Fatalf("a non-member's address answered %d, want the same 200 as anyone's", resp.StatusCode)
	}
	postDoc(t, c, link, url.Values{"email": {"bob@example.com"}}, "")
	got := map[string]bool{}
	for !got["bob@example.com"] {
		select {
		case m := <-box:
			got[m.To] = true
		case <-time.After(5 * time.Second):
			t.Fatal("no link mailed to the member")
		}
	}
	select {
	case m := <-box:
		got[m.To] = true
	case <-time.After(300 * time.Millisecond):
	}
	if got["ann@example.com"] {
		t.Fatal("mailed a link to ann@example.com, who never got the type")
	}
}
