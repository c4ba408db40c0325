package mailtemplates

import (
	"errors"
	"flag"
	"github.com/lull-dev/lull/i18n"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/PuerkitoBio/goquery"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata from the current output")

var (
	berlin = mustLoad("Europe/Berlin")
	// sent is a Monday; the digests in these tests opened the day before.
	sent = time.Date(2026, 11, 23, 7, 0, 0, 0, time.UTC)
)

func mustLoad(name string) *time.Location {
	loc, err := time.LoadLocation(name)
	if err != nil {
		panic(err)
	}
	return loc
}

func commentType() Type {
	return Type{Key: "comment.created", Name: "Comments", Category: "Documents", DisplayLimit: 5, ItemOrder: "latest",
		ItemText:  "{{actor.name}}: {{data.excerpt}}",
		GroupText: "{{actors}} commented on {{object.title}}|{{actors}} left {{count}} comments on {{object.title}}"}
}

func shareType() Type {
	return Type{Key: "app.shared", Name: "Shared apps", Category: "Sharing", DisplayLimit: 10, ItemOrder: "latest",
		ItemText:  "{{actor.name}} shared {{object.title}}",
		GroupText: "{{actors}} shared {{object.title}} with you|{{actors}} shared {{count}} apps with you"}
}

func failureType() Type {
	return Type{Key: "task.failed", Name: "Failed tasks", Category: "Builds", DisplayLimit: 10, ItemOrder: "first",
		ItemText:  "{{object.title}} failed: {{data.error}} ({{occurred_at}})",
		GroupText: "{{object.title}} failed|{{count}} tasks failed"}
}

func event(actor, title, excerpt string, minutesAgo int) Item {
	return Item{
		Actor:      Actor{ID: "u_" + strings.ToLower(strings.ReplaceAll(actor, " ", "_")), Name: actor},
		Object:     Object{Type: "document", ID: "doc_7", Title: title, URL: "https://app.example/doc/7"},
		Data:       map[string]any{"excerpt": excerpt, "error": "exit status 1"},
		OccurredAt: sent.Add(-time.Duration(minutesAgo) * time.Minute),
	}
}

func input(mode string, groups ...Group) Input {
	return Input{
		BatchID: 42, Mode: mode,
		Recipient: Recipient{ID: "u_bob", Name: "Bob Stone", Email: "bob@example.com", Location: berlin},
		Since:     sent.Add(-23 * time.Hour), Groups: groups,
		From: "lull@example.com", MessageID: "batch-42@example.com", Date: sent,
		SettingsURL:    "https://lull.example/settings/enter?token=s",
		UnsubscribeURL: "https://lull.example/unsubscribe?token=u",
	}
}

// comments is a busy group: 15 comments by 4 people, 5 shown.
func comments() Group {
	g := Group{Type: commentType(), Total: 15, ActorCount: 4, ActorNames: []string{"Fatima", "Chen Wei", "Alice"}}
	for i, who := range []string{"Fatima", "Chen Wei", "Alice", "Jonas", "Alice"} {
		g.Items = append(g.Items, event(who, "Q3 plan", "Looks good, one question on section "+string(rune('1'+i)), i*7))
	}
	return g
}

func shares() Group {
	return Group{Type: shareType(), Total: 2, ActorCount: 1, ActorNames: []string{"Alice"},
		Items: []Item{event("Alice", "Budget tracker", "", 30), event("Alice", "Trip planner", "", 45)}}
}

func failures() Group {
	g := Group{Type: failureType(), Total: 30, ActorCount: 1, ActorNames: []string{"CI"}}
	for i := range 10 {
		g.Items = append(g.Items, event("CI", "nightly build #"+string(rune('0'+i)), "", 600-i*10))
	}
	return g
}

// layouts are the emails the golden files pin down, one per layout.
func layouts() map[string]Input {
	single := Group{Type: commentType(), Total: 1, ActorCount: 1, ActorNames: []string{"Alice"},
		Items: []Item{event("Alice", "Q3 plan", "Looks good", 2)}}
	weekly := input("weekly", comments(), shares(), failures())
	weekly.Since = sent.Add(-12 * 24 * time.Hour)
	// An email about one conversation offers to mute it in its footer; a
	// digest offers it by each conversation's first item.
	one, cooldown := input("immediate", single), input("cooldown", comments())
	one.MuteURL = "https://lull.example/mute?token=m"
	cooldown.MuteURL = one.MuteURL
	return map[string]Input{
		"single":   one,
		"cooldown": cooldown,
		"digest":   mutable(input("daily", comments(), shares())),
		"weekly":   weekly,
	}
}

