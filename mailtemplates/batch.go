package mailtemplates

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/preferences"
)

// BatchContent is what a stored batch holds, as loaded for a flush or a
// preview.
type BatchContent struct {
	Batch     *db.Batch
	Recipient *db.Recipient
	Items     []db.Item // in arrival order
	Types     map[string]*db.Type
}

// MessageID is derived from the batch alone, so a resend after a crash
// carries the same Message-ID and mail systems can tell it is one email.
func MessageID(batchID int64, from string) string {
	domain := "lull.localhost"
	if _, d, ok := strings.Cut(from, "@"); ok && d != "" {
		domain = strings.Trim(d, "> ")
	}
	return fmt.Sprintf("batch-%d@%s", batchID, domain)
}

// LoadContent reads a stored batch for a preview: its recipient, its
// items (retracted ones left out) and their types. It changes nothing.
func LoadContent(ctx context.Context, d *db.DB, batchID int64) (BatchContent, error) {
	c := BatchContent{Types: map[string]*db.Type{}}
	var err error
	if c.Batch, err = db.GetBatch(ctx, d.Pool, batchID); err != nil {
		return c, err
	}
	if c.Recipient, err = db.GetRecipient(ctx, d.Bun, c.Batch.RecipientID); err != nil {
		return c, err
	}
	if c.Items, err = db.BatchItems(ctx, d.Pool, batchID, false); err != nil {
		return c, err
	}
	for _, it := range c.Items {
		if _, ok := c.Types[it.TypeKey]; !ok {
			if c.Types[it.TypeKey], err = db.GetType(ctx, d.Pool, it.TypeKey); err != nil {
				return c, err
			}
		}
	}
	return c, nil
}

// InputFromBatch builds the view model of a stored batch: one group per
// type, ordered by type name, each with its true total, its distinct
// actors (newest first) and at most display_limit items in the type's
// item order. Links, sender and Message-ID are the caller's to fill.
func InputFromBatch(c BatchContent) Input {
	loc := preferences.Location(c.Recipient.Timezone)
	in := Input{
		BatchID:   c.Batch.ID,
		Mode:      c.Batch.Mode,
		Recipient: Recipient{ID: c.Recipient.ID, Name: c.Recipient.Name, Email: c.Recipient.Email, Location: loc},
		Since:     c.Batch.OpenedAt,
	}
	byType := map[string][]db.Item{}
	for _, it := range c.Items {
		byType[it.TypeKey] = append(byType[it.TypeKey], it)
	}
	for key, items := range byType {
		t := c.Types[key]
		if t == nil {
			t = &db.Type{Key: key, Name: key, ItemText: DefaultItemText(), GroupText: DefaultGroupText(key), DisplayLimit: 10, ItemOrder: "latest"}
		}
		in.Groups = append(in.Groups, group(t, items))
	}
	sort.Slice(in.Groups, func(i, j int) bool {
		a, b := in.Groups[i].Type, in.Groups[j].Type
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return a.Key < b.Key
	})
	return in
}

// group turns one type's items (in arrival order) into a Group.
func group(t *db.Type, items []db.Item) Group {
	g := Group{
		Type: Type{Key: t.Key, Name: t.Name, Category: t.Category, ItemText: t.ItemText, GroupText: t.GroupText,
			DisplayLimit: t.DisplayLimit, ItemOrder: t.ItemOrder},
		Total: len(items),
	}
	seen := map[string]bool{}
	for i := len(items) - 1; i >= 0; i-- {
		a := decodeActor(items[i].Actor)
		key := a.ID
		if key == "" {
			key = a.Name
		}
		if key == "" || seen[key] {
			continue
		}
		seen[key] = true
		g.ActorCount++
		if len(g.ActorNames) < 3 && a.Name != "" {
			g.ActorNames = append(g.ActorNames, a.Name)
		}
	}
	limit := max(t.DisplayLimit, 1)
	picked := items
	if t.ItemOrder != "first" {
		// Latest first: newest at the top.
		picked = make([]db.Item, len(items))
		for i, it := range items {
			picked[len(items)-1-i] = it
		}
	}
	if len(picked) > limit {
		picked = picked[:limit]
	}
	for _, it := range picked {
		g.Items = append(g.Items, item(it))
	}
	return g
}

func decodeActor(raw json.RawMessage) Actor {
	var a Actor
	var v struct{ ID, Name string }
	if json.Unmarshal(raw, &v) == nil {
		a = Actor{ID: v.ID, Name: v.Name}
	}
	return a
}

func item(it db.Item) Item {
	var o struct{ Type, ID, Title, URL string }
	json.Unmarshal(it.Object, &o)
	var data map[string]any
	json.Unmarshal(it.Data, &data)
	return Item{Actor: decodeActor(it.Actor), Object: Object{Type: o.Type, ID: o.ID, Title: o.Title, URL: o.URL}, Data: data, OccurredAt: it.OccurredAt}
}
