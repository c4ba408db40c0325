package mailtemplates

import (
	"fmt"
	"github.com/lull-dev/lull/i18n"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/PuerkitoBio/goquery"
)

// These tests pin the cases issue 20 names, each with a golden email
// (testdata/case-*.html and .txt) next to the assertions, so a reviewer
// sees what the recipient sees.

// bigDigest is 10 types × 100 items with 500-character item texts, half
// of them non-ASCII, so quoted-printable triples their size.
func bigDigest() Input {
	var groups []Group
	for ty := range 10 {
		typ := Type{Key: fmt.Sprintf("kind.%d", ty), Name: fmt.Sprintf("Kind %d", ty), DisplayLimit: 100, ItemOrder: "latest",
			ItemText: "{{actor.name}}: {{data.a}} {{data.b}}"}
		g := Group{Type: typ, Total: 100 + ty, ActorCount: 1, ActorNames: []string{"Ann"}}
		word := "lorem "
		if ty%2 == 1 {
			word = "привет "
		}
		half := strings.Repeat(word, 250/utf8.RuneCountInString(word)+1)
		for i := range 100 {
			it := event("Ann", fmt.Sprintf("Item %d", i), "", i)
			it.Object.URL = fmt.Sprintf("https://app.example/kind/%d/item/%d", ty, i)
			it.Data = map[string]any{"a": half, "b": half}
			g.Items = append(g.Items, it)
		}
		groups = append(groups, g)
	}
	return input("daily", groups...)
}

// TestHTMLStaysUnderGmailsClip: Gmail clips an email above about 102 KB
// and the footer with the unsubscribe link is the first thing lost. A
// digest of 10 types × 100 items with 500-character texts was over 1 MB;
// it now shows fewer items, each group saying how many more there are.
func TestHTMLStaysUnderGmailsClip(t *testing.T) {
	t.Parallel()
	in := bigDigest()
	m, doc := render(t, in)
	if n := encodedSize([]byte(m.HTML)); n > 100_000 || len(m.HTML) > 100_000 {
		t.Fatalf("HTML is %d bytes raw, %d sent; want at most 100,000", len(m.HTML), n)
	}
	if doc.Find(`[data-testid="footer"] [data-testid="unsubscribe-link"]`).Length() != 1 {
		t.Error("the footer's unsubscribe link is missing")
	}
	groups := doc.Find(`[data-testid="group"]`)
	if groups.Length() != 10 {
		t.Fatalf("%d sections, want all 10", groups.Length())
	}
	groups.Each(func(i int, g *goquery.Selection) {
		shown := g.Find(`[data-testid="item"]`).Length()
		total := 109 - i // the busiest first
		want := fmt.Sprintf("and %d more", total-shown)
		if got := g.Find(`[data-testid="more"]`).Text(); got != want {
			t.Errorf("section %d shows %d items and says %q, want %q", i, shown, got, want)
		}
	})
	if doc.Find(`[data-testid="item"]`).Length() < 10 {
		t.Error("fewer items than sections: the budget was spent badly")
	}
	goldenText(t, "case-budget", m)
}

// TestManySectionsStayUnderGmailsClip: with more sections than fit even
// without items, the last ones are left out and the email says so.
func TestManySectionsStayUnderGmailsClip(t *testing.T) {
	t.Parallel()
	in := bigDigest()
	for i := range 400 {
		g := in.Groups[0]
		g.Type.Key, g.Type.Name, g.Total, g.Items = fmt.Sprintf("extra.%d", i), fmt.Sprintf("Extra %d", i), 1, g.Items[:1]
		in.Groups = append(in.Groups, g)
	}
	m, doc := render(t, in)
	if n := encodedSize([]byte(m.HTML)); n > 100_000 {
		t.Fatalf("HTML is %d bytes sent", n)
	}
	rest := doc.Find(`[data-testid="rest"]`).Text()
	shown := doc.Find(`[data-testid="group"]`).Length()
	if want := fmt.Sprintf("and %d more updates in %d more sections", 410-shown, 410-shown); !strings.HasPrefix(rest, want) {
		t.Errorf("rest %q, want it to start %q", rest, want)
	}
	if doc.Find(`[data-testid="unsubscribe-link"]`).Length() != 1 || !strings.Contains(m.Text, rest) {
		t.Error("the footer or the text part's rest line is missing")
	}
}