// mutable puts in's comments in two conversations, document 7 (the
// first two and the last two) and document 9 (the middle one), each with
// a mute link, as a digest's flush gives them.
func mutable(in Input) Input {
	in.ThreadMuteURLs = map[string]string{}
	for gi, g := range in.Groups {
		if g.Type.Key != commentType().Key {
			continue
		}
		items := slices.Clone(g.Items)
		for i := range items {
			doc := "document:7"
			if i == 2 {
				doc = "document:9"
			}
			items[i].Thread = g.Type.Key + "+" + doc
			in.ThreadMuteURLs[items[i].Thread] = "https://lull.example/mute?token=" + doc
		}
		in.Groups[gi].Items = items
	}
	return in
}

func render(t testing.TB, in Input) (*Message, *goquery.Document) {
	t.Helper()
	m, err := Render(in)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := goquery.NewDocumentFromReader(strings.NewReader(m.HTML))
	if err != nil {
		t.Fatal(err)
	}
	return m, doc
}

func TestLayoutsMatchGoldenFiles(t *testing.T) {
	t.Parallel()
	for name, in := range layouts() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			m, err := Render(in)
			if err != nil {
				t.Fatal(err)
			}
			golden(t, name+".html", m.HTML)
			golden(t, name+".txt", "Subject: "+m.Subject+"\n\n"+m.Text)
		})
	}
}

// golden compares got with testdata/name, or rewrites the file with
// -update. Reviewing the diff of a golden file is how a layout change is
// reviewed.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
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
		t.Errorf("%s differs from the golden file; if the change is intended, run go test ./mailtemplates -update and review the diff\n--- got ---\n%s", name, got)
	}
}

func TestLayoutChoiceAndSubjects(t *testing.T) {
	t.Parallel()
	l := layouts()
	cases := []struct {
		name, subject, h1 string
		groups, items     int
	}{
		{"single", "Alice: Looks good", "Alice: Looks good", 0, 1},
		{"cooldown", "Fatima, Chen Wei and 2 others left 15 comments on Q3 plan", "Fatima, Chen Wei and 2 others left 15 comments on Q3 plan", 1, 5},
		{"digest", "Your daily digest: 17 updates — Fatima, Chen Wei and 2 others left 15 comments on Q3 plan", "Your daily digest", 2, 7},
		// The busiest group gives the subject its fact, whatever the order.
		{"weekly", "Your weekly digest: 47 updates — 30 tasks failed", "Your weekly digest", 3, 17},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			m, doc := render(t, l[c.name])
			if m.Subject != c.subject {
				t.Errorf("subject %q, want %q", m.Subject, c.subject)
			}
			if got := strings.TrimSpace(doc.Find("h1").Text()); got != c.h1 {
				t.Errorf("h1 %q, want %q", got, c.h1)
			}
			if got := doc.Find(`[data-testid="group"]`).Length(); got != c.groups {
				t.Errorf("%d groups, want %d", got, c.groups)
			}
			if got := doc.Find(`[data-testid="item"]`).Length(); got != c.items {
				t.Errorf("%d items, want %d", got, c.items)
			}
		})
	}
}

func TestMessageFields(t *testing.T) {
	t.Parallel()
	in := layouts()["cooldown"]
	in.Recipient.Name = "Bob\r\nBcc: eve@example.com"
	m, _ := render(t, in)
	want := Message{From: "lull@example.com", To: "bob@example.com", ToName: "Bob Bcc: eve@example.com",
		MessageID: "batch-42@example.com", Date: sent, UnsubscribeURL: "https://lull.example/unsubscribe?token=u", BatchID: 42}
	got := *m
	got.Subject, got.Text, got.HTML = "", "", ""
	if !reflect.DeepEqual(got, want) {
		t.Errorf("message fields\n got %+v\nwant %+v", got, want)
	}
}

