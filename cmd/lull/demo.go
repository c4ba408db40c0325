package main

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/lull-dev/lull/client"
)

// demoTypes are the notification types the demo registers, by key.
var demoTypes = map[string]client.Type{
	"app.shared": {Name: "Shared apps", Category: "Sharing", DefaultMode: "cooldown", Window: "20s", MaxWait: "1m30s",
		ItemText: "{{actor.name}} shared {{object.title}}", GroupText: "{{actors}} shared {{object.title}} with you|{{actors}} shared {{count}} apps with you"},
	"task.failed": {Name: "Failed tasks", Category: "Operations", DefaultMode: "immediate", Window: "1m", MaxWait: "5m", BurstLimit: ptr(3),
		ItemText: "{{object.title}} failed: {{data.error}}", GroupText: "{{object.title}} failed|{{count}} tasks failed"},
	"comment.created": {Name: "Comments", Category: "Documents", DefaultMode: "daily", Window: "5m", MaxWait: "1h",
		ItemText: "{{actor.name}} on {{object.title}}: {{data.excerpt}}", GroupText: "{{actors}} commented on {{object.title}}|{{actors}} left {{count}} comments"},
	"security.alert": {Name: "Security alerts", Category: "Account", Required: true, DefaultMode: "immediate", Window: "1m", MaxWait: "5m",
		ItemText: "{{object.title}}", GroupText: "Security alert|{{count}} security alerts"},
}

var demoPeople = []client.RecipientRef{
	{ID: "u_bob", Email: "bob@example.com", Name: "Bob Stone", Timezone: "Europe/Berlin"},
	{ID: "u_carol", Email: "carol@example.com", Name: "Carol Tanaka", Timezone: "Asia/Tokyo"},
	{ID: "u_dan", Email: "dan@example.com", Name: "Dan Okafor", Timezone: "America/New_York"},
}

var demoActors = []client.Actor{{ID: "u_alice", Name: "Alice"}, {ID: "u_chen", Name: "Chen Wei"}, {ID: "u_fatima", Name: "Fatima"}, {ID: "u_jonas", Name: "Jonas"}}

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
// subscribers, and comments that collect in daily digests. It goes
// through the API with the Go client, as a host application would.
func runDemo(ctx context.Context, logger *slog.Logger, c *client.Client) {
	for key, t := range demoTypes {
		if _, err := c.PutType(ctx, key, t); err != nil {
			logger.Error("demo: save type", "type", key, "err", err)
			return
		}
	}
	logger.Info("demo: posting events for the next 5 minutes")
	deadline := time.Now().Add(5 * time.Minute)
	for n := 0; time.Now().Before(deadline); n++ {
		if _, err := c.CreateEvent(ctx, demoEvent(n)); err != nil && ctx.Err() == nil {
			logger.Warn("demo: post event", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Duration(1500+rand.IntN(2500)) * time.Millisecond):
		}
	}
}

func demoEvent(n int) client.Event {
	actor := demoActors[n%len(demoActors)]
	switch n % 5 {
	case 0, 1:
		return client.Event{Type: "app.shared", Actor: &actor, Recipients: demoPeople[:1],
			Object: &client.Object{Type: "app", ID: fmt.Sprint(n), Title: fmt.Sprintf("Budget tracker %d", n), URL: fmt.Sprintf("https://app.example/apps/%d", n)}}
	case 2, 3:
		return client.Event{Type: "task.failed", Actor: &client.Actor{ID: "ci", Name: "CI"}, Recipients: demoPeople,
			Object: &client.Object{Type: "task", ID: fmt.Sprint(n), Title: fmt.Sprintf("nightly-build #%d", n), URL: fmt.Sprintf("https://ci.example/tasks/%d", n)},
			Data:   map[string]any{"error": "exit status 1"}}
	}
	return client.Event{Type: "comment.created", Actor: &actor, Recipients: demoPeople, BatchKey: "document:7",
		Object: &client.Object{Type: "document", ID: "doc_7", Title: "Q3 plan", URL: "https://app.example/doc/7"},
		Data:   map[string]any{"excerpt": "Looks good, but the numbers in section 2 need a second look."}}
}

func ptr[T any](v T) *T { return &v }