// TestViewAll: "and N more" comes with a button to where they all are:
// the type's view_url, or the one object every item is about.
func TestViewAll(t *testing.T) {
	t.Parallel()
	t.Run("SharedObject", func(t *testing.T) {
		t.Parallel()
		m, doc := render(t, input("cooldown", comments()))
		if got := doc.Find(`[data-testid="view-all"]`).AttrOr("href", ""); got != "https://app.example/doc/7" {
			t.Errorf("view all links to %q", got)
		}
		if !strings.Contains(m.Text, "View all: <https://app.example/doc/7>") {
			t.Errorf("text part lacks the view-all link:\n%s", m.Text)
		}
	})
	t.Run("TypeViewURL", func(t *testing.T) {
		t.Parallel()
		g := failures()
		g.Type.ViewURL = "https://ci.example/pipelines/{{object.title}}/runs"
		m, doc := render(t, input("cooldown", g))
		want := "https://ci.example/pipelines/nightly%20build%20%239/runs"
		if got := doc.Find(`[data-testid="view-all"]`).AttrOr("href", ""); got != want {
			t.Errorf("view all links to %q, want %q", got, want)
		}
		golden(t, "case-view-all.html", m.HTML)
		golden(t, "case-view-all.txt", "Subject: "+m.Subject+"\n\n"+m.Text)
	})
	t.Run("HostileValuesStayInTheirPlace", func(t *testing.T) {
		t.Parallel()
		it := event("Eve", "..", "", 1)
		it.Object.ID = "1&admin=true#x"
		dot := event("Eve", ".", "", 1)
		// A browser reads "%2E%2E" (and ".%2e", "%2e") as ".." and climbs
		// to https://app.example/x, as it does for "..": no escaping keeps
		// a dot segment in place, so such a value makes no link.
		for src, it := range map[string]Item{
			"https://app.example/docs/{{object.title}}/x":                 it,
			"https://app.example/docs/{{object.title}}{{object.title}}/x": dot,
			"https://app.example/docs/{{object.title}}/x?y=1":             dot,
		} {
			tx, err := parseText(src, false)
			if err != nil {
				t.Fatal(err)
			}
			if got := tx.expandURL(&it, time.UTC); got != "" {
				t.Errorf("%s expands for %q to %q, a path that climbs", src, it.Object.Title, got)
			}
		}
		for src, want := range map[string]string{
			"https://app.example/docs/x{{object.title}}/x": "https://app.example/docs/x../x",
			"https://app.example/search?q={{object.id}}":   "https://app.example/search?q=1%26admin%3Dtrue%23x",
			"https://app.example/d/{{object.id}}/comments": "https://app.example/d/1&admin=true%23x/comments",
		} {
			tx, err := parseText(src, false)
			if err != nil {
				t.Fatal(err)
			}
			if got := tx.expandURL(&it, time.UTC); got != want {
				t.Errorf("%s expands to %q, want %q", src, got, want)
			}
		}
		if got := safeURL("https://app.example/" + strings.Repeat("x", 5000)); got != "" {
			t.Error("a 5,000-character URL became a link")
		}
	})
	t.Run("NoCommonObject", func(t *testing.T) {
		t.Parallel()
		g := failures()
		g.Items[3].Object.URL = "https://app.example/other"
		_, doc := render(t, input("cooldown", g))
		if doc.Find(`[data-testid="view-all"]`).Length() != 0 {
			t.Error("a view-all button without anywhere to go")
		}
	})
}

func TestValidateViewURL(t *testing.T) {
	t.Parallel()
	for s, ok := range map[string]bool{
		"https://app.example/docs/{{object.id}}":   true,
		"https://app.example/inbox":                true,
		"http://app.example/x?id={{data.id}}":      true,
		"https://app.example{{object.id}}":         false, // the host could grow
		"{{object.url}}":                           false,
		"javascript:alert(1)":                      false,
		"/docs/{{object.id}}":                      false,
		"https://app.example/{{count}}":            false,
		"https://app.example/{{actor.nam}}":        false,
		"https://app.example/a b":                  false,
		"https://{{data.host}}/x":                  false,
		"https://app.example/docs/{{object.id}}|x": false,
	} {
		if err := ValidateViewURL(s); (err == nil) != ok {
			t.Errorf("ValidateViewURL(%q) = %v, want ok %v", s, err, ok)
		}
	}
}

