package batching

import (
	"strings"
	"testing"
	"time"
)

// TestCheckMeasuresCompactData: data is measured as the compact JSON that
// is stored, markup unescaped, against the limit the engine is given; an
// event without data passes any limit.
func TestCheckMeasuresCompactData(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	check := func(data map[string]any, maxData int) (*Event, error) {
		ev := &Event{Type: "t", Recipients: Recipients{{ID: "u"}}, Data: data}
		return ev, ev.Check(now, maxData)
	}
	markup := map[string]any{"x": "<b>&</b>"} // {"x":"<b>&</b>"}: 16 bytes
	ev, err := check(markup, 16)
	if err != nil || string(ev.encodedData) != `{"x":"<b>&</b>"}` {
		t.Fatalf("16 bytes of data with a limit of 16: %v, stored as %s", err, ev.encodedData)
	}
	if _, err := check(markup, 15); err == nil || !strings.Contains(err.Error(), "data: is 16 bytes") || !strings.Contains(err.Error(), "at most 15 bytes") {
		t.Fatalf("16 bytes of data with a limit of 15: %v, want data named with both sizes", err)
	}
	// Strings alone over the limit are refused before encoding.
	deep := map[string]any{"list": []any{1.0, map[string]any{"s": strings.Repeat("a", 20)}}}
	if _, err := check(deep, 20); err == nil || !strings.Contains(err.Error(), "data: is over 20 bytes") {
		t.Fatalf("24 bytes of strings with a limit of 20: %v, want data refused", err)
	}
	if _, err := check(nil, 2); err != nil {
		t.Fatalf("no data with a limit of 2: %v", err)
	}
}
