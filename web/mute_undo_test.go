package web_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

func muteUndoLink(t *testing.T, a *apiBundle, key, testid string) string {
	t.Helper()
	_, link := commentLink(t, a, key, testid)
	return link
}

func muteFor(t *testing.T, a *apiBundle, c *http.Client, link, choice string) string {
	t.Helper()
	resp, doc := postDoc(t, c, link, url.Values{"for": {choice}}, "")
	undo, ok := doc.Find(`[data-testid=undo]`).Closest("form").Attr("action")
	if resp.StatusCode != 200 || !ok {
		t.Fatalf("mute %d: %q", resp.StatusCode, doc.Find("main").Text())
	}
	return a.srv.URL + undo
}

func isMuted(t *testing.T, a *apiBundle, key string) bool {
	t.Helper()
	return countRows(t, a.db, fmt.Sprintf("SELECT count(*) FROM muted_threads WHERE recipient_id = 'u_bob' AND batch_key = '%s'",
		strings.ReplaceAll(key, "'", "''"))) == 1
}

// TestMuteUndoOfAKeyWithANewline: an event's batch key may hold a
// newline (JSON "\n"). The undo of a mute of "comment+doc:7\nx" turns
// back on that conversation, not "comment+doc:7", which a button split
// at newlines would read.
func TestMuteUndoOfAKeyWithANewline(t *testing.T) {
	t.Parallel()
	a := brandSetup(t)
	bob := browserClient(t)
	plain := muteUndoLink(t, a, "doc:7", "mute-link")
	odd := muteUndoLink(t, a, `doc:7\nx`, "mute-link")
	muteFor(t, a, bob, plain, "forever")
	undo := muteFor(t, a, bob, odd, "forever")
	if !isMuted(t, a, "comment+doc:7") || !isMuted(t, a, "comment+doc:7\nx") {
		t.Fatalf("both conversations should be muted: %d rows", mutedRows(t, a))
	}
	resp, doc := postDoc(t, bob, undo, nil, "")
	if resp.StatusCode != 200 {
		t.Fatalf("undo %d: %q", resp.StatusCode, doc.Find("main").Text())
	}
	if !isMuted(t, a, "comment+doc:7") {
		t.Errorf("the undo of the mute of %q turned back on %q, which it was not made for (page: %q)",
			"comment+doc:7\nx", "comment+doc:7", doc.Find("main").Text())
	}
	if isMuted(t, a, "comment+doc:7\nx") {
		t.Errorf("the undo left the conversation it was made for muted")
	}
}

// TestStillMutedLinksTheSettings: "Still muted" tells the recipient to
// turn the conversation back on in their settings, so after the undo of
// an unsubscribe from the thread, as after a mute's, the page links them
// while the email's settings link would still work.
func TestStillMutedLinksTheSettings(t *testing.T) {
	t.Parallel()
	a, link := muteSetup(t)
	bob := browserClient(t)
	a.mustCall(t, "PUT", "/api/v1/types/comment", `{"name":"Comments","default_mode":"immediate","unsubscribe":"thread"}`, 200)
	unsub := muteUndoLink(t, a, "doc:7", "unsubscribe-link")
	_, doc := postDoc(t, bob, unsub, nil, "")
	action, ok := doc.Find(`[data-testid=undo]`).Closest("form").Attr("action")
	if !ok || doc.Find(`[data-testid=settings-link]`).Length() != 1 {
		t.Fatalf("unsubscribe from the thread: %q", doc.Find("main").Text())
	}
	unsubUndo := a.srv.URL + action
	muteFor(t, a, bob, link, "7d") // muted again since

	resp, doc := postDoc(t, bob, unsubUndo, nil, "")
	if resp.StatusCode != 200 || doc.Find("h1").Text() != "Still muted" {
		t.Fatalf("replayed unsubscribe undo %d: %q", resp.StatusCode, doc.Find("main").Text())
	}
	if doc.Find(`[data-testid=settings-link]`).Length() != 1 {
		t.Errorf("the unsubscribe undo's \"Still muted\" page says %q but links no settings, though its token's settings deadline has not passed",
			doc.Find("main p").Text())
	}
}
