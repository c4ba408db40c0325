package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/preferences/batching"
)

// dataOfSize is an event's data whose compact JSON ({"x":"yyy…"}) is
// exactly n bytes.
func dataOfSize(n int) string {
	return `{"x":"` + strings.Repeat("y", n-len(`{"x":""}`)) + `"}`
}

// TestEventDataLimit: data over LULL_MAX_DATA (64 KiB by default) is
// refused with 422 naming data and the limit, and nothing is stored; data
// of exactly the limit is accepted. Each text field of an event has a
// limit of its own, and a value at that limit is accepted.
func TestEventDataLimit(t *testing.T) {
	t.Parallel()
	a := hostileSetup(t)
	limit := batching.DefaultMaxData

	over := a.mustCall(t, "POST", "/api/v1/events", `{"type":"comment","recipients":["u_bob"],"data":`+dataOfSize(limit+1)+`}`, 422)
	errs, _ := over["errors"].([]any)
	if fieldOf(over) != "data" || len(errs) != 1 || !strings.Contains(fmt.Sprint(over["detail"]), fmt.Sprintf("at most %d bytes", limit)) {
		t.Fatalf("data of %d bytes: %v, want 422 naming data and the limit", limit+1, over)
	}
	if n := countRows(t, a.db, "SELECT count(*) FROM events") + countRows(t, a.db, "SELECT count(*) FROM notifications"); n != 0 {
		t.Fatalf("a refused event left %d rows", n)
	}
	a.mustCall(t, "POST", "/api/v1/events", `{"type":"comment","recipients":["u_bob"],"data":`+dataOfSize(limit)+`}`, 202)
	if n := countRows(t, a.db, "SELECT octet_length(data->>'x') FROM events"); n != limit-8 {
		t.Fatalf("data of exactly %d bytes stored %d bytes of x, want all %d", limit, n, limit-8)
	}

	fields := []struct {
		field, body string
		max         int
	}{
		{"type", `"type":%q,"recipients":["u_bob"]`, 100},
		{"actor.id", `"actor":{"id":%q},"recipients":["u_bob"]`, 255},
		{"actor.name", `"actor":{"name":%q},"recipients":["u_bob"]`, 1000},
		{"object.type", `"object":{"type":%q},"recipients":["u_bob"]`, 255},
		{"object.id", `"object":{"id":%q},"recipients":["u_bob"]`, 255},
		{"object.title", `"object":{"title":%q},"recipients":["u_bob"]`, 2000},
		{"object.url", `"object":{"url":%q},"recipients":["u_bob"]`, 4096},
		{"batch_key", `"batch_key":%q,"recipients":["u_bob"]`, 255},
		{"key", `"key":%q,"recipients":["u_bob"]`, 255},
		{"recipients[0].name", `"recipients":[{"id":"u_bob","name":%q}]`, 1000},
		{"recipients[0].timezone", `"recipients":[{"id":"u_bob","timezone":%q}]`, 100},
	}
	for _, f := range fields {
		t.Run(f.field, func(t *testing.T) {
			body := func(n int) string {
				b := `{` + fmt.Sprintf(f.body, strings.Repeat("é", n/2)+strings.Repeat("a", n%2)) + `}`
				if f.field != "type" {
					b = `{"type":"comment",` + b[1:]
				}
				return b
			}
			p := a.mustCall(t, "POST", "/api/v1/events", body(f.max+1), 422)
			if fieldOf(p) != f.field || !strings.Contains(fmt.Sprint(p["detail"]), fmt.Sprint(f.max)) {
				t.Fatalf("%s of %d bytes: %v, want 422 naming %s and %d", f.field, f.max+1, p, f.field, f.max)
			}
			// At the limit the field passes its own check; type and
			// time zone then fail as unknown, which names them too.
			status, p := a.call(t, "POST", "/api/v1/events", body(f.max))
			if status != http.StatusAccepted && strings.Contains(fmt.Sprint(p["detail"]), "longer than") {
				t.Fatalf("%s of exactly %d bytes: %d %v", f.field, f.max, status, p)
			}
		})
	}
}