func TestDigestSummaryCountsAndLinks(t *testing.T) {
	t.Parallel()
	m, doc := render(t, layouts()["digest"])
	if got := doc.Find(`[data-testid="summary"]`).Text(); got != "17 updates since Sunday: Comments (15), Shared apps (2)" {
		t.Errorf("summary %q", got)
	}
	groups := doc.Find(`[data-testid="group"]`)
	first := groups.First()
	if got := first.Find(`[data-testid="heading"]`).Text(); got != "Fatima, Chen Wei and 2 others left 15 comments on Q3 plan" {
		t.Errorf("first heading %q", got)
	}
	if got := first.Find(`[data-testid="label"]`).Text(); got != "Documents · Comments" {
		t.Errorf("first label %q", got)
	}
	if got := first.Find(`[data-testid="note"]`).Text(); got != "15 in all — showing the latest 5" {
		t.Errorf("note %q", got)
	}
	if got := first.Find(`[data-testid="item"]`).Length(); got != 5 {
		t.Errorf("first group shows %d items, want 5", got)
	}
	if got := first.Find(`[data-testid="more"]`).Text(); got != "and 10 more" {
		t.Errorf("more %q, want \"and 10 more\"", got)
	}
	// A group shown in full says nothing more.
	second := groups.Eq(1)
	if second.Find(`[data-testid="more"]`).Length() != 0 || second.Find(`[data-testid="note"]`).Length() != 0 {
		t.Error("a group shown in full has a note or an \"and N more\"")
	}
	if got := second.Find(`[data-testid="item"] a`).First().AttrOr("href", ""); got != "https://app.example/doc/7" {
		t.Errorf("item link %q", got)
	}
	links := map[string]string{
		"settings-link":    "https://lull.example/settings/enter?token=s",
		"unsubscribe-link": "https://lull.example/unsubscribe?token=u",
	}
	for id, want := range links {
		a := doc.Find(`[data-testid="` + id + `"]`)
		if a.Length() != 1 || a.AttrOr("href", "") != want {
			t.Errorf("%s: %d links, href %q, want one to %q", id, a.Length(), a.AttrOr("href", ""), want)
		}
		if !strings.Contains(m.Text, "<"+want+">") {
			t.Errorf("text part lacks <%s>", want)
		}
	}
	if got := doc.Find(`[data-testid="settings-link"]`).Text(); got != "Choose how often you get these" {
		t.Errorf("settings link text %q", got)
	}
	for _, s := range []string{"17 updates since Sunday: Comments (15), Shared apps (2)", "(15 in all — showing the latest 5)", "and 10 more"} {
		if !strings.Contains(m.Text, s) {
			t.Errorf("text part lacks %q:\n%s", s, m.Text)
		}
	}
}

func TestHTMLSurvivesMailClients(t *testing.T) {
	t.Parallel()
	for name, in := range layouts() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, doc := render(t, in)
			for _, sel := range []string{"script", "img", "link", "iframe", "form", "[class]:not([style])"} {
				if n := doc.Find(sel).Length(); n != 0 {
					t.Errorf("%d %q elements; mail clients block or strip them", n, sel)
				}
			}
			if doc.Find(`meta[name="color-scheme"][content="light dark"]`).Length() != 1 ||
				doc.Find(`meta[name="supported-color-schemes"]`).Length() != 1 {
				t.Error("no color-scheme meta tags for dark mode")
			}
			if doc.Find(`table[style*="max-width:600px"]`).Length() != 1 {
				t.Error("the card is not capped at 600px")
			}
			if strings.Contains(doc.Find("style").Text(), "url(") || strings.Contains(doc.Find("style").Text(), "@import") {
				t.Error("the style block loads a remote resource")
			}
		})
	}
}

