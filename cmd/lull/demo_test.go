package main

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lull-dev/lull/db/dbtest"
)

// TestDemoPostsThroughTheAPI: the demo registers its types and posts its
// events through the HTTP API with the Go client and the printed API
// key, as a host application would, so each event belongs to that key.
func TestDemoPostsThroughTheAPI(t *testing.T) {
	t.Parallel()
	url := dbtest.NewURL(t)
	bootCommand(t, "demo", map[string]string{"DATABASE_URL": url, "LULL_ADDR": "127.0.0.1:0"})
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var types, events, byDemoKey int
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		err := conn.QueryRow(context.Background(), `SELECT
			(SELECT count(*) FROM notification_types),
			(SELECT count(*) FROM events),
			(SELECT count(*) FROM events e JOIN api_keys k ON k.id = e.api_key_id WHERE k.name LIKE '%LULL_API_KEY%')`).Scan(&types, &events, &byDemoKey)
		if err != nil {
			t.Fatal(err)
		}
		if events > 0 {
			break
		}
	}
	if types != 4 || events == 0 || byDemoKey != events {
		t.Fatalf("%d types, %d events, %d of them posted with the demo's API key; want 4 types and every event by the key", types, events, byDemoKey)
	}
}