// TestSingleButtonNamesTheObject: the button says where it leads.
func TestSingleButtonNamesTheObject(t *testing.T) {
	t.Parallel()
	it := event("CI", "nightly", "", 1)
	it.Object.Type = "pipeline"
	typ := failureType()
	m, doc := render(t, input("immediate", Group{Type: typ, Total: 1, Items: []Item{it}}))
	if got := doc.Find(`[data-testid="item-link"]`).Text(); got != "View pipeline" {
		t.Errorf("button %q, want \"View pipeline\"", got)
	}
	if !strings.Contains(m.Text, "View pipeline: <https://app.example/doc/7>") {
		t.Errorf("text part:\n%s", m.Text)
	}
	for objectType, want := range map[string]string{"merge_request": "View merge request", "PR": "View PR", "": "View", "<b>": "View", strings.Repeat("x", 50): "View"} {
		if got := action(i18n.Locale{}, objectType); got != want {
			t.Errorf("action(%q) = %q, want %q", objectType, got, want)
		}
	}
	golden(t, "case-pipeline.html", m.HTML)
	golden(t, "case-pipeline.txt", "Subject: "+m.Subject+"\n\n"+m.Text)
}

// TestBusiestSectionFirst: the subject names the busiest group, so it
// comes first, and the summary's counts are those of the sections shown
// (it said "2 categories" above 3 sections).
func TestBusiestSectionFirst(t *testing.T) {
	t.Parallel()
	doc2 := commentType()
	doc2.Key, doc2.Name = "mention", "Mentions" // a second type in "Documents"
	mentions := Group{Type: doc2, Total: 1, Items: []Item{event("Ann", "Q3 plan", "hi", 3)}}
	m, doc := render(t, input("daily", shares(), mentions, failures(), comments()))
	var labels []string
	doc.Find(`[data-testid="label"]`).Each(func(_ int, s *goquery.Selection) { labels = append(labels, s.Text()) })
	want := []string{"Builds · Failed tasks", "Documents · Comments", "Sharing · Shared apps", "Documents · Mentions"}
	if strings.Join(labels, "|") != strings.Join(want, "|") {
		t.Errorf("sections %q, want %q", labels, want)
	}
	if got := doc.Find(`[data-testid="summary"]`).Text(); got != "48 updates since Sunday: Failed tasks (30), Comments (15), Shared apps (2), Mentions (1)" {
		t.Errorf("summary %q", got)
	}
	if !strings.HasSuffix(m.Subject, "— 30 tasks failed") {
		t.Errorf("subject %q", m.Subject)
	}
}

// TestNamesAndTitlesCappedOneByOne: a 300-character name must leave the
// verb in the subject, and a long item is no 470-character headline.
func TestNamesAndTitlesCappedOneByOne(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("Bartholomew ", 25) // 300 characters
	it := event(long, "Q3 plan "+strings.Repeat("and more ", 40), strings.Repeat("a long excerpt ", 30), 1)
	g := Group{Type: commentType(), Total: 2, ActorCount: 2, ActorNames: []string{long, "Ann"}, Items: []Item{it, event("Ann", "Q3 plan", "ok", 2)}}
	m, doc := render(t, input("cooldown", g))
	if !strings.Contains(m.Subject, " left 2 comments on Q3 plan") {
		t.Errorf("subject lost its verb: %q", m.Subject)
	}
	if n := utf8.RuneCountInString(doc.Find(`[data-testid="heading"]`).Text()); n > 200 {
		t.Errorf("heading of %d characters", n)
	}
	golden(t, "case-long-names.html", m.HTML)
	golden(t, "case-long-names.txt", "Subject: "+m.Subject+"\n\n"+m.Text)

	// One notification whose text is too long for a headline: the
	// group heading is the headline and the text its body.
	m, doc = render(t, input("immediate", Group{Type: commentType(), Total: 1, Items: []Item{it}}))
	h1 := doc.Find("h1").Text()
	if n := utf8.RuneCountInString(h1); n > maxHeadline {
		t.Errorf("headline of %d characters: %q", n, h1)
	}
	if !strings.Contains(h1, "commented on Q3 plan") || !strings.Contains(doc.Find(`[data-testid="item"]`).Text(), "a long excerpt") {
		t.Errorf("headline %q, item %q", h1, doc.Find(`[data-testid="item"]`).Text())
	}
	if utf8.RuneCountInString(m.Subject) > maxHeadline {
		t.Errorf("subject of %d characters", utf8.RuneCountInString(m.Subject))
	}
	golden(t, "case-long-headline.html", m.HTML)
	golden(t, "case-long-headline.txt", "Subject: "+m.Subject+"\n\n"+m.Text)
}

