package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/db/dbtest"
	"github.com/lull-dev/lull/jobs"
	"github.com/lull-dev/lull/preferences/batching"
)

// TestSimulateCommand replays stored events and a file of events from the
// command line, as a table and as JSON, and names what is wrong in a
// policy file.
func TestSimulateCommand(t *testing.T) {
	t.Parallel()
	url := dbtest.NewURL(t)
	env := map[string]string{"DATABASE_URL": url}
	lull := func(args ...string) (string, error) {
		var out, errOut bytes.Buffer
		err := run(context.Background(), args, func(k string) string { return env[k] }, &out, &errOut)
		return out.String() + errOut.String(), err
	}
	// History: five comments for bob, a minute apart, in a 2-minute
	// cool-down: one email.
	ctx := context.Background()
	d, err := db.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := db.SaveType(ctx, d.Pool, &db.Type{Key: "comment", Name: "Comments", DefaultMode: "cooldown", WindowMS: 120_000,
		MaxWaitMS: 3_600_000, DisplayLimit: 10, ItemOrder: "latest", ItemText: "{{actor.name}}", GroupText: "{{count}} comments", BurstLimit: 5}); err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	client, err := jobs.NewClient(d, jobs.Config{Workers: 1, JobTimeout: time.Minute, RescueAfter: time.Hour, SweepEvery: time.Hour, Retention: 720 * time.Hour},
		&jobs.FlushWorker{DB: d, Logger: logger}, logger, true)
	if err != nil {
		t.Fatal(err)
	}
	engine := &batching.Engine{DB: d, Scheduler: &jobs.Scheduler{Client: client}, Logger: logger}
	for range 5 {
		ev := &batching.Event{Type: "comment", Recipients: []batching.RecipientRef{{ID: "u_bob", Email: "bob@example.com", Inline: true}}}
		if _, err := engine.Ingest(ctx, 1, ev); err != nil {
			t.Fatal(err)
		}
	}

	dir := t.TempDir()
	policy := filepath.Join(dir, "policy.json")
	os.WriteFile(policy, []byte(`[{"name":"immediate comments","types":{"comment":{"mode":"immediate","burst_limit":0}}},
		{"name":"all weekly","everyone":{"mode":"weekly","weekly_on":"friday","weekly_at":"17:00"}}]`), 0o600)
	now := time.Now().UTC()
	from, to := now.Add(-time.Hour).Format(time.RFC3339), now.Add(time.Hour).Format(time.RFC3339)
	out, err := lull("simulate", "--from", from, "--to", to, "--policy", policy)
	if err != nil {
		t.Fatalf("simulate: %v\n%s", err, out)
	}
	for _, want := range []string{"5 events accepted", "Actually sent", "Current settings", "immediate comments", "all weekly", "emails"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	out, err = lull("simulate", "--from", from, "--to", to, "--policy", policy, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		Results []struct {
			Name    string
			Overall struct{ Emails int }
		}
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("--json: %v\n%s", err, out)
	}
	got := map[string]int{}
	for _, r := range rep.Results {
		got[r.Name] = r.Overall.Emails
	}
	want := map[string]int{"Actually sent": 0, "Current settings": 1, "immediate comments": 5, "all weekly": 1}
	for name, n := range want {
		if got[name] != n {
			t.Errorf("%s: %d emails, want %d (all: %v)", name, got[name], n, got)
		}
	}

	events := filepath.Join(dir, "events.jsonl")
	os.WriteFile(events, []byte(`{"type":"comment","occurred_at":"2026-03-29T00:30:00Z","recipients":[{"id":"u_eve","timezone":"Europe/Berlin"}]}
{"type":"comment","occurred_at":"2026-03-29T00:31:00Z","recipients":["u_eve"]}
`), 0o600)
	if out, err := lull("simulate", "--events", events, "--policy", policy); err != nil || !strings.Contains(out, "2 uploaded events") {
		t.Errorf("--events: %v\n%s", err, out)
	}

	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(bad, []byte(`{"types":{"comment":{"window":"soon"}}}`), 0o600)
	if _, err := lull("simulate", "--from", from, "--to", to, "--policy", bad); err == nil || !strings.Contains(err.Error(), "policies[0].types.comment.window") {
		t.Errorf("bad policy: %v", err)
	}
	if _, err := lull("simulate", "--from", "2026-11-20", "--to", "2026-11-19"); err == nil || !strings.Contains(err.Error(), "--to") {
		t.Errorf("backwards range: %v", err)
	}
}
