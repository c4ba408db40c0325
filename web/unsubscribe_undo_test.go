package web_test

import (
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestUndoSaysWhenEverythingStaysOff: a recipient stops the email's
// types, then everything, then undoes the first step. The page said
// "gets these emails again" while the unsubscribe from everything still
// stopped them all; it now says so and links to the settings.
func TestUndoSaysWhenEverythingStaysOff(t *testing.T) {
	t.Parallel()
	a := brandSetup(t)
	link := strings.Replace(a.web.Links.UnsubscribeURL("u_bob", []string{"comment"}, time.Now()), "http://lull.test", a.srv.URL, 1)
	bob := browserClient(t)
	_, doc := postDoc(t, bob, link, nil, "")
	undo, _ := doc.Find(`[data-testid=undo]`).Closest("form").Attr("action")
	everything, _ := doc.Find(`[data-testid=unsubscribe-all]`).Closest("form").Attr("action")
	postDoc(t, bob, a.srv.URL+everything, url.Values{"scope": {"all"}}, "")

	_, doc = postDoc(t, bob, a.srv.URL+undo, nil, "")
	done := doc.Find(`[data-testid=done]`).Text()
	if strings.Contains(done, "gets these emails again") || !strings.Contains(done, "still unsubscribed from all emails") {
		t.Errorf("undo page: %q", done)
	}
	if doc.Find(`[data-testid=settings-link]`).Length() != 1 {
		t.Error("no way to the settings from the undo page")
	}

	// Unsubscribed from everything already, the recipient follows a link
	// that unsubscribes from everything: its undo changes nothing.
	all := strings.Replace(a.web.Links.UnsubscribeURL("u_bob", nil, time.Now()), "http://lull.test", a.srv.URL, 1)
	_, doc = postDoc(t, bob, all, nil, "")
	undo, _ = doc.Find(`[data-testid=undo]`).Closest("form").Attr("action")
	_, doc = postDoc(t, bob, a.srv.URL+undo, nil, "")
	if done := doc.Find(`[data-testid=done]`).Text(); !strings.Contains(done, "still unsubscribed from all emails") {
		t.Errorf("undo of a repeated unsubscribe from everything: %q", done)
	}
}

// TestUndoIsNoLongerKeyToSettings: the page after an unsubscribe links to
// the settings only while the email's own settings link works (7 days).
// Its undo button lives 7 days more and offered a fresh settings link
// for all of them, stretching an email's settings access to 14 days.
// Undo now offers the settings only until the email's link would expire.
func TestUndoIsNoLongerKeyToSettings(t *testing.T) {
	t.Parallel()
	a := brandSetup(t)
	var later atomic.Int64
	a.web.Now = func() time.Time { return time.Now().Add(time.Duration(later.Load())) }
	link := a.web.Links.UnsubscribeURL("u_bob", []string{"comment"}, time.Now().Add(-6*24*time.Hour))
	_, doc := postDoc(t, browserClient(t), strings.Replace(link, "http://lull.test", a.srv.URL, 1), nil, "")
	if doc.Find(`[data-testid=settings-link]`).Length() != 1 {
		t.Fatal("a 6-day-old email's unsubscribe offers no settings link")
	}
	undo, _ := doc.Find(`[data-testid=undo]`).Closest("form").Attr("action")
	later.Store(int64(3 * 24 * time.Hour))
	_, doc = postDoc(t, browserClient(t), a.srv.URL+undo, nil, "")
	if !strings.Contains(doc.Text(), "Undone") || doc.Find(`[data-testid=settings-link]`).Length() != 0 {
		t.Errorf("undo 9 days after the email offers the settings: %q", doc.Find(`[data-testid=done]`).Text())
	}
}
