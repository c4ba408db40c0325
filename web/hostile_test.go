package web_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/lull-dev/lull/web"
)

// hostileSetup registers a type and a recipient for hostile requests.
func hostileSetup(t *testing.T) *apiBundle {
	t.Helper()
	a := setupAPI(t)
	a.mustCall(t, "PUT", "/api/v1/types/comment", `{"name":"Comments","default_mode":"daily"}`, 200)
	a.mustCall(t, "PUT", "/api/v1/recipients/u_bob", `{"email":"bob@example.com","name":"Bob"}`, 200)
	return a
}

// raw sends body as it is, bytes and all, and returns the status, the
// content type and the decoded problem (if any). The call is checked
// against openapi.json.
func (a *apiBundle) raw(t *testing.T, method, path string, body []byte) (int, string, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, a.srv.URL+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	var p map[string]any
	json.Unmarshal(out, &p)
	return resp.StatusCode, resp.Header.Get("Content-Type"), p
}

const goodEvent = `{"type":"comment","key":"k-1","actor":{"id":"u_alice","name":"Alice"},` +
	`"object":{"type":"document","id":"doc_7","title":"Q3 plan","url":"https://app.example/doc/7"},` +
	`"recipients":["u_bob",{"id":"u_carol","email":"carol@example.com","name":"Carol","timezone":"Asia/Tokyo"}],` +
	`"batch_key":"document:doc_7","data":{"excerpt":"Looks good"},"occurred_at":"2026-11-22T10:00:00Z"}`