func TestSingleItemLinksToObject(t *testing.T) {
	t.Parallel()
	m, doc := render(t, layouts()["single"])
	if got := doc.Find(`[data-testid="item-link"]`).AttrOr("href", ""); got != "https://app.example/doc/7" {
		t.Errorf("single item link %q", got)
	}
	if got := doc.Find(`[data-testid="context"]`).Text(); got != "Alice commented on Q3 plan" {
		t.Errorf("context %q: the singular form of the group text should be used", got)
	}
	if !strings.Contains(m.Text, "View document: <https://app.example/doc/7>") {
		t.Errorf("text part lacks the link:\n%s", m.Text)
	}

	// Without a URL there is no button, and nothing breaks.
	in := layouts()["single"]
	in.Groups[0].Items[0].Object.URL = ""
	m, doc = render(t, in)
	if doc.Find(`[data-testid="item-link"]`).Length() != 0 || strings.Contains(m.Text, "Open:") {
		t.Error("an item without a URL got a link")
	}
}

func TestOnlyHTTPLinks(t *testing.T) {
	t.Parallel()
	urls := map[string]string{
		"javascript:alert(1)":                 "",
		" JavaScript:alert(1)":                "",
		"data:text/html,<script>x</script>":   "",
		"vbscript:msgbox":                     "",
		"//evil.example/x":                    "",
		"/relative/path":                      "",
		"mailto:a@example.com":                "",
		"https://app.example/doc/7?a=1&b=<x>": "https://app.example/doc/7?a=1&b=%3Cx%3E",
		"http://app.example/a b":              "http://app.example/a%20b",
	}
	g := Group{Type: shareType(), Total: len(urls)}
	g.Type.ItemText = "{{object.id}}"
	for u := range urls {
		it := event("Alice", "Doc", "", 1)
		it.Object.ID, it.Object.URL = u, u
		g.Items = append(g.Items, it)
	}
	m, doc := render(t, input("cooldown", g))
	doc.Find(`[data-testid="item"]`).Each(func(_ int, s *goquery.Selection) {
		u := s.Find("a, span").First().Text()
		want, known := urls[strings.TrimSpace(u)]
		if !known {
			want = urls[" "+u]
		}
		got, ok := s.Find("a").Attr("href")
		switch {
		case want == "" && ok:
			t.Errorf("%q became a link to %q", u, got)
		case want != "" && got != want:
			t.Errorf("%q links to %q, want %q", u, got, want)
		}
	})
	if doc.Find(`a[href^="javascript"], a[href^="data"], a[href^="vbscript"]`).Length() != 0 || strings.Contains(m.Text, "<javascript") {
		t.Error("an unsafe URL reached the email")
	}
}

func TestHostileEventRendersSafely(t *testing.T) {
	t.Parallel()
	hostile := Item{
		Actor: Actor{ID: "x", Name: "Eve 🎉\r\nBcc: victim@example.com <script>alert(1)</script>"},
		Object: Object{Title: `"><img src=x onerror=alert(1)> ` + strings.Repeat("x", 10_000),
			URL: "javascript:alert(1)"},
		Data:       map[string]any{"excerpt": "<b>bold</b> & co — مرحبا بالعالم \u202Egnp.exe"},
		OccurredAt: sent,
	}
	typ := commentType()
	typ.ItemText = "{{actor.name}}: {{data.excerpt}} on {{object.title}}"
	typ.GroupText = "{{actors}} commented on {{object.title}}|{{actors}} left {{count}} comments on {{object.title}}"
	for _, total := range []int{1, 2} {
		t.Run(map[int]string{1: "Single", 2: "Batch"}[total], func(t *testing.T) {
			t.Parallel()
			g := Group{Type: typ, Total: total, ActorCount: 1, ActorNames: []string{hostile.Actor.Name}, Items: []Item{hostile}}
			in := input("cooldown", g)
			in.Recipient.Name = "Bob\r\nX-Injected: yes"
			m, doc := render(t, in)
			if doc.Find("script").Length() != 0 || doc.Find("[onerror]").Length() != 0 || doc.Find("img").Length() != 0 || doc.Find("b").Length() != 0 {
				t.Error("event markup became HTML elements")
			}
			if doc.Find(`a[href^="javascript"]`).Length() != 0 {
				t.Error("a javascript: URL became a link")
			}
			if strings.ContainsAny(m.Subject, "\r\n") || strings.ContainsAny(m.ToName, "\r\n") {
				t.Errorf("CR/LF in subject %q or name %q", m.Subject, m.ToName)
			}
			if n := utf8.RuneCountInString(m.Subject); n > maxSubject || !strings.HasSuffix(m.Subject, "…") {
				t.Errorf("subject has %d characters and ends %q, want at most %d ending in an ellipsis", n, m.Subject[len(m.Subject)-10:], maxSubject)
			}
			if !utf8.ValidString(m.Subject) || !utf8.ValidString(m.Text) || !utf8.ValidString(m.HTML) {
				t.Error("output is not valid UTF-8")
			}
			// Legible: the text part keeps the emoji, the Arabic and the
			// literal markup, and no line is anywhere near 10,000 long.
			for _, s := range []string{"🎉", "مرحبا بالعالم", "<b>bold</b> & co", `"><img src=x onerror=alert(1)>`} {
				if !strings.Contains(m.Text, s) {
					t.Errorf("text part lost %q:\n%s", s, m.Text)
				}
			}
			if strings.ContainsRune(m.Text+m.HTML+m.Subject, '\u202E') {
				t.Error("a right-to-left override survived")
			}
			for _, line := range strings.Split(m.Text, "\n") {
				if utf8.RuneCountInString(line) > maxLine+10 {
					t.Errorf("text line of %d characters", utf8.RuneCountInString(line))
				}
			}
			if got := doc.Find(`[data-testid="item"]`).Text(); !strings.Contains(got, "🎉") || !strings.Contains(got, "<b>bold</b> & co") {
				t.Errorf("HTML item lost the emoji or the literal markup: %q", got)
			}
		})
	}
}

