package web_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestAPISuppressionDetailKeptWhole: the API allows a detail of 1000
// characters, but the list cut every detail to 1000 bytes, so a detail
// in any script beyond ASCII came back, and was kept, cut short without
// a word. What the API accepts is now kept whole.
func TestAPISuppressionDetailKeptWhole(t *testing.T) {
	t.Parallel()
	a := setupAPI(t)
	detail := strings.Repeat("é", 1000)
	body, _ := json.Marshal(map[string]string{"address": "zoe@example.com", "detail": detail})
	out := a.mustCall(t, "POST", "/api/v1/suppressions", string(body), http.StatusCreated)
	if got, _ := out["detail"].(string); got != detail {
		t.Fatalf("stored a detail of %d characters, want 1000", utf8.RuneCountInString(got))
	}
	a.mustCall(t, "POST", "/api/v1/suppressions", `{"address": "zoe@example.com", "detail": "`+detail+`é"}`, http.StatusUnprocessableEntity)
}
