package web_test

import (
	"context"
	"errors"
	"net/http"
	"reflect"
	"testing"

	"github.com/lull-dev/lull/client"
)

// TestClientCoversTheAPI drives every operation through the Go client,
// with each call checked against openapi.json: the client's requests
// are ones the document allows and the server accepts, and its types
// read the answers. Merges through the client keep what they leave out
// and clear what they send as null.
func TestClientCoversTheAPI(t *testing.T) {
	t.Parallel()
	a := setupAPI(t)
	ctx := context.Background()
	c := client.New(a.srv.URL, testKey, client.WithHTTPClient(a.http))
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}

	typ, err := c.PutType(ctx, "comment", client.Type{Name: "Comments", DefaultMode: "cooldown", Window: "5m"})
	must(err)
	if typ.DisplayLimit != 10 || typ.ItemOrder != "latest" || typ.MaxWait != "1h" {
		t.Fatalf("type saved without its defaults: %+v", typ)
	}
	types, err := c.ListTypes(ctx)
	must(err)
	got, err := c.GetType(ctx, "comment")
	must(err)
	if len(types) != 1 || !reflect.DeepEqual(*got, types[0]) {
		t.Fatalf("types %+v, type %+v", types, got)
	}

	_, err = c.PutRecipient(ctx, "u_bob", client.RecipientPatch{Email: client.Value("bob@example.com"), Name: client.Value("Bob"), Timezone: "Europe/Berlin"})
	must(err)
	rec, err := c.PutRecipient(ctx, "u_bob", client.RecipientPatch{Name: client.Null[string]()})
	must(err)
	if rec.Name != "" || rec.Email != "bob@example.com" || rec.Timezone != "Europe/Berlin" || !rec.Active {
		t.Fatalf("after clearing the name: %+v", rec)
	}

	prefs, err := c.PutPreferences(ctx, "u_bob", client.PreferencesPatch{
		Digest:     &client.Digest{DailyAt: "09:00"},
		QuietHours: client.Value(client.QuietHours{Start: "22:00", End: "07:00"}),
		Types: client.Value(map[string]client.Nullable[client.TypePreferencePatch]{
			"comment": client.Value(client.TypePreferencePatch{Mode: "cooldown", Window: client.Value("15m")}),
		}),
	})
	must(err)
	if prefs.Digest.DailyAt != "09:00" || prefs.Digest.WeeklyOn != "monday" || prefs.QuietHours == nil || prefs.Types["comment"].Window != "15m" {
		t.Fatalf("preferences after the first merge: %+v", prefs)
	}
	_, err = c.PutPreferences(ctx, "u_bob", client.PreferencesPatch{QuietHours: client.Null[client.QuietHours](),
		Types: client.Value(map[string]client.Nullable[client.TypePreferencePatch]{"comment": client.Null[client.TypePreferencePatch]()})})
	must(err)
	prefs, err = c.GetPreferences(ctx, "u_bob")
	must(err)
	if prefs.QuietHours != nil || len(prefs.Types) != 0 || prefs.Digest.DailyAt != "09:00" {
		t.Fatalf("preferences after clearing: %+v", prefs)
	}
	link, err := c.CreatePreferencesLink(ctx, "u_bob")
	must(err)
	if link.URL == "" || link.ExpiresAt.IsZero() {
		t.Fatalf("link %+v", link)
	}

	ev := client.Event{Type: "comment", Key: "c-1", Actor: &client.Actor{ID: "u_alice", Name: "Alice"},
		Object:     &client.Object{Type: "document", ID: "doc_7", Title: "Q3 plan"},
		Recipients: []client.RecipientRef{{ID: "u_bob"}, {ID: "u_carol", Email: "carol@example.com", Locale: "pt-br"}},
		BatchKey:   "doc:7", Data: map[string]any{"excerpt": "Looks good"}}
	res, err := c.CreateEvent(ctx, ev)
	must(err)
	if res.Notifications != 2 || len(res.Batches) != 2 {
		t.Fatalf("event: %+v", res)
	}
	feed, err := c.GetFeed(ctx, "u_bob", client.FeedQuery{Limit: 10})
	must(err)
	if len(feed.Groups) != 1 || feed.Groups[0].Notifications[0].Actor.Name != "Alice" || feed.NextCursor != "" {
		t.Fatalf("feed %+v", feed)
	}
	seen, err := c.MarkFeedSeen(ctx, "u_bob")
	must(err)
	counts, err := c.GetFeedCount(ctx, "u_bob")
	must(err)
	if seen != 1 || counts.Unread != 1 || counts.Unseen != 0 {
		t.Fatalf("seen %d, counts %+v", seen, counts)
	}
	read, err := c.MarkFeedRead(ctx, "u_carol", client.FeedRead{All: true})
	must(err)
	if read.Read != 1 || len(read.CanceledBatches) != 1 {
		t.Fatalf("carol read all: %+v", read)
	}

	list, err := c.ListBatches(ctx, client.BatchQuery{State: "open", Limit: 10})
	must(err)
	if len(list.Batches) != 1 || list.Batches[0].Recipient != "u_bob" {
		t.Fatalf("open batches %+v", list)
	}
	id := list.Batches[0].ID
	detail, err := c.GetBatch(ctx, id)
	must(err)
	if len(detail.Items) != 1 || detail.Items[0].Data["excerpt"] != "Looks good" {
		t.Fatalf("batch %+v", detail)
	}
	_, err = c.FlushBatch(ctx, id)
	must(err)
	canceled, err := c.CancelBatch(ctx, id)
	must(err)
	var problem *client.Error
	if _, err := c.CancelBatch(ctx, id); canceled.State != "canceled" || !errors.As(err, &problem) || problem.Status != http.StatusConflict {
		t.Fatalf("canceled %s; canceling again: %v, want a 409 *client.Error", canceled.State, err)
	}

	ret, err := c.RetractEventByKey(ctx, "c-1")
	must(err)
	second, err := c.CreateEvent(ctx, client.Event{Type: "comment", Recipients: []client.RecipientRef{{ID: "u_bob"}}})
	must(err)
	byID, err := c.RetractEvent(ctx, second.ID)
	must(err)
	if ret.ID != res.ID || byID.Removed != 1 || len(byID.CanceledBatches) != 1 {
		t.Fatalf("retracted by key %+v, by id %+v", ret, byID)
	}
	_, err = c.CreateEvent(ctx, client.Event{Type: "nope", Recipients: []client.RecipientRef{{ID: "u_bob"}}})
	if !errors.As(err, &problem) || problem.Status != http.StatusUnprocessableEntity || len(problem.Errors) != 1 || problem.Errors[0].Field != "type" {
		t.Fatalf("unknown type: %v, want a 422 naming type", err)
	}

	report, err := c.CreateSimulation(ctx, client.Simulation{
		Events:   []client.Event{{Type: "comment", Recipients: []client.RecipientRef{{ID: "u_bob"}}, OccurredAt: &link.ExpiresAt}},
		Policies: []client.Policy{{Name: "daily", Everyone: &client.Everyone{Mode: "daily", DailyAt: "08:00"}}},
	})
	must(err)
	if report.Source != "upload" || len(report.Results) != 2 || report.Results[1].Name != "daily" {
		t.Fatalf("simulation %+v", report)
	}
}