func TestThousandItemsShowDisplayLimit(t *testing.T) {
	t.Parallel()
	g := Group{Type: commentType(), Total: 1000, ActorCount: 300, ActorNames: []string{"Ann", "Ben", "Cy"}}
	g.Type.DisplayLimit = 10
	for i := range 10 {
		g.Items = append(g.Items, event("Ann", "Doc", "x", i))
	}
	for _, mode := range []string{"cooldown", "daily"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			m, doc := render(t, input(mode, g))
			if n := doc.Find(`[data-testid="item"]`).Length(); n != 10 {
				t.Errorf("%d items rendered, want 10", n)
			}
			if !strings.Contains(m.Subject, "1,000") {
				t.Errorf("subject %q does not carry the true total", m.Subject)
			}
			if got := doc.Find(`[data-testid="heading"]`).Text(); got != "Ann, Ben and 298 others left 1,000 comments on Doc" {
				t.Errorf("heading %q", got)
			}
			if got := doc.Find(`[data-testid="note"]`).Text(); got != "1,000 in all — showing the latest 10" {
				t.Errorf("note %q", got)
			}
			if got := doc.Find(`[data-testid="more"]`).Text(); got != "and 990 more" {
				t.Errorf("more %q, want \"and 990 more\"", got)
			}
			if !strings.Contains(m.Text, "and 990 more") || strings.Count(m.Text, "* Ann: x") != 10 {
				t.Errorf("text part:\n%s", m.Text)
			}
		})
	}
}

func TestRenderEnforcesDisplayLimit(t *testing.T) {
	t.Parallel()
	g := Group{Type: commentType(), Total: 40}
	g.Type.DisplayLimit = 3
	for i := range 40 {
		g.Items = append(g.Items, event("Ann", "Doc", "x", i))
	}
	_, doc := render(t, input("cooldown", g))
	if n := doc.Find(`[data-testid="item"]`).Length(); n != 3 {
		t.Errorf("%d items rendered from a loader that did not cut, want 3", n)
	}
	if got := doc.Find(`[data-testid="more"]`).Text(); got != "and 37 more" {
		t.Errorf("more %q", got)
	}
}

