package batching

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// TestLongListsDecodeInHalvesAsInOnePass: a recipient list long enough to
// be decoded in two halves at once decodes to the same entries, and fails
// with the same error naming the same entry, as one pass over it, whether
// the bad entry is in the first half or the second, past the limit on
// recipients or before it, and with ids that hold quotes, brackets and
// commas a careless split would cut at.
func TestLongListsDecodeInHalvesAsInOnePass(t *testing.T) {
	list := func(n int, entry func(i int) string) []byte {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = entry(i)
		}
		return []byte("[" + strings.Join(parts, ", ") + "]")
	}
	object := func(i int) string {
		return fmt.Sprintf(`{"id":"u%d","email":"u%d@example.com","name":"User, \"%d\" ]}","timezone":"Europe/Berlin"}`, i, i, i)
	}
	tricky := func(i int) string { return fmt.Sprintf(`"id\\\"],{%d,"`, i) }
	bad := func(at ...int) func(int) string {
		return func(i int) string {
			for _, a := range at {
				if i == a {
					return "7"
				}
			}
			return fmt.Sprintf(`"r%d"`, i)
		}
	}
	unknown := func(i int) string {
		if i == 70_000 {
			return `{"id":"x","emial":"x@example.com"}`
		}
		return object(i)
	}
	for _, c := range []struct {
		name string
		body []byte
	}{
		{"objects", list(MaxRecipients, object)},
		{"tricky ids", list(MaxRecipients, tricky)},
		{"bad in the second half", list(MaxRecipients, bad(70_000))},
		{"bad in both halves", list(MaxRecipients, bad(10, 70_000))},
		{"bad in the first half", list(MaxRecipients, bad(10))},
		{"unknown field in the second half", list(MaxRecipients, unknown)},
		{"one too many", list(MaxRecipients+1, bad())},
		{"bad before the limit", list(MaxRecipients+1, bad(MaxRecipients-1))},
		{"bad past the limit", list(MaxRecipients+2, bad(MaxRecipients+1))},
		{"short ids", list(MaxRecipients, func(i int) string { return fmt.Sprintf(`"%d"`, i) })},
	} {
		t.Run(c.name, func(t *testing.T) {
			if at, _ := middleEntry(c.body); len(c.body) < halvesFrom || at == 0 {
				t.Fatalf("%d bytes, split at %d: not decoded in halves", len(c.body), at)
			}
			want, wantErr := decodeRecipients(c.body, 0, 0, -1)
			var got Recipients
			err := got.UnmarshalJSON(c.body)
			if fmt.Sprint(err) != fmt.Sprint(wantErr) || !reflect.DeepEqual(err, wantErr) {
				t.Fatalf("halves: %v; one pass: %v", err, wantErr)
			}
			if wantErr == nil && !reflect.DeepEqual(got, want) {
				t.Fatalf("halves decoded %d entries, one pass %d, and they differ", len(got), len(want))
			}
		})
	}
}

// BenchmarkDecodeFanOut decodes the recipient list of an event to
// 100,000 recipients given inline, in halves (as the API does) and in
// one pass: go test -bench DecodeFanOut ./preferences/batching.
func BenchmarkDecodeFanOut(b *testing.B) {
	parts := make([]string, MaxRecipients)
	for i := range parts {
		parts[i] = fmt.Sprintf(`{"id":"in100000-%d","email":"in100000-%d@bench.example","name":"Follower in100000-%d","timezone":"Europe/Berlin","locale":"de"}`, i, i, i)
	}
	body := []byte("[" + strings.Join(parts, ",") + "]")
	b.Run("halves", func(b *testing.B) {
		for b.Loop() {
			var rs Recipients
			if err := rs.UnmarshalJSON(body); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("one pass", func(b *testing.B) {
		for b.Loop() {
			if _, err := decodeRecipients(body, 0, 0, -1); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// FuzzRecipientHalves: any recipient list with a comma between two
// entries decodes in halves to what one pass gives, entries and error.
func FuzzRecipientHalves(f *testing.F) {
	for _, seed := range []string{
		`["a","b"]`, `["a",{"id":"b","email":"b@example.com"}]`, `[{"id":"a,\"]"},7,"c"]`,
		`[1,2]`, `["a", {"id":"b","emial":"x"}]`, `[["a"],"b"]`, `["\\",",",null]`, `[{"id":"a"} , {"id":"b","name":{"x":1}}]`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !json.Valid(b) {
			return // the outer decoder refuses it before the list is decoded
		}
		at, before := middleEntry(b)
		if at == 0 {
			return
		}
		if b[at] != ',' {
			t.Fatalf("split at %q, not a comma", b[at])
		}
		want, wantErr := decodeRecipients(b, 0, 0, -1)
		got, err := decodeHalves(b, at, before)
		if fmt.Sprint(err) != fmt.Sprint(wantErr) || !reflect.DeepEqual(got, want) {
			t.Fatalf("halves: %v, %v; one pass: %v, %v", got, err, want, wantErr)
		}
	})
}
