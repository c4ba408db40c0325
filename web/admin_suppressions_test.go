package web_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/jackc/pgx/v5"

	"github.com/lull-dev/lull/db"
)

func TestConsoleSuppressionsListSearchAddRemove(t *testing.T) {
	t.Parallel()
	a, _ := consoleSetup(t)
	c := operatorClient(t, a)
	page := a.srv.URL + "/admin/suppressions"
	rows := func(query string) []string {
		t.Helper()
		resp, doc := getDoc(t, c, page+query)
		if resp.StatusCode != 200 {
			t.Fatalf("suppressions page: %d", resp.StatusCode)
		}
		if doc.Find("script:not([src])").Length() != 0 {
			t.Error("an inline script reached the page")
		}
		var out []string
		doc.Find(`[data-testid="suppression-row"] td:first-child`).Each(func(_ int, s *goquery.Selection) { out = append(out, s.Text()) })
		return out
	}
	// post posts the form and returns the message on the page it leads
	// to, the one page a message shows on.
	post := func(to string, f url.Values) string {
		req, _ := http.NewRequest("POST", to, strings.NewReader(f.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
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
		return doc.Find(`[data-testid="flash"]`).Text()
	}
	_, doc := getDoc(t, c, a.srv.URL+"/admin")
	if doc.Find(`nav a[href="/admin/suppressions"]`).Length() != 1 {
		t.Fatal("the console's menu has no Suppressions link")
	}

	if f := post(page, url.Values{"address": {"Bob@Example.com"}, "reason": {"complaint"}, "detail": {"<script>alert(1)</script>"}}); !strings.Contains(f, "Suppressed bob@example.com") {
		t.Fatalf("flash after adding: %q", f)
	}
	if got := rows(""); len(got) != 1 || got[0] != "bob@example.com" {
		t.Fatalf("list %v", got)
	}
	if n := countRows(t, a.db, "SELECT count(*) FROM recipients WHERE id = 'u_bob' AND unsubscribed"); n != 1 {
		t.Error("a complaint added in the console left the recipient subscribed")
	}
	if f := post(page, url.Values{"address": {"not an address"}}); !strings.Contains(f, "Not added: address") {
		t.Fatalf("flash after a bad address: %q", f)
	}
	// A form posted from another site is refused.
	req, _ := http.NewRequest("POST", page, strings.NewReader(url.Values{"address": {"eve@example.com"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	if resp, err := c.Do(req); err != nil || resp.StatusCode != http.StatusForbidden {
		t.Fatalf("cross-site add: %v %v, want 403", resp.StatusCode, err)
	}
	if got := rows("?prefix=EVE"); len(got) != 0 {
		t.Fatalf("search for eve found %v", got)
	}
	if got := rows("?prefix=BO"); len(got) != 1 {
		t.Fatalf("search for bo found %v", got)
	}

	if f := post(page+"/remove", url.Values{"address": {"bob@example.com"}}); !strings.Contains(f, "Removed bob@example.com") {
		t.Fatalf("flash after removing: %q", f)
	}
	if f := post(page+"/remove", url.Values{"address": {"bob@example.com"}}); !strings.Contains(f, "Nothing done") {
		t.Fatalf("flash after removing twice: %q", f)
	}
	if n := countRows(t, a.db, "SELECT count(*) FROM audit_log WHERE object_type = 'suppression' AND operator = 'ops@example.com'"); n != 2 {
		t.Fatalf("audit log holds %d suppression actions, want 2", n)
	}
}

func TestDashboardFlagsComplaintRates(t *testing.T) {
	t.Parallel()
	a, id := consoleSetup(t)
	c := operatorClient(t, a)
	ctx := context.Background()
	if _, err := a.db.Pool.Exec(ctx, `INSERT INTO deliveries (batch_id, state, message_id, sent_at) VALUES ($1, 'sent', 'm', now())`, id); err != nil {
		t.Fatal(err)
	}
	err := a.db.InTx(ctx, func(tx pgx.Tx) error {
		return db.RecordBounce(ctx, tx, db.BounceReport{Address: "bob@example.com", Kind: "complaint", BatchID: id, Source: "smtp"}, db.SoftBouncePolicy{}, time.Now())
	})
	if err != nil {
		t.Fatal(err)
	}
	_, doc := getDoc(t, c, a.srv.URL+"/admin")
	for _, typ := range []string{"all", "comment"} {
		row := doc.Find(`[data-testid="rate-` + typ + `"]`)
		if row.Find(`[data-testid="complaint-level"]`).Text() != "bad" || row.Find(`[data-testid="bounce-level"]`).Text() != "ok" {
			t.Errorf("rates of %s: %q", typ, row.Text())
		}
	}
}

func TestPreviewOfASuppressedBatchAgreesWithTheFlush(t *testing.T) {
	t.Parallel()
	a, id := consoleSetup(t)
	c := operatorClient(t, a)
	a.mustCall(t, "POST", "/api/v1/suppressions", `{"address": "BOB@example.com", "reason": "hard_bounce"}`, http.StatusCreated)
	_, doc := getDoc(t, c, a.srv.URL+"/admin/batches/"+itoa(id)+"/preview")
	if got := doc.Find(`[data-testid="unsent"]`).Text(); got != "Would not be sent: "+db.SkipBounced {
		t.Errorf("preview of a batch to a bounced address says %q", got)
	}
	flushNow(t, a, id)
	if b, _ := db.GetBatch(context.Background(), a.db.Pool, id); b.State != db.StateCanceled || b.Reason != db.SkipBounced {
		t.Fatalf("the flush left the batch %s (%q), want canceled as bounced", b.State, b.Reason)
	}
}