// TestHostileRequests sends malformed, mistyped, oversized and otherwise
// hostile bodies to every JSON endpoint that takes one. Each is refused
// with the right 4xx status as problem+json naming the field at fault
// (never a 5xx, never stored); the few that are odd but valid are
// accepted.
func TestHostileRequests(t *testing.T) {
	t.Parallel()
	a := hostileSetup(t)
	deep := strings.Repeat(`[`, 10001) + strings.Repeat(`]`, 10001)
	cases := []struct {
		name, method, path, body string
		status                   int
		// field is the field the problem must name; mention is text its
		// detail must hold. Either may be empty.
		field, mention string
	}{
		// Malformed JSON.
		{"EmptyBody", "POST", "/api/v1/events", ``, 400, "", "empty"},
		{"Truncated", "POST", "/api/v1/events", `{"type":"comment","recipients":["u_b`, 400, "", ""},
		{"TrailingGarbage", "POST", "/api/v1/events", `{"type":"comment","recipients":["u_bob"]}}`, 400, "", ""},
		{"TwoValues", "POST", "/api/v1/events", `{"type":"comment","recipients":["u_bob"]} {}`, 400, "", "more than one"},
		{"StrayBracket", "POST", "/api/v1/events", `{"type":"comment","recipients":["u_bob"]}]`, 400, "", ""},
		{"SingleQuotes", "POST", "/api/v1/events", `{'type':'comment'}`, 400, "", ""},
		{"Comment", "POST", "/api/v1/events", `{"type":"comment", /* hi */ "recipients":["u_bob"]}`, 400, "", ""},
		{"TrailingComma", "POST", "/api/v1/events", `{"type":"comment","recipients":["u_bob",]}`, 400, "", ""},
		{"NaN", "POST", "/api/v1/events", `{"type":"comment","recipients":["u_bob"],"data":{"x":NaN}}`, 400, "", ""},
		{"TooDeep", "POST", "/api/v1/events", `{"type":"comment","recipients":["u_bob"],"data":{"x":` + deep + `}}`, 400, "", ""},
		{"XMLBody", "POST", "/api/v1/events", `<event type="comment"/>`, 400, "", ""},
		// Wrong types.
		{"ArrayBody", "POST", "/api/v1/events", `[]`, 422, "body", "an object"},
		{"NullBody", "POST", "/api/v1/events", `null`, 422, "type", "required"},
		{"TypeNumber", "POST", "/api/v1/events", `{"type":7,"recipients":["u_bob"]}`, 422, "type", "a string"},
		{"RecipientsString", "POST", "/api/v1/events", `{"type":"comment","recipients":"u_bob"}`, 422, "recipients", "array"},
		{"RecipientNumber", "POST", "/api/v1/events", `{"type":"comment","recipients":["u_bob",7]}`, 422, "recipients[1]", ""},
		{"RecipientIDNumber", "POST", "/api/v1/events", `{"type":"comment","recipients":[{"id":5}]}`, 422, "recipients[0].id", "a string"},
		{"RecipientNull", "POST", "/api/v1/events", `{"type":"comment","recipients":[null]}`, 422, "recipients[0].id", "required"},
		{"ActorString", "POST", "/api/v1/events", `{"type":"comment","recipients":["u_bob"],"actor":"Alice"}`, 422, "actor", "an object"},
		{"DataArray", "POST", "/api/v1/events", `{"type":"comment","recipients":["u_bob"],"data":[1,2]}`, 422, "data", "an object"},
		{"DataHugeNumber", "POST", "/api/v1/events", `{"type":"comment","recipients":["u_bob"],"data":{"x":1e400}}`, 422, "data", "1e400"},
		{"OccurredAtWords", "POST", "/api/v1/events", `{"type":"comment","recipients":["u_bob"],"occurred_at":"yesterday"}`, 422, "occurred_at", "RFC 3339"},
		{"OccurredAtNumber", "POST", "/api/v1/events", `{"type":"comment","recipients":["u_bob"],"occurred_at":1764000000}`, 422, "occurred_at", "RFC 3339"},
		{"FeedBeforeWords", "POST", "/api/v1/recipients/u_bob/feed/read", `{"before":"now"}`, 422, "before", "RFC 3339"},
		{"KeyObject", "POST", "/api/v1/events", `{"type":"comment","recipients":["u_bob"],"key":{}}`, 422, "key", "a string"},
		{"TypeWindowNumber", "PUT", "/api/v1/types/t2", `{"window":300}`, 422, "window", "a string"},
		{"TypeMaxItemsString", "PUT", "/api/v1/types/t2", `{"max_items":"3"}`, 422, "max_items", "a whole number"},
		{"TypeMaxItemsHuge", "PUT", "/api/v1/types/t2", `{"max_items":3000000000}`, 422, "max_items", ""},
		{"TypeBurstLimitHuge", "PUT", "/api/v1/types/t2", `{"burst_limit":3000000000}`, 422, "burst_limit", ""},
		{"TypeMaxItemsFraction", "PUT", "/api/v1/types/t2", `{"max_items":1.5}`, 422, "max_items", ""},
		{"TypeRequiredString", "PUT", "/api/v1/types/t2", `{"required":"yes"}`, 422, "required", "true or false"},
		{"TypeNameHuge", "PUT", "/api/v1/types/t2", `{"name":"` + strings.Repeat("W", 2000) + `"}`, 422, "name", ""},
		{"TypeKeyHuge", "PUT", "/api/v1/types/" + strings.Repeat("k", 101), `{}`, 422, "key", ""},
		{"PrefsTypesArray", "PUT", "/api/v1/recipients/u_bob/preferences", `{"types":[]}`, 422, "types", "an object"},
		{"PrefsUnsubscribedString", "PUT", "/api/v1/recipients/u_bob/preferences", `{"unsubscribed":"yes"}`, 422, "unsubscribed", "true or false"},
		{"PrefsWindowTooFine", "PUT", "/api/v1/recipients/u_bob/preferences", `{"types":{"comment":{"mode":"cooldown","window":"1.0000001s"}}}`, 422, "types.comment.window", "millisecond"},
		{"RecipientActiveString", "PUT", "/api/v1/recipients/u_x", `{"active":"no"}`, 422, "active", "true or false"},
		{"RecipientEmailHuge", "PUT", "/api/v1/recipients/u_x", `{"email":"` + strings.Repeat("a", 300) + `@example.com"}`, 422, "email", ""},
		{"FeedIDsString", "POST", "/api/v1/recipients/u_bob/feed/read", `{"ids":"all"}`, 422, "ids", "an array"},
		{"FeedReadTooManyIDs", "POST", "/api/v1/recipients/u_bob/feed/read", `{"ids":[` + strings.Repeat("1,", 1000) + `1]}`, 422, "ids", "at most 1000"},
		{"FeedSeenTooManyIDs", "POST", "/api/v1/recipients/u_bob/feed/seen", `{"ids":[` + strings.Repeat("1,", 1000) + `1]}`, 422, "ids", "at most 1000"},
		// Limits on strings.
		{"KeyTooLong", "POST", "/api/v1/events", `{"type":"comment","recipients":["u_bob"],"key":"` + strings.Repeat("k", 256) + `"}`, 422, "key", "255"},
		{"RecipientIDTooLong", "POST", "/api/v1/events", `{"type":"comment","recipients":["` + strings.Repeat("r", 256) + `"]}`, 422, "recipients[0].id", "255"},
		// Unknown fields are refused everywhere, nested ones too.
		{"UnknownTopField", "POST", "/api/v1/events", `{"type":"comment","recipients":["u_bob"],"priority":"high"}`, 422, "priority", "not a known field"},
		{"UnknownRecipientField", "POST", "/api/v1/events", `{"type":"comment","recipients":[{"id":"u_bob","emial":"b@example.com"}]}`, 422, "recipients[0].emial", "not a known field"},
		{"UnknownActorField", "POST", "/api/v1/events", `{"type":"comment","recipients":["u_bob"],"actor":{"id":"a","nick":"A"}}`, 422, "actor.nick", "not a known field"},
		{"UnknownRecipientsNamesFirst", "POST", "/api/v1/events", `{"type":"comment","recipients":["zz_nobody","u_bob","aa_nobody"]}`, 422, "recipients[0]", "unknown recipient"},
		{"UnknownAfterARepeatNamedAsSent", "POST", "/api/v1/events", `{"type":"comment","recipients":["u_bob","u_bob","zz_nobody"]}`, 422, "recipients[2]", "unknown recipient"},
		{"UnknownObjectField", "POST", "/api/v1/events", `{"type":"comment","recipients":["u_bob"],"object":{"titel":"Q3"}}`, 422, "object.titel", "not a known field"},
		{"ObjectTitleNumber", "POST", "/api/v1/events", `{"type":"comment","recipients":["u_bob"],"object":{"title":3}}`, 422, "object.title", "a string"},
		{"UnknownTypeField", "PUT", "/api/v1/types/t2", `{"colour":"red"}`, 422, "colour", "not a known field"},
		{"UnknownPrefsField", "PUT", "/api/v1/recipients/u_bob/preferences", `{"types":{"comment":{"mode":"daily","when":"now"}}}`, 422, "when", "not a known field"},
		// Encoding: invalid UTF-8 and NUL characters.
		{"InvalidUTF8", "POST", "/api/v1/events", "{\"type\":\"comment\",\"recipients\":[\"u_bob\"],\"data\":{\"x\":\"\xff\xfe\"}}", 400, "", "UTF-8"},
		{"OverlongUTF8", "POST", "/api/v1/events", "{\"type\":\"comment\",\"recipients\":[\"u_\xc0\xafbob\"]}", 400, "", "UTF-8"},
		{"InvalidUTF8InType", "PUT", "/api/v1/types/t2", "{\"name\":\"\xed\xa0\x80\"}", 400, "", "UTF-8"},
		{"EscapedNUL", "POST", "/api/v1/events", `{"type":"comment","recipients":["u_bob"],"data":{"x":"a\u0000b"}}`, 422, "body", "NUL"},
		{"EscapedNULInKey", "POST", "/api/v1/events", `{"type":"comment","recipients":["u_bob"],"data":{"a\u0000":1}}`, 422, "body", "NUL"},
		{"RawNUL", "POST", "/api/v1/events", "{\"type\":\"comment\",\"recipients\":[\"u_bob\"],\"data\":{\"x\":\"a\x00b\"}}", 400, "", ""},
		{"NULInPreferences", "PUT", "/api/v1/recipients/u_bob/preferences", `{"timezone":"UTC\u0000"}`, 422, "body", "NUL"},
		{"NULInRecipient", "PUT", "/api/v1/recipients/u_x", `{"name":"\u0000"}`, 422, "body", "NUL"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, ctype, p := a.raw(t, c.method, c.path, []byte(c.body))
			if status != c.status {
				t.Fatalf("status %d, want %d: %v", status, c.status, p)
			}
			if ctype != "application/problem+json" || p["type"] == nil || p["title"] == nil || p["status"] == nil {
				t.Fatalf("answer is %q %v, want a problem+json with type, title and status", ctype, p)
			}
			if c.field != "" && fieldOf(p) != c.field {
				t.Fatalf("field %q, want %q: %v", fieldOf(p), c.field, p)
			}
			if c.mention != "" && !strings.Contains(fmt.Sprint(p["detail"], p["errors"]), c.mention) {
				t.Fatalf("problem does not mention %q: %v", c.mention, p)
			}
		})
	}
	if n := countRows(t, a.db, "SELECT count(*) FROM events"); n != 0 {
		t.Fatalf("hostile requests stored %d events", n)
	}
	if n := countRows(t, a.db, "SELECT count(*) FROM notification_types WHERE key <> 'comment'"); n != 0 {
		t.Fatalf("hostile requests stored %d types", n)
	}
}

