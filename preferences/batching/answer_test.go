package batching

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

// A fan-out's answer joined from the parts its chunks were encoded in is
// byte for byte the answer encoded whole, whatever the parts hold: none,
// empty ones, one, several, and text JSON escapes.
func TestAnswerJoinedFromPartsIsTheAnswer(t *testing.T) {
	at := time.Date(2026, 11, 28, 8, 0, 0, 123456000, time.FixedZone("x", 3600))
	ref := func(i int) BatchRef {
		return BatchRef{ID: int64(1000 + i), Recipient: fmt.Sprintf("r<%d>&\"\u2028é", i), BatchKey: "post+thread:1", ClosesAt: at.Add(time.Duration(i) * time.Second)}
	}
	for _, sizes := range [][]int{{0}, {0, 0}, {3}, {2, 0, 5}, {0, 4}, {10000, 1, 9999}} {
		res := &IngestResult{ID: 42, Notifications: 7, Suppressed: 2, Batches: []BatchRef{}}
		parts := newAnswerParts(len(sizes))
		for k, n := range sizes {
			from := len(res.Batches)
			for range n {
				res.Batches = append(res.Batches, ref(len(res.Batches)))
			}
			parts.encode(k, res.Batches[from:])
		}
		want, err := res.encode()
		if err != nil {
			t.Fatal(err)
		}
		got, err := res.joined(parts)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("parts %v: joined %.200s (%v), want %.200s", sizes, got, err, want)
		}
	}
}

// appendBatchRefs writes what json.Marshal writes, for plain values and
// for those it leaves to encoding/json: escapes, bytes outside ASCII,
// invalid UTF-8, times in odd zones, years json refuses.
func TestBatchRefsEncodeAsJSONDoes(t *testing.T) {
	at := time.Date(2026, 11, 28, 8, 0, 0, 123456789, time.UTC)
	refs := []BatchRef{{ID: 1, Recipient: "u_1", BatchKey: "post", ClosesAt: at}}
	for i, s := range []string{"", "plain-id_7.x", "a\"b", `a\b`, "<script>", "a&b", "tab\there", "\x00\x1f\x7f", "é", "\u2028", "\xff\xfe", "日本"} {
		refs = append(refs, BatchRef{ID: int64(-i), Recipient: s, BatchKey: s + "+k", ClosesAt: at.Add(time.Duration(i) * time.Millisecond)})
	}
	for _, z := range []*time.Location{time.FixedZone("", 5*3600+30*60), time.FixedZone("", -(9*3600 + 59)), time.FixedZone("odd", 23*3600)} {
		refs = append(refs, BatchRef{ID: 9, ClosesAt: at.In(z)}, BatchRef{ID: 10, ClosesAt: time.Date(2026, 1, 2, 3, 4, 5, 0, z)})
	}
	for _, list := range [][]BatchRef{nil, {}, refs[:1], refs} {
		want, err := json.Marshal(list)
		if err != nil {
			t.Fatal(err)
		}
		got, err := appendBatchRefs(nil, list)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%d refs: got\n%s (%v)\nwant\n%s", len(list), got, err, want)
		}
	}
	for _, y := range []int{-1, 10000} {
		bad := []BatchRef{{ClosesAt: time.Date(y, 1, 1, 0, 0, 0, 0, time.UTC)}}
		if _, err := json.Marshal(bad); err == nil {
			t.Fatalf("json encodes year %d", y)
		}
		if _, err := appendBatchRefs(nil, bad); err == nil {
			t.Fatalf("year %d encoded", y)
		}
	}
}

// FuzzBatchRefsEncodeAsJSONDoes: any strings and times.
func FuzzBatchRefsEncodeAsJSONDoes(f *testing.F) {
	f.Add(int64(1), "u_1", "post", int64(1795900000), int32(0), int32(3600))
	f.Add(int64(-5), "a<b>\"\\\x00é\u2028\xff", "k&", int64(-62135596800), int32(999999999), int32(-86399))
	f.Fuzz(func(t *testing.T, id int64, recipient, key string, sec int64, nsec, offset int32) {
		at := time.Unix(sec, int64(nsec)).In(time.FixedZone("", int(offset)))
		list := []BatchRef{{ID: id, Recipient: recipient, BatchKey: key, ClosesAt: at}}
		want, wantErr := json.Marshal(list)
		got, err := appendBatchRefs(nil, list)
		if (err != nil) != (wantErr != nil) || err == nil && !bytes.Equal(got, want) {
			t.Fatalf("got %s (%v), want %s (%v)", got, err, want, wantErr)
		}
	})
}
