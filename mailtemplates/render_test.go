package mailtemplates

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/PuerkitoBio/goquery"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

var (
	berlin, _ = time.LoadLocation("Europe/Berlin")
	sent      = time.Date(2026, 11, 23, 7, 0, 0, 0, time.UTC)
)

func commentType() Type {
	return Type{Key: "comment.created", Name: "Comments", DisplayLimit: 5, ItemOrder: "latest",
		ItemText:  "{{actor.name}}: {{data.excerpt}}",
		GroupText: "{{actors}} commented on {{object.title}}|{{actors}} left {{count}} comments on {{object.title}}"}
}

func shareType() Type {
	return Type{Key: "app.shared", Name: "Shares", DisplayLimit: 10, ItemOrder: "latest",
		ItemText: "{{actor.name}} shared {{object.title}}", GroupText: "{{actors}} shared {{object.title}}|{{actors}} shared {{count}} apps with you"}
}

func sampleItem(actor, title, excerpt string, minute int) Item {
	return Item{Actor: Actor{ID: strings.ToLower(actor), Name: actor},
		Object: Object{Type: "document", ID: "doc_7", Title: title, URL: "https://app.example/doc/7"},
		Data:   map[string]any{"excerpt": excerpt}, OccurredAt: sent.Add(-time.Duration(minute) * time.Minute)}
}

func input(mode string, groups ...Group) Input {
	return Input{BatchID: 42, Mode: mode, Recipient: Recipient{ID: "u_bob", Name: "Bob Stone", Email: "bob@example.com", Location: berlin},
		Since: sent.Add(-24 * time.Hour), Groups: groups, From: "lull@example.com", MessageID: "batch-42@example.com", Date: sent,
		SettingsURL: "https://lull.example/settings/enter?token=s", UnsubscribeURL: "https://lull.example/unsubscribe?token=u"}
}

func layouts() map[string]Input {
	comments := Group{Type: commentType(), Total: 15, ActorCount: 4, ActorNames: []string{"Fatima", "Chen Wei", "Alice"}}
	for i := range 5 {
		comments.Items = append(comments.Items, sampleItem([]string{"Fatima", "Chen Wei", "Alice", "Jonas", "Alice"}[i], "Q3 plan", "Looks good, one question on section "+string(rune('1'+i)), i*7))
	}
	shares := Group{Type: shareType(), Total: 2, ActorCount: 1, ActorNames: []string{"Alice"},
		Items: []Item{sampleItem("Alice", "Budget tracker", "", 30), sampleItem("Alice", "Trip planner", "", 45)}}
	single := Group{Type: commentType(), Total: 1, ActorCount: 1, ActorNames: []string{"Alice"}, Items: []Item{sampleItem("Alice", "Q3 plan", "Looks good", 2)}}
	return map[string]Input{
		"single":   input("immediate", single),
		"cooldown": input("cooldown", comments),
		"digest":   input("daily", comments, shares),
	}
}

func TestLayoutsMatchGoldenFiles(t *testing.T) {
	for name, in := range layouts() {
		t.Run(name, func(t *testing.T) {
			m, err := Render(in)
			if err != nil {
				t.Fatal(err)
			}
			golden(t, name+".html", m.HTML)
			golden(t, name+".txt", "Subject: "+m.Subject+"\n\n"+m.Text)
		})
	}
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		os.MkdirAll("testdata", 0o755)
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./mailtemplates -update to create it)", err)
	}
	if string(want) != got {
		t.Errorf("%s differs from the golden file; run go test ./mailtemplates -update if the change is intended\n--- got ---\n%s", name, got)
	}
}

func TestSubjectsAndCounts(t *testing.T) {
	t.Parallel()
	l := layouts()
	cases := map[string]string{
		"single":   "Alice: Looks good",
		"cooldown": "Fatima, Chen Wei and 2 others left 15 comments on Q3 plan",
		"digest":   "Your daily digest: 17 updates — Fatima, Chen Wei and 2 others left 15 comments on Q3 plan",
	}
	for name, want := range cases {
		m, err := Render(l[name])
		if err != nil {
			t.Fatal(err)
		}
		if m.Subject != want {
			t.Errorf("%s subject %q, want %q", name, m.Subject, want)
		}
	}
	m, _ := Render(l["digest"])
	doc, _ := goquery.NewDocumentFromReader(strings.NewReader(m.HTML))
	if got := doc.Find(`[data-testid="summary"]`).Text(); got != "17 updates in 2 categories since Sunday" {
		t.Errorf("summary %q", got)
	}
	if got := doc.Find(`[data-testid="group"]`).Length(); got != 2 {
		t.Errorf("%d groups, want 2", got)
	}
	if got := doc.Find(`[data-testid="more"]`).First().Text(); got != "and 10 more" {
		t.Errorf("more %q, want \"and 10 more\"", got)
	}
	if got := doc.Find(`[data-testid="note"]`).First().Text(); got != "15 in all — showing 5" {
		t.Errorf("note %q", got)
	}
	for _, id := range []string{"settings-link", "unsubscribe-link"} {
		if href, _ := doc.Find(`[data-testid="` + id + `"]`).Attr("href"); !strings.HasPrefix(href, "https://lull.example/") {
			t.Errorf("%s href %q", id, href)
		}
	}
	if !strings.Contains(m.Text, "and 10 more") || !strings.Contains(m.Text, "<https://lull.example/unsubscribe?token=u>") {
		t.Errorf("text part lacks the count or the links:\n%s", m.Text)
	}
}

