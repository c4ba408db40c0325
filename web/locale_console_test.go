package web_test

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/lull-dev/lull/db"
)

// TestInlineRecipientLocale: a recipient given inline in an event carries
// a locale, stored in canonical form and used for their email; an event
// that leaves it out keeps the stored one, and a bad one is refused
// naming the entry.
func TestInlineRecipientLocale(t *testing.T) {
	t.Parallel()
	a := setupAPI(t)
	a.mustCall(t, "PUT", "/api/v1/types/comment", `{"name":"Comments","default_mode":"cooldown","window":"1h",
		"texts":{"de":{"group_text":"{{actors}} hat kommentiert|{{actors}} haben {{count}}-mal kommentiert"}}}`, 200)
	event := func(recipient string) string {
		return `{"type":"comment","actor":{"id":"alice","name":"Alice"},"object":{"title":"Q3 plan"},"recipients":[` + recipient + `]}`
	}
	res := a.mustCall(t, "POST", "/api/v1/events", event(`{"id":"u_dora","email":"dora@example.com","locale":"de-at"}`), 202)
	stored := func() *db.Recipient {
		t.Helper()
		r, err := db.GetRecipient(context.Background(), a.db.Bun, "u_dora")
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if got := stored().Locale; got != "de-AT" {
		t.Fatalf("stored locale %q, want de-AT", got)
	}
	// Named again without a locale, and as a bare id: the stored one stays.
	a.mustCall(t, "POST", "/api/v1/events", event(`{"id":"u_dora","name":"Dora"}`), 202)
	a.mustCall(t, "POST", "/api/v1/events", event(`"u_dora"`), 202)
	if rec := stored(); rec.Locale != "de-AT" || rec.Name != "Dora" {
		t.Fatalf("after an event without a locale: %v, want de-AT kept and the name set", rec)
	}
	// Named twice in one event, the entries merge as two updates would.
	a.mustCall(t, "POST", "/api/v1/events", event(`{"id":"u_dora","locale":"fr"},{"id":"u_dora","name":"Dora F."}`), 202)
	if rec := stored(); rec.Locale != "fr" || rec.Name != "Dora F." {
		t.Fatalf("after an event naming her twice: %q %q, want fr and Dora F.", rec.Locale, rec.Name)
	}
	a.mustCall(t, "POST", "/api/v1/events", event(`{"id":"u_dora","locale":"de-AT"}`), 202)

	id := int64(res["batches"].([]any)[0].(map[string]any)["id"].(float64))
	a.mustCall(t, "POST", "/api/v1/batches/"+itoa(id)+"/flush", "", 202)
	a.workFlush(t, id)
	out, err := db.ListOutbox(context.Background(), a.db.Pool, id, 0, 1)
	if err != nil || len(out) != 1 {
		t.Fatalf("outbox: %v, %d emails", err, len(out))
	}
	if !strings.Contains(out[0].Text, "haben 5-mal kommentiert") || !strings.Contains(out[0].Text, "Abmelden") {
		t.Fatalf("the email of a de-AT recipient is not German:\n%s", out[0].Text)
	}

	long := strings.Repeat("a", 100_000)
	for _, bad := range []string{`"english!"`, `"und"`, `"` + long + `"`, `7`, `"de-"`} {
		body := event(`"u_dora",{"id":"u_x","locale":` + bad + `}`)
		if got, p := a.call(t, "POST", "/api/v1/events", body); got != 422 || fieldOf(p) != "recipients[1].locale" {
			t.Errorf("locale %.40s: status %d, field %q, want 422 naming recipients[1].locale", bad, got, fieldOf(p))
		}
	}
	if n := countRows(t, a.db, "SELECT count(*) FROM recipients WHERE id = 'u_x'"); n != 0 {
		t.Fatal("a refused event stored its recipient")
	}
}

// TestFeedHeadingInRecipientLocale: a feed group's heading is the one the
// recipient's email would show, in their language: the type's texts for
// their locale and the language's own list form.
func TestFeedHeadingInRecipientLocale(t *testing.T) {
	t.Parallel()
	a := feedSetup(t)
	a.mustCall(t, "PUT", "/api/v1/types/comment", `{"name":"Comments","default_mode":"cooldown","window":"1h",
		"group_text":"{{actors}} commented on {{object.title}}|{{actors}} left {{count}} comments on {{object.title}}",
		"texts":{"de":{"group_text":"{{actors}} hat {{object.title}} kommentiert|{{actors}} haben {{count}} Kommentare zu {{object.title}} geschrieben"}}}`, 200)
	// Shares have no group text: lull's default, in German too.
	a.mustCall(t, "PUT", "/api/v1/types/share", `{"name":"Shares","default_mode":"cooldown","window":"1h","texts":{"de":{"name":"Freigaben"}}}`, 200)
	a.mustCall(t, "PUT", "/api/v1/recipients/u_bob", `{"locale":"de-AT"}`, 200)
	a.postEvent(t, "share", "Chen", "")
	a.postEvent(t, "share", "Chen", "")
	for _, who := range []string{"Alice", "Fatima", "Jonas"} {
		a.postEvent(t, "comment", who, "doc:7")
	}
	feed := a.mustCall(t, "GET", "/api/v1/recipients/u_bob/feed", "", 200)
	groups := feed["groups"].([]any)
	if got, want := groups[0].(map[string]any)["text"], "Jonas, Fatima und Alice haben 3 Kommentare zu Q3 plan geschrieben"; got != want {
		t.Errorf("feed heading of a de-AT recipient = %q, want %q", got, want)
	}
	if got, want := groups[1].(map[string]any)["text"], "Freigaben: 2 neu"; got != want {
		t.Errorf("default heading of a de-AT recipient = %q, want %q", got, want)
	}
	a.mustCall(t, "PUT", "/api/v1/recipients/u_bob", `{"locale":null}`, 200)
	feed = a.mustCall(t, "GET", "/api/v1/recipients/u_bob/feed", "", 200)
	if got := feed["groups"].([]any)[1].(map[string]any)["text"]; got != "Shares: 2 new" {
		t.Errorf("default heading in English = %q", got)
	}
}

// TestConsolePreviewInLocale: the console previews a batch, and a type
// with sample data, in a language the operator picks: lull's own words
// from that catalog and the type's texts for it, falling back along the
// tag's parents. The default is the recipient's own language; a value
// that is no language tag is refused, not shown in another language.
func TestConsolePreviewInLocale(t *testing.T) {
	t.Parallel()
	a, id := consoleSetup(t)
	a.mustCall(t, "PUT", "/api/v1/types/comment", `{"name":"Comments","default_mode":"cooldown","window":"1h",
		"group_text":"{{actors}} commented|{{actors}} left {{count}} comments",
		"texts":{"de":{"group_text":"{{actors}} hat kommentiert|{{actors}} haben {{count}}-mal kommentiert"}}}`, 200)
	c := operatorClient(t, a)
	preview := a.srv.URL + "/admin/batches/" + itoa(id) + "/preview"

	_, doc := getDoc(t, c, preview)
	if text := doc.Find(`[data-testid="text-part"]`).Text(); !strings.Contains(text, "left 2 comments") || strings.Contains(text, "Abmelden") {
		t.Errorf("the default preview is not in the recipient's own language (none, so English):\n%s", text)
	}
	if got := doc.Find(`[data-testid="locale"] option[value="de"]`).Length(); got != 1 {
		t.Fatalf("the locale picker offers German %d times", got)
	}

	for _, locale := range []string{"de", "de-AT"} {
		resp, doc := getDoc(t, c, preview+"?locale="+locale)
		text := doc.Find(`[data-testid="text-part"]`).Text()
		if resp.StatusCode != 200 || !strings.Contains(text, "haben 2-mal kommentiert") || !strings.Contains(text, "Abmelden") {
			t.Errorf("preview in %s (%d) is not German:\n%s", locale, resp.StatusCode, text)
		}
		if got, _ := doc.Find(`[data-testid="locale"] option[selected]`).Attr("value"); got != locale {
			t.Errorf("preview in %s: the picker has %q chosen", locale, got)
		}
		frame, _ := doc.Find(`[data-testid="preview-frame"]`).Attr("src")
		html := fetchBody(t, c, a.srv.URL+frame)
		if !strings.Contains(frame, "locale="+locale) || !strings.Contains(html, "haben 2-mal kommentiert") || !strings.Contains(html, `lang="de"`) {
			t.Errorf("the frame of the preview in %s (%s) is not German:\n%.400s", locale, frame, html)
		}
	}

	_, doc = getDoc(t, c, a.srv.URL+"/admin/types/comment/preview?locale=de")
	if text := doc.Find(`[data-testid="text-part"]`).Text(); !strings.Contains(text, "haben 12-mal kommentiert") {
		t.Errorf("type preview in de is not German:\n%s", text)
	}
	_, doc = getDoc(t, c, a.srv.URL+"/admin/types/comment/preview?locale=ja")
	if text := doc.Find(`[data-testid="text-part"]`).Text(); !strings.Contains(text, "left 12 comments") || !strings.Contains(text, "配信停止") {
		t.Errorf("type preview in ja: want lull's words in Japanese and the type's own text (it has none in ja):\n%s", text)
	}

	// A NUL byte is refused before the handler (400) like everywhere.
	for _, bad := range []string{"english!", "und", strings.Repeat("x", 5000), "%00"} {
		for _, path := range []string{preview, preview + "/html", a.srv.URL + "/admin/types/comment/preview"} {
			if resp, _ := getDoc(t, c, path+"?locale="+bad); resp.StatusCode != 422 && resp.StatusCode != 400 {
				t.Errorf("%s?locale=%.20s answered %d, want it refused", path, bad, resp.StatusCode)
			}
		}
	}
	if n := countRows(t, a.db, "SELECT (SELECT count(*) FROM outbox) + (SELECT count(*) FROM batches WHERE state <> 'open')"); n != 0 {
		t.Fatal("previewing sent or changed something")
	}
}

func fetchBody(t *testing.T, c *http.Client, u string) string {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestConsoleTypeEditorLanguages: the types list and the type editor
// show which languages have texts of their own; the editor edits them
// with the API's checks, each error next to its field, and a form without
// the language fields leaves them alone.
func TestConsoleTypeEditorLanguages(t *testing.T) {
	t.Parallel()
	a, _ := consoleSetup(t)
	a.mustCall(t, "PUT", "/api/v1/types/comment", `{"name":"Comments","default_mode":"cooldown","window":"1h",
		"texts":{"de":{"name":"Kommentare"},"de-AT":{"item_text":"{{actor.name}} hat kommentiert"}}}`, 200)
	c := operatorClient(t, a)

	_, doc := getDoc(t, c, a.srv.URL+"/admin/types")
	if got := doc.Find(`[data-testid="type-languages"]`).First().Text(); got != "de, de-AT" {
		t.Errorf("types list names languages %q, want de, de-AT", got)
	}
	edit := a.srv.URL + "/admin/types/comment/edit"
	_, doc = getDoc(t, c, edit)
	if got := doc.Find(`[data-testid="type-locales"]`).Text(); !strings.Contains(got, "German (de)") || !strings.Contains(got, "Austrian German (de-AT)") || strings.Contains(got, "Japanese") {
		t.Errorf("editor says texts in %q, want German and Austrian German only", got)
	}
	if _, open := doc.Find(`[data-testid="type-locale-de"]`).Attr("open"); !open {
		t.Error("German, which has texts, is folded")
	}
	if _, open := doc.Find(`[data-testid="type-locale-ja"]`).Attr("open"); open {
		t.Error("Japanese, which has no texts, is open")
	}
	if got, _ := doc.Find(`input[name="texts.de.name"]`).Attr("value"); got != "Kommentare" {
		t.Errorf("German name field holds %q", got)
	}

	form := url.Values{"name": {"Comments"}, "default_mode": {"cooldown"}, "window": {"1h"}, "max_wait": {"1h"}, "max_items": {"0"},
		"display_limit": {"10"}, "item_order": {"latest"}, "item_text": {"{{actor.name}}: {{object.title}}"}, "group_text": {"{{count}} comments"},
		"texts.de.name": {""}, "texts.de-AT.item_text": {"{{actor.name}} hat kommentiert"},
		"texts.ja.group_text": {"{{count}"}, "do": {"save"}}
	resp, doc := postDoc(t, c, edit, form, "")
	if resp.StatusCode != 422 || doc.Find(`[data-testid="error-texts.ja.group_text"]`).Length() != 1 {
		t.Fatalf("a bad Japanese group text: %d, error %q", resp.StatusCode, doc.Find(`[data-testid="error-texts.ja.group_text"]`).Text())
	}
	form.Set("texts.ja.group_text", "{{actors}}がコメントしました")
	// Preview shows the unsaved Japanese text in the frame, in Japanese.
	form.Set("do", "preview")
	form.Set("preview_locale", "ja")
	_, doc = postDoc(t, c, edit, form, "")
	frame, _ := doc.Find(`[data-testid="preview-frame"]`).Attr("src")
	if html := fetchBody(t, c, a.srv.URL+frame); !strings.Contains(html, "がコメントしました") || !strings.Contains(html, `lang="ja"`) {
		t.Errorf("the editor's preview in ja (%s) does not show the unsaved text:\n%.300s", frame, html)
	}
	form.Set("do", "save")
	postForm(t, c, edit, form)
	typ, err := db.GetType(context.Background(), a.db.Pool, "comment")
	if err != nil {
		t.Fatal(err)
	}
	if _, de := typ.Texts["de"]; de || typ.Texts["ja"].GroupText != "{{actors}}がコメントしました" || typ.Texts["de-AT"].ItemText == "" {
		t.Fatalf("saved texts %+v, want German cleared, Japanese added, de-AT kept", typ.Texts)
	}
	for k := range form {
		if strings.HasPrefix(k, "texts.") {
			form.Del(k)
		}
	}
	form.Set("texts.de.nmae", "Kommentare") // no field the editor has
	postForm(t, c, edit, form)
	if typ, _ = db.GetType(context.Background(), a.db.Pool, "comment"); len(typ.Texts) != 2 {
		t.Fatalf("a form without language fields changed the texts: %+v", typ.Texts)
	}
}

// TestConsoleSimulatorHeadingsInLocale: the simulator names each type as
// recipients read it, with the heading of a typical email under the
// current settings, in the language picked (default LULL_DEFAULT_LOCALE):
// the same words an email and the feed use.
func TestConsoleSimulatorHeadingsInLocale(t *testing.T) {
	t.Parallel()
	a := simulationSetup(t)
	a.mustCall(t, "PUT", "/api/v1/types/comment", `{"name":"Comments","default_mode":"cooldown","window":"1m",
		"group_text":"{{actors}} commented|{{actors}} left {{count}} comments",
		"texts":{"de":{"name":"Kommentare","group_text":"{{actors}} hat kommentiert|{{actors}} haben {{count}}-mal kommentiert"}}}`, 200)
	if err := db.UpsertOperator(context.Background(), a.db.Pool, "ops@example.com", "correct horse"); err != nil {
		t.Fatal(err)
	}
	c := operatorClient(t, a)
	now := time.Now().UTC()
	form := url.Values{"source": {"stored"}, "from": {now.Add(-time.Hour).Format("2006-01-02T15:04")}, "to": {now.Add(time.Hour).Format("2006-01-02T15:04")}}
	heading := func(locale string) (int, string) {
		t.Helper()
		form.Set("locale", locale)
		resp, doc := postDoc(t, c, a.srv.URL+"/admin/simulate", form, "")
		return resp.StatusCode, doc.Find(`[data-testid="type-comment"] [data-testid="type-heading"]`).Text()
	}
	// Bob's two comments went into one email.
	if status, got := heading(""); status != 200 || !strings.Contains(got, "Comments") || !strings.Contains(got, "Alice and Priya left 2 comments") {
		t.Errorf("default language: %d %q", status, got)
	}
	if status, got := heading("de"); status != 200 || !strings.Contains(got, "Kommentare") || !strings.Contains(got, "Alice und Priya haben 2-mal kommentiert") {
		t.Errorf("German: %d %q", status, got)
	}
	resp, doc := postDoc(t, c, a.srv.URL+"/admin/simulate", url.Values{"source": {"stored"}, "from": form["from"], "to": form["to"], "locale": {"english!"}}, "")
	if resp.StatusCode != 422 || doc.Find(`[data-testid="error-locale"]`).Length() != 1 {
		t.Errorf("a bad locale: %d, error %q", resp.StatusCode, doc.Find(`[data-testid="error-locale"]`).Text())
	}
}
