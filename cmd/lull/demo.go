package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/preferences/batching"
)

// demoTypes are the notification types the demo registers.
var demoTypes = []db.Type{
	{Key: "app.shared", Name: "Shared apps", Category: "Sharing", DefaultMode: "cooldown", WindowMS: 20_000, MaxWaitMS: 90_000,
		ItemText: "{{actor.name}} shared {{object.title}}", GroupText: "{{actors}} shared {{object.title}} with you|{{actors}} shared {{count}} apps with you"},
	{Key: "task.failed", Name: "Failed tasks", Category: "Operations", DefaultMode: "immediate", WindowMS: 60_000, MaxWaitMS: 300_000, BurstLimit: 3,
		ItemText: "{{object.title}} failed: {{data.error}}", GroupText: "{{object.title}} failed|{{count}} tasks failed"},
	{Key: "comment.created", Name: "Comments", Category: "Documents", DefaultMode: "daily", WindowMS: 300_000, MaxWaitMS: 3_600_000,
		ItemText: "{{actor.name}} on {{object.title}}: {{data.excerpt}}", GroupText: "{{actors}} commented on {{object.title}}|{{actors}} left {{count}} comments"},
	{Key: "security.alert", Name: "Security alerts", Category: "Account", Required: true, DefaultMode: "immediate", WindowMS: 60_000, MaxWaitMS: 300_000,
		ItemText: "{{object.title}}", GroupText: "Security alert|{{count}} security alerts"},
}

var demoPeople = []batching.RecipientRef{
	{ID: "u_bob", Email: "bob@example.com", Name: "Bob Stone", Timezone: "Europe/Berlin", Inline: true},
	{ID: "u_carol", Email: "carol@example.com", Name: "Carol Tanaka", Timezone: "Asia/Tokyo", Inline: true},
	{ID: "u_dan", Email: "dan@example.com", Name: "Dan Okafor", Timezone: "America/New_York", Inline: true},
}

var demoActors = []batching.Actor{{ID: "u_alice", Name: "Alice"}, {ID: "u_chen", Name: "Chen Wei"}, {ID: "u_fatima", Name: "Fatima"}, {ID: "u_jonas", Name: "Jonas"}}

// Demo credentials, used when none are configured: the demo runs on a
// local throwaway database, so fixed, printed credentials are a convenience,
// not a risk.
const (
	demoAdminEmail    = "admin@localhost"
	demoAdminPassword = "lull-demo"
	demoAPIKey        = "lull_demo_key"
)

// demoDefaults fills in an operator and an API key the demo prints.
func demoDefaults(cfg *Config) {
	if cfg.AdminEmail == "" || cfg.AdminPassword == "" {
		cfg.AdminEmail, cfg.AdminPassword = demoAdminEmail, demoAdminPassword
	}
	if cfg.APIKey == "" {
		cfg.APIKey = demoAPIKey
	}
}

// runDemo registers the demo types and posts a realistic stream for a few
// minutes: a burst of shares to Bob, a flood of task failures to three
// subscribers, and comments that collect in daily digests.
func runDemo(ctx context.Context, a *app) {
	a.logger.Info("demo: operator console login", "email", a.cfg.AdminEmail, "password", a.cfg.AdminPassword, "api_key", a.cfg.APIKey)
	for i := range demoTypes {
		t := demoTypes[i]
		t.DisplayLimit, t.ItemOrder, t.SkipRead = 10, "latest", true
		if err := db.SaveType(ctx, a.db.Pool, &t); err != nil {
			a.logger.Error("demo: save type", "err", err)
			return
		}
	}
	a.logger.Info("demo: posting events for the next 5 minutes")
	deadline := time.Now().Add(5 * time.Minute)
	for n := 0; time.Now().Before(deadline); n++ {
		ev := demoEvent(n)
		if _, err := a.engine.Ingest(ctx, 0, ev); err != nil {
			a.logger.Warn("demo: ingest", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Duration(1500+rand.IntN(2500)) * time.Millisecond):
		}
	}
}

func demoEvent(n int) *batching.Event {
	actor := demoActors[n%len(demoActors)]
	switch n % 5 {
	case 0, 1:
		return &batching.Event{Type: "app.shared", Actor: actor, Recipients: demoPeople[:1],
			Object: batching.Object{Type: "app", ID: fmt.Sprint(n), Title: fmt.Sprintf("Budget tracker %d", n), URL: fmt.Sprintf("https://app.example/apps/%d", n)}}
	case 2, 3:
		return &batching.Event{Type: "task.failed", Actor: batching.Actor{ID: "ci", Name: "CI"}, Recipients: demoPeople,
			Object: batching.Object{Type: "task", ID: fmt.Sprint(n), Title: fmt.Sprintf("nightly-build #%d", n), URL: fmt.Sprintf("https://ci.example/tasks/%d", n)},
			Data:   map[string]any{"error": "exit status 1"}}
	}
	return &batching.Event{Type: "comment.created", Actor: actor, Recipients: demoPeople, BatchKey: "document:7",
		Object: batching.Object{Type: "document", ID: "doc_7", Title: "Q3 plan", URL: "https://app.example/doc/7"},
		Data:   map[string]any{"excerpt": "Looks good, but the numbers in section 2 need a second look."}}
}
