package batching

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/mailtemplates"
)

var composeNow = time.Date(2026, 11, 23, 7, 0, 0, 0, time.UTC)

func envelope(secret string) Envelope {
	return Envelope{From: "Acme <notify@acme.example>", Links: mailtemplates.Links{BaseURL: "https://acme.example", Secret: []byte(secret)}}
}

// flushContent is a cooldown batch of n comments on object, as a flush
// reads it.
func flushContent(batchKey, object string, n int) *db.FlushContent {
	typ := &db.Type{Key: "comment.created", Name: "Comments", DefaultMode: "cooldown", DisplayLimit: 10, ItemOrder: "latest"}
	rec := db.Recipient{ID: "u_bob", Email: "bob@example.com", Active: true}
	fc := &db.FlushContent{
		Batch:    &db.Batch{ID: 42, RecipientID: rec.ID, BatchKey: batchKey, Mode: "cooldown", OpenedAt: composeNow.Add(-time.Hour)},
		Types:    map[string]*db.Type{typ.Key: typ},
		Settings: map[string]db.RecipientSettings{typ.Key: {Recipient: rec}},
	}
	for i := range n {
		obj, _ := json.Marshal(map[string]string{"type": "document", "id": object, "title": "Q3 plan"})
		fc.Items = append(fc.Items, db.Item{NotificationID: int64(i), TypeKey: typ.Key, Actor: json.RawMessage(`{"id":"u_a","name":"Ann"}`),
			Object: obj, Data: json.RawMessage(`{}`), OccurredAt: composeNow.Add(-time.Duration(i) * time.Minute)})
	}
	return fc
}

func compose(t *testing.T, e Envelope, fc *db.FlushContent) *mailtemplates.Message {
	t.Helper()
	c, err := e.Compose(fc, composeNow)
	if err != nil || c.Message == nil {
		t.Fatalf("Compose: %v (skip %q)", err, c.Skip)
	}
	return c.Message
}

// TestMessageIDPerInstallation: batch 1 of two installations sending from
// one domain used to share <batch-1@domain>; the ID now carries an HMAC of
// the installation's secret, and a retry of one batch keeps its ID.
func TestMessageIDPerInstallation(t *testing.T) {
	t.Parallel()
	fc := flushContent("comment.created+document:7", "doc_7", 2)
	a, b := envelope(strings.Repeat("a", 32)), envelope(strings.Repeat("b", 32))
	first, retry, other := compose(t, a, fc), compose(t, a, fc), compose(t, b, fc)
	if first.MessageID != retry.MessageID {
		t.Errorf("a retry changed the Message-ID: %q, then %q", first.MessageID, retry.MessageID)
	}
	if first.MessageID == other.MessageID {
		t.Errorf("two installations both sent %q", first.MessageID)
	}
	if !strings.HasPrefix(first.MessageID, "batch-42.") || !strings.HasSuffix(first.MessageID, "@acme.example") {
		t.Errorf("Message-ID %q", first.MessageID)
	}
	if strings.Contains(first.MessageID, strings.Repeat("a", 8)) {
		t.Error("the Message-ID shows the secret")
	}
}

// TestThreadsPerBatchKey: successive emails about one object name one
// thread root, as GitHub's and Linear's do; another object, another
// recipient or another installation is another thread; a digest starts
// none.
func TestThreadsPerBatchKey(t *testing.T) {
	t.Parallel()
	e := envelope(strings.Repeat("s", 32))
	one := compose(t, e, flushContent("comment.created+document:7", "doc_7", 2))
	later := flushContent("comment.created+document:7", "doc_7", 3)
	later.Batch.ID = 43
	two := compose(t, e, later)
	if one.ThreadID == "" || one.ThreadID != two.ThreadID || one.MessageID == two.MessageID {
		t.Fatalf("two emails about one document: threads %q and %q", one.ThreadID, two.ThreadID)
	}
	if !strings.HasSuffix(one.ThreadID, "@acme.example") || one.ThreadID == one.MessageID {
		t.Errorf("thread root %q", one.ThreadID)
	}
	other := compose(t, e, flushContent("comment.created+document:8", "doc_8", 2))
	carol := flushContent("comment.created+document:7", "doc_7", 2)
	rs := carol.Settings["comment.created"]
	rs.Recipient.ID = "u_carol"
	carol.Settings["comment.created"] = rs
	for name, m := range map[string]*mailtemplates.Message{
		"another object":       other,
		"another recipient":    compose(t, e, carol),
		"another installation": compose(t, envelope(strings.Repeat("t", 32)), flushContent("comment.created+document:7", "doc_7", 2)),
	} {
		if m.ThreadID == one.ThreadID {
			t.Errorf("%s shares the thread %q", name, m.ThreadID)
		}
	}
	// Without an event batch key, one object still makes a thread; many
	// do not.
	if m := compose(t, e, flushContent("comment.created", "doc_7", 1)); m.ThreadID == "" {
		t.Error("an email about one object starts no thread")
	}
	many := flushContent("comment.created", "doc_7", 2)
	many.Items[1].Object = json.RawMessage(`{"type":"document","id":"doc_9"}`)
	if m := compose(t, e, many); m.ThreadID != "" {
		t.Errorf("an email about two objects threads as %q", m.ThreadID)
	}
	digest := flushContent("digest:daily", "doc_7", 2)
	digest.Batch.Mode = "daily"
	if m := compose(t, e, digest); m.ThreadID != "" || m.ListID != `Daily digest <daily-digest.acme.example>` {
		t.Errorf("digest: thread %q, list %q", m.ThreadID, m.ListID)
	}
	if one.ListID != "Comments <comment-created.acme.example>" {
		t.Errorf("List-Id %q", one.ListID)
	}
}