func TestSingularAndPlural(t *testing.T) {
	t.Parallel()
	typ := Type{Key: "comment", Name: "Comments", ItemText: "{{actor.name}}: {{object.title}}",
		GroupText: "{{count}} new comment|{{count}} new comments"}
	for _, c := range []struct {
		total int
		want  string
	}{{1, "1 new comment"}, {2, "2 new comments"}, {15, "15 new comments"}, {1000, "1,000 new comments"}} {
		g := Group{Type: typ, Total: c.total, Items: []Item{event("Ann", "Doc", "", 1)}}
		// A daily digest keeps the group heading even for one item.
		_, doc := render(t, input("daily", g, shares()))
		// The busier group comes first, so look for this one's heading.
		if got := doc.Find(`[data-testid="heading"]`).FilterFunction(func(_ int, h *goquery.Selection) bool {
			return strings.HasSuffix(h.Text(), "comment") || strings.HasSuffix(h.Text(), "comments")
		}).Text(); got != c.want {
			t.Errorf("total %d: heading %q, want %q", c.total, got, c.want)
		}
	}
	// Without "|", both counts use the one form.
	typ.GroupText = "{{count}} × {{object.title}}"
	for _, total := range []int{1, 3} {
		if got := Heading(Group{Type: typ, Total: total, Items: []Item{event("Ann", "Doc", "", 1)}}, nil); got != i18n.Resolve("en", "", "").Number(total)+" × Doc" {
			t.Errorf("heading %q", got)
		}
	}
}

func TestGroupTextUsesNewestItem(t *testing.T) {
	t.Parallel()
	g := failures() // item order "first": the oldest item is shown first
	if got := Heading(Group{Type: g.Type, Total: 1, Items: g.Items[:1]}, berlin); got != "nightly build #0 failed" {
		t.Errorf("singular heading %q", got)
	}
	typ := g.Type
	typ.GroupText = "{{count}} failures, the last {{object.title}} at {{occurred_at}}"
	if got := Heading(Group{Type: typ, Total: 30, Items: g.Items}, berlin); got != "30 failures, the last nightly build #9 at Nov 22, 23:30 CET" {
		t.Errorf("heading %q", got)
	}
}

func TestItemFields(t *testing.T) {
	t.Parallel()
	it := Item{
		Actor:  Actor{ID: "u_a", Name: "Ann"},
		Object: Object{Type: "app", ID: "app_9", Title: "Planner", URL: "https://app.example/apps/9"},
		Data: map[string]any{
			"n": float64(3), "big": float64(1_000_000), "ratio": 0.25, "ok": true,
			"tags":   []any{"red", float64(2), map[string]any{"x": 1}},
			"nested": map[string]any{"level": map[string]any{"deep": "yes"}},
			"obj":    map[string]any{"a": 1},
			"empty":  nil,
		},
		OccurredAt: time.Date(2026, 11, 22, 9, 0, 0, 0, time.UTC),
	}
	cases := map[string]string{
		"{{actor.name}}/{{actor.id}}":                        "Ann/u_a",
		"{{object.type}} {{object.id}} {{object.title}}":     "app app_9 Planner",
		"{{ object.url }}":                                   "https://app.example/apps/9",
		"{{occurred_at}}":                                    "Nov 22, 10:00 CET",
		"{{data.n}} {{data.big}} {{data.ratio}} {{data.ok}}": "3 1000000 0.25 true",
		"{{data.tags}}":                                      "red, 2",
		"{{data.nested.level.deep}}":                         "yes",
		"x [{{data.obj}}][{{data.missing}}][{{data.empty}}]": "x",
		"[{{data.nested.nope.deeper}}][{{data.n.x}}] y":      "y",
	}
	for src, want := range cases {
		tx, err := parseText(src, false)
		if err != nil {
			t.Errorf("%q: %v", src, err)
			continue
		}
		if got := tx.expand(fields{item: &it, loc: berlin, count: 1}, maxLine); got != want {
			t.Errorf("%q expands to %q, want %q", src, got, want)
		}
	}
}

func TestActors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		names []string
		count int
		want  string
	}{
		{nil, 0, "Someone"},
		{nil, 4, "4 people"},
		{[]string{"Alice"}, 1, "Alice"},
		{[]string{"Alice"}, 0, "Alice"},
		{[]string{"Alice", "Bob"}, 2, "Alice and Bob"},
		{[]string{"Alice", "Bob", "Carol"}, 3, "Alice, Bob and Carol"},
		{[]string{"Alice", "Bob", "Carol"}, 4, "Alice, Bob and 2 others"},
		{[]string{"Alice", "Bob", "Carol"}, 15, "Alice, Bob and 13 others"},
		{[]string{"Alice", "Bob"}, 3, "Alice, Bob and 1 other"},
		{[]string{"Alice"}, 2, "Alice and 1 other"},
		{[]string{"Alice", "Bob", "Carol"}, 1003, "Alice, Bob and 1,001 others"},
		{[]string{"Al\r\nice", " "}, 2, "Al ice and 1 other"},
	}
	for _, c := range cases {
		if got := Actors(c.names, c.count); got != c.want {
			t.Errorf("Actors(%q, %d) = %q, want %q", c.names, c.count, got, c.want)
		}
	}
}