// TestRightToLeftOnTheBlock: dir="auto" on an inline element leaves the
// line left-aligned; on the cell it aligns Arabic and Hebrew right.
func TestRightToLeftOnTheBlock(t *testing.T) {
	t.Parallel()
	g := Group{Type: commentType(), Total: 2, Items: []Item{event("فاطمة", "خطة الربع الثالث", "يبدو جيدا", 1), event("Ann", "Q3 plan", "ok", 2)}}
	m, doc := render(t, input("cooldown", g))
	doc.Find(`[data-testid="item"]`).Each(func(_ int, s *goquery.Selection) {
		if s.AttrOr("dir", "") != "auto" {
			t.Errorf("item cell %q has dir %q, want auto", s.Text(), s.AttrOr("dir", ""))
		}
		if s.Find("[dir]").Length() != 0 {
			t.Error("dir on an inline element inside the item")
		}
	})
	golden(t, "case-rtl.html", m.HTML)
	golden(t, "case-rtl.txt", "Subject: "+m.Subject+"\n\n"+m.Text)
}

// TestMissingFieldsReadSensibly: a type without item_text and an event
// without an actor name read "Task 1", not ": Task 1"; times carry their
// zone.
func TestMissingFieldsReadSensibly(t *testing.T) {
	t.Parallel()
	typ := Type{Key: "task.assigned", Name: "Assignments"}
	a := Item{Object: Object{Title: "Task 1"}, OccurredAt: sent}
	b := Item{Actor: Actor{Name: "Ann"}, OccurredAt: sent.Add(-time.Hour)}
	m, doc := render(t, input("cooldown", Group{Type: typ, Total: 2, Items: []Item{a, b}}))
	var lines []string
	doc.Find(`[data-testid="item"]`).Each(func(_ int, s *goquery.Selection) { lines = append(lines, s.Find("span").First().Text()) })
	if strings.Join(lines, "|") != "Task 1|Ann" {
		t.Errorf("items %q, want Task 1 and Ann", lines)
	}
	for _, when := range []string{"Nov 23, 08:00 CET", "Nov 23, 07:00 CET"} {
		if !strings.Contains(m.HTML, when) || !strings.Contains(m.Text, when) {
			t.Errorf("time %q missing", when)
		}
	}
	golden(t, "case-missing-fields.html", m.HTML)
	golden(t, "case-missing-fields.txt", "Subject: "+m.Subject+"\n\n"+m.Text)
}

// goldenText pins the text part only, for emails whose HTML is too big
// to review as a file.
func goldenText(t *testing.T, name string, m *Message) {
	t.Helper()
	golden(t, name+".txt", "Subject: "+m.Subject+"\n\n"+m.Text)
}

// TestMuteLinksStayUnderGmailsClip: a digest whose every item is a
// conversation of its own, with the longest key a conversation can have,
// still fits the budget, and every item it shows keeps its mute link.
func TestMuteLinksStayUnderGmailsClip(t *testing.T) {
	t.Parallel()
	in := threads(bigDigest())
	for th := range in.ThreadMuteURLs {
		in.ThreadMuteURLs[th] = "https://lull.example/mute?token=" + strings.Repeat("t", 1100)
	}
	m, doc := render(t, in)
	if n := encodedSize([]byte(m.HTML)); n > 100_000 {
		t.Fatalf("HTML is %d bytes sent", n)
	}
	items, links := doc.Find(`[data-testid="item"]`).Length(), doc.Find(`[data-testid="item-mute"]`).Length()
	if items < 10 || links != items || doc.Find(`[data-testid="unsubscribe-link"]`).Length() != 1 {
		t.Errorf("%d items shown, %d mute links, want one each", items, links)
	}
}