// TestFeedPageBoundsEventData: a feed page stops once its notifications
// carry 1 MiB of event content, so 40 events with data at the limit make
// pages of about 1 MiB each rather than one of 2.6 MB (and 300 of them
// 20 MB); paging on still reaches every notification.
func TestFeedPageBoundsEventData(t *testing.T) {
	t.Parallel()
	a := feedSetup(t)
	const events = 40
	for i := range events {
		a.mustCall(t, "POST", "/api/v1/events", fmt.Sprintf(`{"type":"comment","key":"big-%d","actor":{"id":"u_%d","name":"Ann"},`+
			`"recipients":["u_bob"],"data":%s}`, i, i, dataOfSize(batching.DefaultMaxData)), 202)
	}
	const maxPage = 1<<20 + 64<<10 // feedPageBytes and one notification's worth of framing
	seen, pages := 0, 0
	for cursor := ""; ; pages++ {
		path := "/api/v1/recipients/u_bob/feed?limit=200"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		size, page := a.rawGet(t, path)
		if size > maxPage {
			t.Fatalf("page %d is %d bytes, want at most %d", pages, size, maxPage)
		}
		for _, g := range page["groups"].([]any) {
			seen += len(g.(map[string]any)["notifications"].([]any))
		}
		next, ok := page["next_cursor"].(string)
		if !ok {
			break
		}
		cursor = next
	}
	if seen != events || pages < 2 {
		t.Fatalf("paging reached %d of %d notifications in %d pages", seen, events, pages+1)
	}
}

// rawGet is call for a GET that also reports the answer's size in bytes.
func (a *apiBundle) rawGet(t *testing.T, path string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest("GET", a.srv.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if resp.StatusCode != http.StatusOK || json.Unmarshal(raw, &out) != nil {
		t.Fatalf("GET %s: %d %.200s", path, resp.StatusCode, raw)
	}
	return len(raw), out
}

// TestFlushReadsOnlyShownData: a flush reads the data of only the items
// its email shows, the first or latest display_limit not read in the app,
// so a batch of many items at the data limit costs the data of a few; the
// email still shows each of those items' data.
func TestFlushReadsOnlyShownData(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		order string
		shown []int // items shown, as numbered when posted
	}{{"latest", []int{7, 6, 5}}, {"first", []int{1, 2, 3}}} {
		t.Run(c.order, func(t *testing.T) {
			t.Parallel()
			a := feedSetup(t)
			a.mustCall(t, "PUT", "/api/v1/types/comment", `{"name":"Comments","default_mode":"cooldown","window":"1h","display_limit":3,`+
				`"item_order":"`+c.order+`","item_text":"{{actor.name}} wrote {{data.n}}"}`, 200)
			var batchID int64
			ids := map[int]int64{} // notification ids by item number
			for i := 1; i <= 8; i++ {
				res := a.mustCall(t, "POST", "/api/v1/events", fmt.Sprintf(`{"type":"comment","actor":{"id":"u_%d","name":"P%d"},"recipients":["u_bob"],"data":{"n":"item-%d"}}`, i, i, i), 202)
				batchID = int64(res["batches"].([]any)[0].(map[string]any)["id"].(float64))
			}
			feed := a.mustCall(t, "GET", "/api/v1/recipients/u_bob/feed", "", 200)
			for i, n := range feed["groups"].([]any)[0].(map[string]any)["notifications"].([]any) {
				ids[8-i] = int64(n.(map[string]any)["id"].(float64)) // newest first
			}
			a.mustCall(t, "POST", "/api/v1/recipients/u_bob/feed/read", `{"ids":[`+itoa(ids[8])+`]}`, 200)
			shown := map[int64]bool{}
			for _, i := range c.shown {
				shown[ids[i]] = true
			}

			ctx := context.Background()
			tx, err := a.db.Pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			fc, err := db.LockForFlush(ctx, tx, batchID)
			tx.Rollback(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, it := range fc.Items {
				var data struct{ N string }
				json.Unmarshal(it.Data, &data)
				switch {
				case shown[it.NotificationID] && data.N == "":
					t.Errorf("shown item %d was read without its data", it.NotificationID)
				case !shown[it.NotificationID] && it.ReadAt == nil && it.Data != nil:
					t.Errorf("item %d, which the email does not show, was read with its data %s", it.NotificationID, it.Data)
				}
			}

			a.mustCall(t, "POST", "/api/v1/batches/"+itoa(batchID)+"/flush", "", 202)
			a.workFlush(t, batchID)
			out, err := db.ListOutbox(ctx, a.db.Pool, batchID, 0, 10)
			if err != nil || len(out) != 1 {
				t.Fatalf("outbox: %v, %d emails", err, len(out))
			}
			for _, i := range c.shown {
				if want := fmt.Sprintf("P%d wrote item-%d", i, i); !strings.Contains(out[0].Text, want) {
					t.Errorf("the email lacks %q:\n%s", want, out[0].Text)
				}
			}
			if !strings.Contains(out[0].Text, "and 4 more") || strings.Contains(out[0].Text, "item-8") || strings.Contains(out[0].Text, "item-4") {
				t.Errorf("the email shows an item read in the app or past the display limit, or miscounts:\n%s", out[0].Text)
			}
		})
	}
}