func TestSinceLabel(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 23, 7, 0, 0, 0, time.UTC) // Monday 08:00 in Berlin
	cases := []struct {
		opened time.Time
		want   string
	}{
		{time.Time{}, "3 updates"},
		{now.Add(-2 * time.Hour), "3 updates since 06:00 CET"},                         // earlier today in Berlin, with its zone
		{time.Date(2026, 11, 22, 23, 30, 0, 0, time.UTC), "3 updates since 00:30 CET"}, // Sunday in UTC, Monday in Berlin
		{now.Add(-24 * time.Hour), "3 updates since Sunday"},
		{now.Add(-6 * 24 * time.Hour), "3 updates since Tuesday"},
		{now.Add(-7 * 24 * time.Hour), "3 updates since November 16"},
		{time.Date(2025, 12, 30, 12, 0, 0, 0, time.UTC), "3 updates since December 30, 2025"},
	}
	for _, c := range cases {
		if got := since("3 updates", c.opened, now, berlin, i18n.Locale{}); got != c.want {
			t.Errorf("since(%v) = %q, want %q", c.opened, got, c.want)
		}
	}
}

func TestSubjectIsOneCappedLine(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"Hello":                           "Hello",
		"  a\r\nb\tc\x00d\u2028e\u0085f ": "a b c d e f",
		"left \u202Eright\u2066 x":        "left right x",
		"مرحبا 🎉":                         "مرحبا 🎉",
	}
	for in, want := range cases {
		if got := Subject(in); got != want {
			t.Errorf("Subject(%q) = %q, want %q", in, got, want)
		}
	}
	for _, long := range []string{strings.Repeat("é", 400), strings.Repeat("🎉", 400), strings.Repeat("word ", 100)} {
		got := Subject(long)
		if n := utf8.RuneCountInString(got); n > maxSubject || !utf8.ValidString(got) || !strings.HasSuffix(got, "…") {
			t.Errorf("Subject of %d runes gave %d runes %q", utf8.RuneCountInString(long), n, got)
		}
	}
	if got := Subject(strings.Repeat("word ", 100)); strings.Contains(got, "wor…") {
		t.Errorf("cut inside a word although a space was near: %q", got)
	}
}

func TestNothingToRender(t *testing.T) {
	t.Parallel()
	for _, in := range []Input{input("daily"), input("daily", Group{Type: commentType()})} {
		if _, err := Render(in); !errors.Is(err, ErrNothingToRender) {
			t.Errorf("Render of an empty batch: %v, want ErrNothingToRender", err)
		}
	}
}

func TestBrokenStoredTextFailsWithItsType(t *testing.T) {
	t.Parallel()
	g := comments()
	g.Type.GroupText = "{{actors}} did {{things}}"
	_, err := Render(input("cooldown", g))
	var te *TextError
	if !errors.As(err, &te) || te.Placeholder != "{{things}}" || !strings.Contains(err.Error(), "comment.created") {
		t.Errorf("error %v, want a TextError for {{things}} naming the type", err)
	}
}

func TestEmptyTextsFallBackToDefaults(t *testing.T) {
	t.Parallel()
	g := Group{Type: Type{Key: "doc.shared", Name: "Shared documents"}, Total: 3,
		Items: []Item{event("Ann", "Doc A", "", 1), event("Ben", "Doc B", "", 2), event("Ann", "Doc C", "", 3)}}
	m, doc := render(t, input("cooldown", g))
	if m.Subject != "Shared documents: 3 new" {
		t.Errorf("subject %q", m.Subject)
	}
	if got := doc.Find(`[data-testid="item"] a`).First().Text(); got != "Ann: Doc A" {
		t.Errorf("item %q", got)
	}
}

func BenchmarkRenderDigest(b *testing.B) {
	in := input("daily", comments(), shares(), failures())
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Render(in); err != nil {
			b.Fatal(err)
		}
	}
}
