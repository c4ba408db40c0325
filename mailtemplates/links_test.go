package mailtemplates

import (
	"encoding/base64"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// oldUnsubscribeURL is a link as emails sent before links named their
// types carried it, written out by hand so that no later change to
// Token can quietly change what "old" means.
func oldUnsubscribeURL(l Links, id string, exp time.Time) string {
	payload := PurposeUnsubscribe + "\n" + id + "\n" + strconv.FormatInt(exp.Unix(), 10)
	return l.BaseURL + "/unsubscribe?token=" + url.QueryEscape(b64(payload)+"."+b64(string(l.mac(payload))))
}

func tokenOf(t *testing.T, link string) string {
	t.Helper()
	u, err := url.Parse(link)
	if err != nil {
		t.Fatal(err)
	}
	return u.Query().Get("token")
}

func TestUnsubscribeLinksNameTheirTypes(t *testing.T) {
	t.Parallel()
	l := Links{BaseURL: "https://docs.acme.example", Secret: []byte("0123456789abcdef0123456789abcdef")}
	now := time.Unix(1_800_000_000, 0)

	link := l.UnsubscribeURL("u_bob", []string{"comment.created", "app.shared"}, now)
	id, data, err := l.VerifyData(tokenOf(t, link), PurposeUnsubscribe, now.Add(89*24*time.Hour))
	if err != nil || id != "u_bob" || !slices.Equal(UnsubscribeTypes(data), []string{"comment.created", "app.shared"}) {
		t.Fatalf("new link: %q %q %v", id, data, err)
	}

	// A link sent before links named types keeps working, and means what
	// it meant then: everything.
	old := oldUnsubscribeURL(l, "u_bob", now.Add(90*24*time.Hour))
	id, data, err = l.VerifyData(tokenOf(t, old), PurposeUnsubscribe, now)
	if err != nil || id != "u_bob" || UnsubscribeTypes(data) != nil {
		t.Fatalf("old link: %q %q %v", id, data, err)
	}
	if got := l.UnsubscribeURL("u_bob", nil, now); got != oldUnsubscribeURL(l, "u_bob", now.Add(90*24*time.Hour)) {
		t.Errorf("a link without types is not the old form:\n%s\n%s", got, old)
	}

	// A recipient id holding a line break cannot make an old-form token
	// read as another recipient's, nor the reverse.
	odd := l.UnsubscribeURL("victim\n9999999999", nil, now)
	if id, _, err := l.VerifyData(tokenOf(t, odd), PurposeUnsubscribe, now); err == nil && id != "victim\n9999999999" {
		t.Errorf("odd id read as %q", id)
	}
	odd = l.UnsubscribeURL("victim\n9999999999", []string{"x"}, now)
	if id, _, err := l.VerifyData(tokenOf(t, odd), PurposeUnsubscribe, now); err != nil || id != "victim\n9999999999" {
		t.Errorf("odd id with types: %q %v", id, err)
	}

	// An email of very many types gets a link that stops everything,
	// rather than one too long for its header line.
	many := make([]string, 40)
	for i := range many {
		many[i] = "project.pipeline.stage.failed." + strconv.Itoa(i)
	}
	if long := l.UnsubscribeURL("u_bob", many, now); len(long) > 500 {
		t.Errorf("a link of %d bytes", len(long))
	} else if _, data, _ := l.VerifyData(tokenOf(t, long), PurposeUnsubscribe, now); data != "" {
		t.Errorf("too many types named: %q", data)
	}

	// Expiry, tampering and purpose still hold.
	if _, _, err := l.VerifyData(tokenOf(t, link), PurposeUnsubscribe, now.Add(91*24*time.Hour)); err != ErrExpiredLink {
		t.Errorf("expired: %v", err)
	}
	if _, _, err := l.VerifyData(tokenOf(t, link), PurposeSettings, now); err != ErrBadLink {
		t.Errorf("other purpose: %v", err)
	}
	tok := tokenOf(t, link)
	if _, _, err := l.VerifyData("A"+tok[1:], PurposeUnsubscribe, now); err != ErrBadLink {
		t.Errorf("tampered: %v", err)
	}
}

func b64(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

// TestUnsubscribeLinksFitAMailLine: a link is written whole into
// List-Unsubscribe, which with its name must stay within a mail line
// (998 bytes). A thread's batch key (255 bytes of "%" or "é") and a
// recipient id of the same kind are escaped to three times their size,
// and made a 1,100-byte header that servers may refuse or break, cutting
// the signed token. A link now says less when it would not fit: a
// thread's stops its type, and one naming types stops everything.
func TestUnsubscribeLinksFitAMailLine(t *testing.T) {
	t.Parallel()
	l := Links{BaseURL: "https://docs.acme.example", Secret: []byte("0123456789abcdef0123456789abcdef")}
	now := time.Unix(1_800_000_000, 0)
	fits := func(link string) {
		t.Helper()
		if n := len("List-Unsubscribe: <" + link + ">"); n > 998 {
			t.Errorf("header line of %d bytes", n)
		}
	}
	odd := strings.Repeat("é", 127)
	link, thread := l.UnsubscribeThreadURL("u_bob", "comment.created+"+strings.Repeat("%", 239), now)
	fits(link)
	_, data, err := l.VerifyData(tokenOf(t, link), PurposeUnsubscribe, now)
	if err != nil || thread || !slices.Equal(UnsubscribeTypes(data), []string{"comment.created"}) {
		t.Errorf("long thread: thread %v, data %q, %v", thread, data, err)
	}
	link, thread = l.UnsubscribeThreadURL("u_bob", "comment.created+doc:7", now)
	if _, data, err := l.VerifyData(tokenOf(t, link), PurposeUnsubscribe, now); err != nil || !thread || UnsubscribeThread(data) != "comment.created+doc:7" {
		t.Errorf("short thread: thread %v, data %q, %v", thread, data, err)
	}
	link = l.UnsubscribeURL(odd, []string{"comment.created", "app.shared"}, now)
	fits(link)
	if id, data, err := l.VerifyData(tokenOf(t, link), PurposeUnsubscribe, now); err != nil || id != odd || data != "" {
		t.Errorf("long id: %q %q %v", id, data, err)
	}
}
