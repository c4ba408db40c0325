package batching

import (
	"bytes"
	"errors"
	"runtime"
	"testing"
)

// A list far longer than MaxRecipients is refused after MaxRecipients
// entries: what it allocates is bounded by MaxRecipients, not by how many
// entries the body holds (see Recipients), also when it is long enough to
// be decoded in halves whose first alone holds more than MaxRecipients.
func TestLongListRefusedWithinMaxRecipients(t *testing.T) {
	const n = 2_000_000
	var b bytes.Buffer
	b.Grow(n * 4)
	b.WriteByte('[')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"a"`)
	}
	b.WriteByte(']')
	body := b.Bytes()
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	var rs Recipients
	err := rs.UnmarshalJSON(body)
	runtime.ReadMemStats(&after)
	var v *ValidationError
	if !errors.As(err, &v) {
		t.Fatalf("a list of %d: %v, want refused", n, err)
	}
	// One pass refusing at MaxRecipients allocates a few times
	// MaxRecipients entries (append's growth) and the decoder's buffers.
	limit := uint64(64 << 20)
	if got := after.TotalAlloc - before.TotalAlloc; got > limit {
		t.Errorf("refusing a list of %d entries allocated %d MB, want at most %d MB (bounded by MaxRecipients)", n, got>>20, limit>>20)
	}
}
