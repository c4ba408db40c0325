package jobs_test

import (
	"testing"

	"github.com/lull-dev/lull/db"
)

// TestATypeNamedLikeTheHeldDigestIsStillCounted: a type whose key is
// "budget:held" gives its immediate batches that batch key; they are
// still emails of a counted type, not the held digest, so the budget
// holds them like any other.
func TestATypeNamedLikeTheHeldDigestIsStillCounted(t *testing.T) {
	t.Parallel()
	b, srv := smtpSetup(t)
	b.saveType(t, db.Type{Key: "budget:held", DefaultMode: "immediate"})
	b.setBudget(t, "bob", 1)
	for range 3 {
		b.post(t, "budget:held", "alice", "bob")
		b.flushDue(t)
	}
	if got := len(srv.Messages()); got != 1 {
		t.Fatalf("%d emails on the day, want 1 (the budget)", got)
	}
	if held, _ := b.heldItems(t, "bob"); held != 2 {
		t.Fatalf("%d notifications held, want 2", held)
	}
}
