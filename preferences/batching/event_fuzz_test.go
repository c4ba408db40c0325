package batching

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

// FuzzEvent feeds arbitrary bodies through event decoding and Check. It
// never panics; an accepted event holds 1 to MaxRecipients distinct,
// non-blank recipients and a time; and an accepted event encodes back to
// a body that decodes and checks to the same event, so nothing the API
// accepts changes meaning on the way through.
func FuzzEvent(f *testing.F) {
	for _, seed := range []string{
		`{"type":"comment.created","key":"comment-8812","actor":{"id":"u_alice","name":"Alice"},
		  "object":{"type":"document","id":"doc_7","title":"Q3 plan","url":"https://app.example/doc/7"},
		  "recipients":["u_bob",{"id":"u_carol","email":"carol@example.com","name":"Carol","timezone":"Asia/Tokyo"}],
		  "batch_key":"document:doc_7","data":{"excerpt":"Looks good, but ..."},"occurred_at":"2026-11-22T10:00:00Z"}`,
		`{"type":"t","recipients":["a","a",{"id":"a","email":"a@example.com"}]}`,
		`{"type":"t","recipients":[{"id":"b","emial":"b@example.com"}]}`,
		`{"type":"t","recipients":[7]}`,
		`{"type":"t","recipients":[{"id":7}]}`,
		`{"type":"t","recipients":null}`,
		`{"type":"t","recipients":{}}`,
		`{"type":"t","recipients":[null,""," "]}`,
		`{"type":"t","recipients":[{"id":"x","timezone":"Local"}]}`,
		`{"type":"t","recipients":[{"id":"x","email":"Bob <bob@example.com>"}]}`,
		`{"type":"t","recipients":["x"],"data":{"a":[1,2,{"b":null}],"n":1e308}}`,
		`{"type":"t","recipients":["x"],"occurred_at":"0000-01-01T00:00:00Z"}`,
		`{"type":"<script>alert(1)</script>","recipients":["\u2028"]}`,
		`{"type":"t","recipients":["x"]`,
		`[]`,
		`null`,
	} {
		f.Add([]byte(seed))
	}
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, body []byte) {
		ev, err := decodeWhole(body)
		if err != nil {
			var v *ValidationError
			if errors.As(err, &v) {
				for _, fe := range v.Errors {
					named := strings.HasPrefix(fe.Field, "recipients") || strings.HasPrefix(fe.Field, "actor") || strings.HasPrefix(fe.Field, "object")
					if !named || fe.Message == "" {
						t.Fatalf("decoding error names %q (%q), want a recipients, actor or object field with a message", fe.Field, fe.Message)
					}
				}
			}
			return
		}
		if err := ev.Check(now, DefaultMaxData); err != nil {
			var v *ValidationError
			if !errors.As(err, &v) || len(v.Errors) == 0 {
				t.Fatalf("Check returned %T %v, want a *ValidationError with fields", err, err)
			}
			return
		}
		assertCheckedEvent(t, ev)

		again, err := json.Marshal(ev)
		if err != nil {
			t.Fatalf("an accepted event does not encode: %v", err)
		}
		ev2, err := decodeWhole(again)
		if err != nil {
			t.Fatalf("an accepted event re-encoded as %s does not decode: %v", again, err)
		}
		if err := ev2.Check(now, DefaultMaxData); err != nil {
			t.Fatalf("an accepted event re-encoded as %s is refused: %v", again, err)
		}
		if ev2.Type != ev.Type || ev2.Key != ev.Key || ev2.BatchKey != ev.BatchKey || !ev2.OccurredAt.Equal(*ev.OccurredAt) ||
			len(ev2.Recipients) != len(ev.Recipients) {
			t.Fatalf("event changed on a round trip:\n%+v\n%+v", ev, ev2)
		}
		for i := range ev.Recipients {
			if ev.Recipients[i] != ev2.Recipients[i] {
				t.Fatalf("recipient %d changed on a round trip: %+v, then %+v", i, ev.Recipients[i], ev2.Recipients[i])
			}
		}
	})
}

func assertCheckedEvent(t *testing.T, ev *Event) {
	t.Helper()
	if ev.Type == "" || ev.OccurredAt == nil || len(ev.Key) > 255 || len(ev.BatchKey) > 255 {
		t.Fatalf("Check accepted %+v", ev)
	}
	if n := len(ev.Recipients); n == 0 || n > MaxRecipients {
		t.Fatalf("Check accepted %d recipients", n)
	}
	seen := map[string]bool{}
	for _, r := range ev.Recipients {
		if strings.TrimSpace(r.ID) == "" || len(r.ID) > 255 || seen[r.ID] {
			t.Fatalf("Check accepted recipient id %q (seen before: %v)", r.ID, seen[r.ID])
		}
		seen[r.ID] = true
		if r.Email != "" && (CheckEmail(r.Email) != "" || strings.ContainsAny(r.Email, "\r\n")) {
			t.Fatalf("Check accepted email %q", r.Email)
		}
		if r.Timezone != "" {
			if _, err := time.LoadLocation(r.Timezone); err != nil || r.Timezone == "Local" {
				t.Fatalf("Check accepted time zone %q", r.Timezone)
			}
		}
	}
}

// TestRecipientsDecodingNamesTheEntry pins the decoding rules the fuzz
// target relies on: the entry at fault is named, unknown fields inside a
// recipient object are refused like anywhere else, and a list longer than
// MaxRecipients is refused while decoding, naming the limit.
func TestRecipientsDecodingNamesTheEntry(t *testing.T) {
	t.Parallel()
	many := `{"type":"t","recipients":[` + strings.Repeat(`"a",`, MaxRecipients) + `"a"]}`
	cases := []struct {
		name, body, field, mention string
	}{
		{"NumberEntry", `{"type":"t","recipients":["a",7]}`, "recipients[1]", "a recipient id"},
		{"NumberField", `{"type":"t","recipients":[{"id":"a","email":5}]}`, "recipients[0].email", "a string"},
		{"UnknownField", `{"type":"t","recipients":[{"id":"b","emial":"b@example.com"}]}`, "recipients[0].emial", "not a known field"},
		{"NotAList", `{"type":"t","recipients":"a"}`, "recipients", "array"},
		{"TooMany", many, "recipients", "at most 100000"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, err := decodeWhole([]byte(c.body))
			var v *ValidationError
			if !errors.As(err, &v) || v.Errors[0].Field != c.field || !strings.Contains(v.Errors[0].Message, c.mention) {
				t.Fatalf("decoding gave %v, want %s naming %q", err, c.field, c.mention)
			}
		})
	}
	ev, err := decodeWhole([]byte(`{"type":"t","recipients":["a",{"id":"b"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if ev.Recipients[0].Inline || !ev.Recipients[1].Inline {
		t.Fatalf("inline flags = %v, %v; want a bare id and an object", ev.Recipients[0].Inline, ev.Recipients[1].Inline)
	}
	out, _ := json.Marshal(ev.Recipients)
	if string(out) != `["a",{"id":"b"}]` {
		t.Fatalf("recipients encode as %s", out)
	}
}
