package web_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/lull-dev/lull/db/dbtest"
)

// TestNotFoundDoesNotEchoAHugeID: a 404 names what was not found, clipped,
// so a client sending an id of 40 KB does not get it back.
func TestNotFoundDoesNotEchoAHugeID(t *testing.T) {
	t.Parallel()
	a := serveAPI(t, dbtest.New(t))
	id := strings.Repeat("é", 20_000)
	got, out := a.call(t, "GET", "/api/v1/recipients/"+id+"/preferences", "")
	if got != http.StatusNotFound {
		t.Fatalf("GET of an unknown huge id = %d, want 404", got)
	}
	detail, _ := out["detail"].(string)
	if len(detail) > 400 || !strings.Contains(detail, "éé") {
		t.Errorf("detail is %d bytes, want the id clipped to a few hundred: %.80q", len(detail), detail)
	}
}
