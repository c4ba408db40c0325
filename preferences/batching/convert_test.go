package batching

import (
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/mailtemplates"
)

// groupItems are n comments as a flush reads them: an actor, an object
// with a link, and data with more keys than the texts show.
func groupItems(n int) []db.Item {
	items := make([]db.Item, n)
	for i := range items {
		obj, _ := json.Marshal(map[string]any{"type": "document", "id": "doc_7", "title": "Q3 plan", "url": "https://app.example/doc/7",
			"workspace": map[string]any{"id": "w_1", "name": "Finance"}})
		data, _ := json.Marshal(map[string]any{"excerpt": fmt.Sprintf("Looks good, one question on section %d", i), "comment_id": 1000 + i,
			"mentions": []string{"u_bob", "u_ann"}, "thread": map[string]any{"id": "t_9", "resolved": false, "replies": i},
			"audit": map[string]any{"ip": "192.0.2.1", "agent": "Mozilla/5.0", "tags": []string{"a", "b", "c"}}})
		items[i] = db.Item{NotificationID: int64(i), TypeKey: "comment.created",
			Actor:  json.RawMessage(fmt.Sprintf(`{"id":"u_%d","name":"Person %d","avatar":"https://cdn.example/%d.png"}`, i%4, i%4, i%4)),
			Object: obj, Data: data, OccurredAt: composeNow}
	}
	return items
}

func BenchmarkGroup(b *testing.B) {
	items := groupItems(15)
	for name, text := range map[string]string{"Data": "{{actor.name}}: {{data.excerpt}}", "NoData": ""} {
		t := mailtemplates.Type{Key: "comment.created", Name: "Comments", ItemText: text, DisplayLimit: 10}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				Group(t, items)
			}
		})
	}
}

// A group carries the data keys its type's texts read, and nothing else,
// yet renders the email that decoding all of it gives.
func TestGroupDecodesOnlyTheDataItsTextsRead(t *testing.T) {
	t.Parallel()
	items := groupItems(12)
	typ := mailtemplates.Type{Key: "comment.created", Name: "Comments", DisplayLimit: 10,
		ItemText: "{{actor.name}}: {{data.excerpt}} ({{data.mentions}})", GroupText: "{{count}} comments, {{data.thread.replies}} replies",
		ViewURL: "https://app.example/c/{{data.comment_id}}"}
	g := Group(typ, items)
	for _, it := range g.Items {
		if len(it.Data) != 4 || it.Data["audit"] != nil || it.Data["excerpt"] == nil || it.Data["thread"] == nil {
			t.Fatalf("data %v, want excerpt, mentions, thread and comment_id only", it.Data)
		}
	}
	full := g
	full.Items = nil
	for i := len(items) - 1; i >= 2; i-- {
		var data map[string]any
		json.Unmarshal(items[i].Data, &data)
		it := templateItem(items[i], decodeActor(items[i].Actor), nil, true)
		it.Data = data
		full.Items = append(full.Items, it)
	}
	for _, tx := range []mailtemplates.Type{typ, {Key: "comment.created", Name: "Comments", DisplayLimit: 10}, {Key: "x", ItemText: "{{bogus}}"}} {
		g.Type, full.Type = tx, tx
		in := mailtemplates.Input{Mode: "cooldown", Recipient: mailtemplates.Recipient{Email: "bob@example.com"}, Date: composeNow}
		a, errA := mailtemplates.Render(withGroup(in, Group(tx, items)))
		b, errB := mailtemplates.Render(withGroup(in, full))
		if (errA == nil) != (errB == nil) || (a != nil && (a.HTML != b.HTML || a.Text != b.Text || a.Subject != b.Subject)) {
			t.Errorf("type %q: the email differs from decoding all the data (%v, %v)", tx.ItemText, errA, errB)
		}
	}
	if keys, all := mailtemplates.DataKeys(mailtemplates.Type{ItemText: "{{bogus}}"}); !all || keys != nil {
		t.Errorf("a broken text gives keys %v, all %v; want everything decoded", keys, all)
	}
}

func withGroup(in mailtemplates.Input, g mailtemplates.Group) mailtemplates.Input {
	in.Groups = []mailtemplates.Group{g}
	return in
}

// pickFields gives, for any JSON object, what decoding it whole gives
// for the keys asked, and hands back what it cannot follow.
func FuzzPickFieldsMatchesDecodingAll(f *testing.F) {
	for _, s := range []string{`{}`, ` { "excerpt" : "a" , "b" : [1, {"c": "]}\"{"}], "n": -1.5e3 } `, `{"exc\u0065rpt": 1, "excerpt": 2}`,
		`null`, `[]`, `"x"`, ``, `{"excerpt": {"x": [true, false, null]}}`, `{"a":1,}`, `{"excerpt":"\\"}`, `{"excerpt":"é\u00e9 \ud83d\ude00"}`} {
		f.Add(s, "excerpt")
	}
	f.Fuzz(func(t *testing.T, raw, key string) {
		var all map[string]any
		if json.Unmarshal([]byte(raw), &all) != nil {
			return // jsonb never holds it; pickFields may do anything but panic
		}
		keys := []string{key, "n"}
		got, ok := pickFields([]byte(raw), keys)
		if !ok {
			return // decoded whole by the caller
		}
		want := map[string]any{}
		for _, k := range keys {
			if v, in := all[k]; in {
				want[k] = v
			}
		}
		if len(want) == 0 {
			want = nil
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s, keys %q: got %v, want %v", raw, keys, got, want)
		}
	})
}
