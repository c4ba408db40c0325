package batching

import (
	"bytes"
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
