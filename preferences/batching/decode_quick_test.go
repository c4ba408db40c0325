package batching

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
)

// decodeWhole decodes body as the API does without DecodeQuick: unknown
// fields refused, one JSON value only.
func decodeWhole(body []byte) (*Event, error) {
	var ev Event
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ev); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("more after the value")
	}
	return &ev, nil
}

// FuzzDecodeQuick: whatever the body, an event DecodeQuick accepts is
// one the whole decoding accepts, field for field, and one it refuses
// leaves the event zero, for the whole decoding to name the error.
func FuzzDecodeQuick(f *testing.F) {
	for _, seed := range []string{
		`{"type":"t","recipients":["a",{"id":"b","email":"b@example.com","timezone":"Asia/Tokyo"}],"data":{"recipients":[1]}}`,
		`{"recipients":["a"],"type":"t","actor":{"id":"x"},"object":{"id":"o"},"batch_key":"k","key":"i","occurred_at":"2026-11-22T10:00:00Z"}`,
		`{"type":"t","recipients":["a"],"recipients":["b"]}`,
		`{"type":"t","Recipients":["a"],"recipients":["b"]}`,
		`{"type":"t","recipients":["a"],"RECIPIENTS":null}`,
		`{"type":"t","recipient\u0073":["a"]}`,
		`{"type":"t","recipientſ":["a"]}`,
		`{"type":"t","recipients":["a"]}]`,
		`{"type":"t","recipients":["a"}}`,
		`{"type":"t","recipients":["a",]}`,
		`{"type":"t","recipients":["a" "b"]}`,
		`{"type":"t","recipients":["a"]]}`,
		`{"type":"t","recipients":["a"],}`,
		`{"type":"t","recipients":null}`,
		`{"type":"t","recipients":"a"}`,
		`{"type":"t","recipients":["\u0000"]}`,
		`{"type":"t","recipients":[{"id":"a","x":1}]}`,
		`{"type":"t","recipients":["a"],"emial":"x"}`,
		` {"type" : "t" , "recipients" : [ "a" , "b" ] } `,
		`{"type":"t","recipients":["a"]} {}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var quick Event
		if !quick.DecodeQuick(body) {
			if !reflect.DeepEqual(quick, Event{}) {
				t.Fatalf("refused %q, leaving %+v", body, quick)
			}
			return
		}
		whole, err := decodeWhole(body)
		if err != nil {
			t.Fatalf("quick decoding accepted %q, the whole decoding refuses it: %v", body, err)
		}
		if !reflect.DeepEqual(&quick, whole) {
			t.Fatalf("%q decodes quickly as\n%+v\nand whole as\n%+v", body, quick, *whole)
		}
	})
}

// Bodies as apps send them take the quick way and decode as the whole
// decoding does, lists long enough to be decoded in halves too; a long
// list broken anywhere, at the split between the halves or at its end,
// is refused and left to the whole decoding.
func TestDecodeQuickReadsLongListsAsTheDecoderDoes(t *testing.T) {
	t.Parallel()
	entry := func(i int) string {
		if i%3 == 0 {
			return fmt.Sprintf(`"u%06d"`, i)
		}
		return fmt.Sprintf(`{"id":"u%06d","email":"u%06d@example.com","name":"N \"%d\" [x]","timezone":"Europe/Berlin","locale":"de"}`, i, i, i)
	}
	list := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = entry(i)
		}
		return out
	}
	body := func(entries []string, tail string) []byte {
		return []byte(`{"type":"comment","actor":{"id":"a","name":"A"},"recipients":[` + strings.Join(entries, ",") + tail + `,"data":{"n":1}}`)
	}
	for _, n := range []int{1, 50, 8_000} {
		b := body(list(n), "]")
		if n == 8_000 && len(b) < halvesFrom {
			t.Fatalf("a body of %d bytes is not decoded in halves", len(b))
		}
		var quick Event
		if !quick.DecodeQuick(b) {
			t.Fatalf("%d recipients: not decoded the quick way", n)
		}
		whole, err := decodeWhole(b)
		if err != nil || !reflect.DeepEqual(&quick, whole) {
			t.Fatalf("%d recipients: decoded quickly as something else than whole (%v)", n, err)
		}
	}
	entries := list(8_000)
	at, _ := middleEntry([]byte("[" + strings.Join(entries, ",") + "]"))
	joined := strings.Join(entries, ",")
	split := at - 1 // the comma between the halves, in joined
	if joined[split] != ',' {
		t.Fatalf("no comma at the split: %q", joined[split-5:split+5])
	}
	for name, b := range map[string][]byte{
		"no comma at the split":   body([]string{joined[:split] + " " + joined[split+1:]}, "]"),
		"two commas at the split": body([]string{joined[:split] + ",," + joined[split+1:]}, "]"),
		"a bracket for a comma":   body([]string{joined[:split] + "]" + joined[split+1:]}, "]"),
		"a brace for the end":     body(entries, "}"),
		"a second bracket":        body(entries, "]]"),
		"a comma before the end":  body(entries, ",]"),
	} {
		if _, err := decodeWhole(b); err == nil {
			t.Fatalf("%s: the whole decoding accepts it", name)
		}
		var quick Event
		if quick.DecodeQuick(b) {
			t.Errorf("%s: accepted the quick way", name)
		}
	}
}

// BenchmarkDecodeInlineFanOut decodes the body of a fan-out to 100,000
// inline recipients (12 MB) both ways.
func BenchmarkDecodeInlineFanOut(b *testing.B) {
	var sb strings.Builder
	sb.WriteString(`{"type":"comment","actor":{"id":"a","name":"A"},"recipients":[`)
	for i := range MaxRecipients {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"id":"bench-%06d","email":"bench-%06d@example.com","name":"Follower %d","timezone":"Europe/Berlin","locale":"de"}`, i, i, i)
	}
	sb.WriteString(`],"data":{"title":"A new artwork"}}`)
	body := []byte(sb.String())
	b.Run("quick", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			var ev Event
			if !ev.DecodeQuick(body) {
				b.Fatal("not decoded the quick way")
			}
		}
	})
	b.Run("whole", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			if _, err := decodeWhole(body); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// Found in review: a list that is null followed by more, and a long list
// ending in a comma that middleEntry split the halves at (the second
// half then read an empty list), were taken the quick way although the
// whole decoding refuses them.
func TestDecodeQuickRefusesWhatTheDecoderRefuses(t *testing.T) {
	t.Parallel()
	pad := strings.Repeat(" ", halvesFrom)
	for _, body := range []string{
		`{"type":"t","recipients":nullx}`,
		`{"type":"t","recipients":null"a"}`,
		`{"type":"t","recipients":null{"id":"a"}}`,
		`{"type":"t","recipients":null:1,"key":"k"}`,
		`{"type":"t","recipients":["u1","u2"` + pad + `,]}`,
		`{"type":"t","recipients":["u1",{"id":"u2"` + pad + `},]}`,
		`{"type":"t","recipients":["u1",{"id":"u2","name":"` + strings.Repeat("n", halvesFrom) + `"},  ]}`,
		`{"type":"t","recipients":["u1"` + pad + `,` + " \n\t" + `]}`,
	} {
		if _, err := decodeWhole([]byte(body)); err == nil {
			t.Fatalf("%.60q: the whole decoding accepts it", body)
		}
		var quick Event
		if quick.DecodeQuick([]byte(body)) {
			t.Errorf("%.60q: accepted the quick way", body)
		}
	}
}