func TestThousandItemsShowDisplayLimit(t *testing.T) {
	t.Parallel()
	g := Group{Type: commentType(), Total: 1000, ActorCount: 300, ActorNames: []string{"A", "B", "C"}}
	g.Type.DisplayLimit = 10
	for i := range 10 {
		g.Items = append(g.Items, sampleItem("A", "Doc", "x", i))
	}
	m, err := Render(input("cooldown", g))
	if err != nil {
		t.Fatal(err)
	}
	doc, _ := goquery.NewDocumentFromReader(strings.NewReader(m.HTML))
	if n := doc.Find(`[data-testid="item"]`).Length(); n != 10 {
		t.Errorf("%d items rendered, want 10", n)
	}
	if !strings.Contains(m.Subject, "1000 comments") && !strings.Contains(m.Subject, "1,000") {
		t.Errorf("subject %q does not carry the true total", m.Subject)
	}
	if got := doc.Find(`[data-testid="more"]`).Text(); got != "and 990 more" {
		t.Errorf("more %q, want \"and 990 more\"", got)
	}
}

func TestHostileEventRendersSafely(t *testing.T) {
	t.Parallel()
	hostile := Item{
		Actor:  Actor{ID: "x", Name: "Eve\r\nBcc: victim@example.com <script>alert(1)</script>"},
		Object: Object{Title: `"><img src=x onerror=alert(1)> ` + strings.Repeat("long ", 2000) + "🎉 مرحبا", URL: "javascript:alert(1)"},
		Data:   map[string]any{"excerpt": "<b>bold</b> & co"},
	}
	typ := commentType()
	typ.ItemText = "{{actor.name}} on {{object.title}}: {{data.excerpt}}"
	for _, total := range []int{1, 2} {
		g := Group{Type: typ, Total: total, ActorCount: 1, ActorNames: []string{hostile.Actor.Name}, Items: []Item{hostile}}
		in := input("cooldown", g)
		in.Recipient.Name = "Bob\r\nX-Injected: yes"
		m, err := Render(in)
		if err != nil {
			t.Fatal(err)
		}
		doc, err := goquery.NewDocumentFromReader(strings.NewReader(m.HTML))
		if err != nil {
			t.Fatal(err)
		}
		if doc.Find("script").Length() != 0 || doc.Find("[onerror]").Length() != 0 || doc.Find("img").Length() != 0 {
			t.Errorf("total %d: event markup became HTML elements", total)
		}
		if doc.Find(`a[href^="javascript"]`).Length() != 0 {
			t.Errorf("total %d: a javascript: URL became a link", total)
		}
		if strings.ContainsAny(m.Subject, "\r\n") || strings.ContainsAny(m.ToName, "\r\n") {
			t.Errorf("total %d: CR/LF in subject %q or name %q", total, m.Subject, m.ToName)
		}
		if n := utf8.RuneCountInString(m.Subject); n > maxSubject {
			t.Errorf("subject has %d characters, want at most %d", n, maxSubject)
		}
		if !strings.Contains(m.Text, "🎉 مرحبا") || !strings.Contains(m.Text, "<b>bold</b> & co") {
			t.Errorf("total %d: text part lost the emoji, Arabic or the literal markup", total)
		}
	}
}

func TestTypeTextValidation(t *testing.T) {
	t.Parallel()
	good := []string{"{{actor.name}}: {{object.title}}", "{{ data.excerpt }}", "{{data.a.b}} at {{occurred_at}}", "plain text"}
	for _, s := range good {
		if err := ValidateItemText(s); err != nil {
			t.Errorf("ValidateItemText(%q): %v", s, err)
		}
	}
	bad := []string{"", "{{count}} items", "{{actor.nam}}", "{{data.}}", "{{actor.name}", "a|b|c", "{{}}"}
	for _, s := range bad {
		if err := ValidateItemText(s); err == nil {
			t.Errorf("ValidateItemText(%q) accepted", s)
		}
	}
	if err := ValidateGroupText("{{actors}} left {{count}} comments|{{count}} comments"); err != nil {
		t.Errorf("group text: %v", err)
	}
	if err := ValidateGroupText(DefaultGroupText("Weird {{name}} | type")); err != nil {
		t.Errorf("default group text for an odd name: %v", err)
	}
}

func TestActors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		names []string
		count int
		want  string
	}{
		{[]string{"Alice"}, 1, "Alice"},
		{[]string{"Alice", "Bob"}, 2, "Alice and Bob"},
		{[]string{"Alice", "Bob", "Carol"}, 3, "Alice, Bob and Carol"},
		{[]string{"Alice", "Bob", "Carol"}, 4, "Alice, Bob and 2 others"},
		{[]string{"Alice", "Bob", "Carol"}, 15, "Alice, Bob and 13 others"},
		{[]string{"Alice", "Bob"}, 3, "Alice, Bob and 1 other"},
	}
	for _, c := range cases {
		if got := Actors(c.names, c.count); got != c.want {
			t.Errorf("Actors(%v, %d) = %q, want %q", c.names, c.count, got, c.want)
		}
	}
}

func BenchmarkRenderDigest(b *testing.B) {
	in := layouts()["digest"]
	third := Group{Type: Type{Key: "task.failed", Name: "Failures", DisplayLimit: 10, ItemText: "{{object.title}} failed", GroupText: "{{count}} failures"}, Total: 30, ActorCount: 1, ActorNames: []string{"CI"}}
	for i := range 10 {
		third.Items = append(third.Items, sampleItem("CI", "build", "", i))
	}
	in.Groups = append(in.Groups, third)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Render(in); err != nil {
			b.Fatal(err)
		}
	}
}