// TestHostileOddButValid sends bodies that look suspicious but are valid
// JSON with valid content: they are accepted and stored as sent.
func TestHostileOddButValid(t *testing.T) {
	t.Parallel()
	a := hostileSetup(t)
	cases := []struct{ name, body string }{
		// An escaped backslash before "u0000" is text, not a NUL.
		{"EscapedBackslashThenU0000", `{"type":"comment","recipients":["u_bob"],"data":{"path":"C:\\u0000"}}`},
		{"LoneSurrogateEscape", `{"type":"comment","recipients":["u_bob"],"data":{"x":"\ud800"}}`},
		{"Markup", `{"type":"comment","recipients":["u_bob"],"actor":{"id":"x","name":"<script>alert(1)</script>"}}`},
		{"DuplicateRecipients", `{"type":"comment","recipients":["u_bob","u_bob",{"id":"u_bob","email":"bob@example.com"}]}`},
		{"NestedData", `{"type":"comment","recipients":["u_bob"],"data":{"x":` + strings.Repeat(`[`, 500) + strings.Repeat(`]`, 500) + `}}`},
		{"BOMFreeUnicode", `{"type":"comment","recipients":["u_bob"],"object":{"title":"Q3 – plan ✓ 日本 🎉"}}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, _, p := a.raw(t, "POST", "/api/v1/events", []byte(c.body))
			if status != http.StatusAccepted {
				t.Fatalf("status %d, want 202: %v", status, p)
			}
		})
	}
	var path string
	if err := a.db.Pool.QueryRow(t.Context(), `SELECT data->>'path' FROM events WHERE data ? 'path'`).Scan(&path); err != nil || path != `C:\u0000` {
		t.Fatalf("stored path %q (%v), want C:\\u0000 as sent", path, err)
	}
}

// TestHostileTruncatedBodies cuts a valid event at every byte: every
// proper prefix is refused with a 4xx problem, and only the whole body is
// accepted.
func TestHostileTruncatedBodies(t *testing.T) {
	t.Parallel()
	a := hostileSetup(t)
	for i := 0; i < len(goodEvent); i++ {
		status, ctype, p := a.raw(t, "POST", "/api/v1/events", []byte(goodEvent[:i]))
		if status < 400 || status >= 500 || ctype != "application/problem+json" {
			t.Fatalf("body cut at byte %d (%q): %d %s %v", i, goodEvent[:i], status, ctype, p)
		}
	}
	if status, _, p := a.raw(t, "POST", "/api/v1/events", []byte(goodEvent)); status != http.StatusAccepted {
		t.Fatalf("whole body: %d %v", status, p)
	}
	if n := countRows(t, a.db, "SELECT count(*) FROM events"); n != 1 {
		t.Fatalf("%d events stored, want 1", n)
	}
}

// recipientsBody is an event naming n recipients: bare ids of existing
// ones, or objects with an email, name and time zone.
func recipientsBody(n int, inline bool) []byte {
	var b bytes.Buffer
	b.WriteString(`{"type":"comment","actor":{"id":"a","name":"A"},"recipients":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		if inline {
			fmt.Fprintf(&b, `{"id":"u_%07d","email":"user%07d@example.com","name":"User Number %07d","timezone":"America/Los_Angeles"}`, i, i, i)
		} else {
			fmt.Fprintf(&b, `"u_%07d"`, i)
		}
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

// TestHostileHugeRecipientLists: an event with 100,000 recipients, each
// given in full, is accepted (its body is over the 4 MiB of other
// endpoints but within the events endpoint's 32 MiB); one with 1,000,000
// is refused with a problem naming recipients and the limit; and a body
// over 32 MiB is refused with 413, naming both limits.
func TestHostileHugeRecipientLists(t *testing.T) {
	t.Parallel()
	a := hostileSetup(t)

	big := recipientsBody(100_000, true)
	if len(big) <= web.MaxBodyBytes || len(big) > web.MaxEventBodyBytes {
		t.Fatalf("the 100k body is %d bytes; the test wants it between the API's and the events endpoint's limits", len(big))
	}
	start := time.Now()
	status, _, p := a.raw(t, "POST", "/api/v1/events", big)
	if status != http.StatusAccepted {
		t.Fatalf("100,000 recipients: %d %v", status, p)
	}
	t.Logf("100,000 inline recipients (%.1f MB) ingested in %v", float64(len(big))/1e6, time.Since(start).Round(time.Millisecond))
	if n, _ := p["notifications"].(float64); n != 100_000 {
		t.Fatalf("100,000 recipients gave %v notifications", p["notifications"])
	}

	// Unknown recipients refuse the whole event, naming the first in the
	// request (which sorts last of the two: recipients are written in id
	// order, in chunks), and nothing is written.
	withUnknown := bytes.Replace(recipientsBody(50_000, false), []byte(`"recipients":[`), []byte(`"recipients":["zz_unknown","a_unknown",`), 1)
	status, _, p = a.raw(t, "POST", "/api/v1/events", withUnknown)
	if status != http.StatusUnprocessableEntity || fieldOf(p) != "recipients[0]" {
		t.Fatalf("unknown recipient with 50,000 known ones: %d %v, want 422 naming recipients[0]", status, p)
	}
	var stored int
	if err := a.db.Pool.QueryRow(t.Context(), `SELECT count(*) FROM notifications`).Scan(&stored); err != nil || stored != 100_000 {
		t.Fatalf("after the refused event %d notifications are stored (%v), want the first event's 100,000", stored, err)
	}

	million := recipientsBody(1_000_000, false)
	status, ctype, p := a.raw(t, "POST", "/api/v1/events", million)
	if status != http.StatusUnprocessableEntity || ctype != "application/problem+json" || fieldOf(p) != "recipients" ||
		!strings.Contains(fmt.Sprint(p["detail"]), "at most 100000") {
		t.Fatalf("1,000,000 recipients (%.1f MB): %d %s %v, want 422 naming recipients and the limit", float64(len(million))/1e6, status, ctype, p)
	}

	over := append([]byte(`{"type":"comment","recipients":["u_bob"],"data":{"x":"`), bytes.Repeat([]byte("a"), web.MaxEventBodyBytes)...)
	over = append(over, `"}}`...)
	status, ctype, p = a.raw(t, "POST", "/api/v1/events", over)
	if status != http.StatusRequestEntityTooLarge || ctype != "application/problem+json" ||
		!strings.Contains(fmt.Sprint(p["detail"]), "32 MiB") || !strings.Contains(fmt.Sprint(p["detail"]), "100000") {
		t.Fatalf("body over 32 MiB: %d %s %v, want 413 naming the limits", status, ctype, p)
	}
	status, _, p = a.raw(t, "PUT", "/api/v1/recipients/u_bob/preferences", append([]byte(`{"timezone":"`), bytes.Repeat([]byte("a"), 5<<20)...))
	if status != http.StatusRequestEntityTooLarge || !strings.Contains(fmt.Sprint(p["detail"]), "4 MiB") {
		t.Fatalf("preferences body over 4 MiB: %d %v, want 413", status, p)
	}
}

// TestHostileSlowClients checks the server's timeouts. They are all set;
// a client that sends its headers one byte at a time (slowloris) or
// trickles its body is cut off once they run out; and the feed stream,
// which must outlive them, still delivers after both the read and the
// write timeout have passed.
func TestHostileSlowClients(t *testing.T) {
	t.Parallel()
	a := hostileSetup(t)
	srv := a.web.HTTPServer("127.0.0.1:0")
	if srv.ReadHeaderTimeout <= 0 || srv.ReadTimeout <= 0 || srv.WriteTimeout <= 0 || srv.IdleTimeout <= 0 {
		t.Fatalf("server timeouts: header %v, read %v, write %v, idle %v; want all set",
			srv.ReadHeaderTimeout, srv.ReadTimeout, srv.WriteTimeout, srv.IdleTimeout)
	}
	// The same server with its timeouts shortened, so the test is quick.
	srv.ReadHeaderTimeout, srv.ReadTimeout, srv.WriteTimeout, srv.IdleTimeout = 300*time.Millisecond, 600*time.Millisecond, 600*time.Millisecond, time.Second
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	addr := ln.Addr().String()

	// trickle writes s a byte at a time and reports how long the server
	// kept the connection open.
	trickle := func(t *testing.T, s string) time.Duration {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		start := time.Now()
		for i := 0; i < len(s); i++ {
			if _, err := conn.Write([]byte{s[i]}); err != nil {
				return time.Since(start)
			}
			time.Sleep(50 * time.Millisecond)
			if time.Since(start) > 10*time.Second {
				t.Fatal("the server let a slow client hold the connection for 10s")
			}
		}
		// All sent: wait for the server to answer or close.
		conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		io.Copy(io.Discard, conn)
		return time.Since(start)
	}
	t.Run("Slowloris", func(t *testing.T) {
		headers := "GET /healthz HTTP/1.1\r\nHost: x\r\n" + strings.Repeat("X-Padding: aaaaaaaaaaaaaaaa\r\n", 50)
		if d := trickle(t, headers); d > 3*time.Second {
			t.Fatalf("a client sending headers a byte at a time was cut off after %v", d)
		}
	})
	t.Run("SlowBody", func(t *testing.T) {
		head := "POST /api/v1/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + testKey + "\r\nContent-Length: 100000\r\n\r\n"
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		conn.Write([]byte(head))
		start := time.Now()
		for time.Since(start) < 10*time.Second {
			if _, err := conn.Write([]byte("{")); err != nil {
				break
			}
			time.Sleep(50 * time.Millisecond)
			conn.SetReadDeadline(time.Now().Add(time.Millisecond))
			if _, err := conn.Read(make([]byte, 1)); err == nil || !isTimeout(err) {
				break // the server answered or closed
			}
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Fatalf("a client trickling its body was cut off after %v", d)
		}
	})
	t.Run("FeedStreamOutlivesTimeouts", func(t *testing.T) {
		req, _ := http.NewRequest("GET", "http://"+addr+"/api/v1/recipients/u_bob/feed/stream", nil)
		req.Header.Set("Authorization", "Bearer "+testKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		events := make(chan string, 10)
		go func() {
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				if strings.HasPrefix(sc.Text(), "data: ") {
					events <- sc.Text()
				}
			}
			close(events)
		}()
		if _, ok := <-events; !ok {
			t.Fatal("no first event on the stream")
		}
		time.Sleep(1500 * time.Millisecond) // past the read and the write timeout
		a.mustCall(t, "POST", "/api/v1/events", `{"type":"comment","recipients":["u_bob"]}`, 202)
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatal("the stream ended at the server's timeouts")
			}
			if !strings.Contains(ev, `"unread":1`) {
				t.Fatalf("event after the timeouts: %s", ev)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("no event on the stream after the timeouts")
		}
	})
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// TestStoredEventIsAnsweredAfterTheWriteTimeout posts an event that takes
// longer to store than the server's write timeout (it waits for a lock the
// test holds, as a fan-out to 100,000 recipients takes its time): the
// event is stored and its client still gets its 202, not a closed
// connection.
func TestStoredEventIsAnsweredAfterTheWriteTimeout(t *testing.T) {
	t.Parallel()
	a := hostileSetup(t)
	srv := a.web.HTTPServer("127.0.0.1:0")
	srv.ReadHeaderTimeout, srv.ReadTimeout, srv.WriteTimeout = 300*time.Millisecond, 300*time.Millisecond, 300*time.Millisecond
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	ctx := context.Background()
	tx, err := a.db.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	// Writing events waits while the table is locked against writes.
	if _, err := tx.Exec(ctx, `LOCK TABLE events IN SHARE ROW EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	type answer struct {
		status int
		err    error
	}
	answered := make(chan answer, 1)
	go func() {
		req, _ := http.NewRequest("POST", "http://"+ln.Addr().String()+"/api/v1/events",
			strings.NewReader(`{"type":"comment","key":"slow-1","recipients":["u_bob"]}`))
		req.Header.Set("Authorization", "Bearer "+testKey)
		resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
		if err != nil {
			answered <- answer{err: err}
			return
		}
		resp.Body.Close()
		answered <- answer{status: resp.StatusCode}
	}()
	time.Sleep(time.Second) // past the read and the write timeout
	select {
	case got := <-answered:
		t.Fatalf("the event was answered (%d, %v) while events could not be written", got.status, got.err)
	default:
	}
	tx.Rollback(ctx)
	got := <-answered
	if got.err != nil || got.status != http.StatusAccepted {
		t.Fatalf("an event stored after the write timeout got %d, %v; want 202", got.status, got.err)
	}
	var stored int
	if err := a.db.Pool.QueryRow(ctx, `SELECT count(*) FROM events WHERE key = 'slow-1'`).Scan(&stored); err != nil || stored != 1 {
		t.Fatalf("%d events stored (%v), want 1", stored, err)
	}
}
