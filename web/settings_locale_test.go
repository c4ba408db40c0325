package web_test

import (
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/PuerkitoBio/goquery"
	"github.com/chromedp/chromedp"

	"github.com/lull-dev/lull/web/browsertest"
)

// acceptLanguage sends a browser's Accept-Language with every request,
// redirects included.
type acceptLanguage string

func (a acceptLanguage) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Accept-Language", string(a))
	return http.DefaultTransport.RoundTrip(r)
}

// langClient is browserClient for a browser set to lang ("" sends none).
func langClient(lang string) *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, Transport: acceptLanguage(lang)}
}

// localeSetup is settingsSetup for a recipient with a stored locale
// ("" for none), the comment type also named in German.
func localeSetup(t *testing.T, locale string) (*apiBundle, string) {
	t.Helper()
	a, link := settingsSetup(t)
	a.mustCall(t, "PUT", "/api/v1/types/comment", `{"name":"Comments","category":"Documents","description":"When someone comments on your documents",`+
		`"default_mode":"immediate","texts":{"de":{"name":"Kommentare","description":"Wenn jemand Ihre Dokumente kommentiert"}}}`, 200)
	a.mustCall(t, "PUT", "/api/v1/recipients/u_bob", `{"email":"bob@example.com","name":"Bob","timezone":"Europe/Berlin","locale":"`+locale+`"}`, 200)
	return a, link
}

func texts(doc *goquery.Document, sel string) []string {
	var out []string
	doc.Find(sel).Each(func(_ int, s *goquery.Selection) { out = append(out, strings.TrimSpace(s.Text())) })
	return out
}

// TestSettingsSpeakTheRecipientsLocale: a recipient stored as de-AT gets
// the settings page in German (served by de) whatever the browser asks
// for: headings, modes, weekday names, the type's German name, the
// sentence under each type, the errors next to fields and the flash.
func TestSettingsSpeakTheRecipientsLocale(t *testing.T) {
	t.Parallel()
	a, link := localeSetup(t, "de-AT")
	c := langClient("fr-FR, fr;q=0.9")
	_, doc := getDoc(t, c, link)
	if lang, dir := doc.Find("html").AttrOr("lang", ""), doc.Find("html").AttrOr("dir", ""); lang != "de" || dir != "ltr" {
		t.Errorf(`<html lang=%q dir=%q>, want lang="de" dir="ltr"`, lang, dir)
	}
	checks := map[string]string{
		"h1":                                        "Wie oft sollen wir Ihnen schreiben?",
		`[data-testid="save"]`:                      "Einstellungen speichern",
		`[data-testid="type-comment"] legend`:       "Kommentare",
		`[data-testid="preview-comment"]`:           "Eine E-Mail für jede, sobald sie eintrifft.",
		`label[for="f-digest-daily_at"]`:            "Tägliche Zusammenfassung um",
		`#f-types-comment-mode label:first-of-type`: "Sofort",
	}
	for sel, want := range checks {
		if got := strings.TrimSpace(doc.Find(sel).First().Text()); got != want {
			t.Errorf("%s: %q, want %q", sel, got, want)
		}
	}
	if days := strings.Join(texts(doc, `#f-digest-weekly_days .days label`), ","); days != "Montag,Dienstag,Mittwoch,Donnerstag,Freitag,Samstag,Sonntag" {
		t.Errorf("weekdays: %s", days)
	}
	if title := doc.Find("title").Text(); !strings.HasPrefix(title, "E-Mail-Einstellungen") {
		t.Errorf("title %q", title)
	}

	form := url.Values{
		"timezone": {"Europe/Berlin"}, "digest.shown": {"1"}, "digest.daily_at": {"07:30"}, "digest.weekly_at": {"16:00"},
		"digest.every_hours": {"2"}, "digest.monthly_day": {"31"}, "digest.monthly_at": {"09:00"},
		"types.comment.mode": {"weekly"}, "types.share.mode": {"immediate"}, "types.security.mode": {"never"},
	}
	resp, doc := postSettings(t, c, a.srv.URL, form)
	if resp.StatusCode != http.StatusUnprocessableEntity {
		t.Fatalf("no weekly day = %d, want 422", resp.StatusCode)
	}
	for sel, want := range map[string]string{
		`[data-testid="form-error"] b`:                       "Einige Felder brauchen noch einen Blick:",
		`[data-testid="error-digest.weekly_days"]`:           "Wählen Sie mindestens einen Tag für die wöchentliche Zusammenfassung.",
		`[data-testid="error-types.security.mode"]`:          "Security alerts: Diese sind erforderlich und lassen sich nicht abschalten.",
		`[data-testid="form-error"] a[href="#f-timezone"]`:   "",
		`[data-testid="form-error"] li:first-of-type a`:      "Wählen Sie mindestens einen Tag für die wöchentliche Zusammenfassung.",
		`select[name="digest.monthly_day"] option[selected]`: "der letzte Tag",
	} {
		if got := strings.TrimSpace(doc.Find(sel).First().Text()); got != want {
			t.Errorf("after a refused save, %s: %q, want %q", sel, got, want)
		}
	}

	form.Set("digest.weekly_days", "friday")
	form.Set("types.security.mode", "immediate")
	resp, doc = postSettings(t, c, a.srv.URL, form)
	if got := doc.Find(`[data-testid="flash"]`).Text(); resp.StatusCode != http.StatusOK || got != "Gespeichert. Ihre neuen Einstellungen gelten ab jetzt." {
		t.Fatalf("save = %d, flash %q", resp.StatusCode, got)
	}
	if got := doc.Find(`[data-testid="preview-comment"]`).Text(); got != "Eine E-Mail jeden Freitag um 16:00 (Europe/Berlin)." {
		t.Errorf("weekly comments described as %q", got)
	}
}

// TestSettingsFollowTheBrowsersLanguage: a recipient without a stored
// locale gets the page in the language the browser prefers, by its
// q-values; one the catalogs do not have, or a header that is not one,
// gets LULL_DEFAULT_LOCALE (English, then German here).
func TestSettingsFollowTheBrowsersLanguage(t *testing.T) {
	t.Parallel()
	a, link := localeSetup(t, "")
	cases := []struct{ accept, lang, h1, monday string }{
		{"de;q=0.2, fr-CH;q=0.9, en;q=0.5", "fr", "À quelle fréquence voulez-vous nos e-mails ?", "lundi"},
		{"ja", "ja", "メールの頻度はどうしますか？", "月曜日"},
		{"", "en", "How often should we email you?", "Monday"},
		{"*", "en", "How often should we email you?", "Monday"},
		{"ko-KR", "en", "How often should we email you?", "Monday"},
		{"de;q=x;;,,\u00e9\xff", "en", "How often should we email you?", "Monday"},
		{strings.Repeat("de-DE-x-abcdefgh, ", 400), "en", "How often should we email you?", "Monday"},
	}
	for _, c := range cases {
		_, doc := getDoc(t, langClient(c.accept), link)
		first := strings.TrimSpace(doc.Find(`#f-digest-weekly_days .days label`).First().Text())
		if lang, h1 := doc.Find("html").AttrOr("lang", ""), doc.Find("h1").Text(); lang != c.lang || h1 != c.h1 || first != c.monday {
			t.Errorf("Accept-Language %.40q: lang %q, h1 %q, Monday %q; want %q, %q, %q", c.accept, lang, h1, first, c.lang, c.h1, c.monday)
		}
	}
	// Where the browser asks for nothing shipped, LULL_DEFAULT_LOCALE speaks.
	a.web.DefaultLocale = "de"
	resp, doc := getDoc(t, langClient("ko-KR"), link)
	if vary := resp.Header.Get("Vary"); !strings.Contains(vary, "Accept-Language") {
		t.Errorf("Vary: %q; a cache could serve one browser's language to another", vary)
	}
	if doc.Find("html").AttrOr("lang", "") != "de" {
		t.Errorf("a Korean browser with the default de gets %q", doc.Find("html").AttrOr("lang", ""))
	}
	// A stored locale that no catalog serves yields to the browser's.
	a.mustCall(t, "PUT", "/api/v1/recipients/u_bob", `{"email":"bob@example.com","locale":"ko"}`, 200)
	if _, doc := getDoc(t, langClient("es-MX,es;q=0.9"), link); doc.Find("html").AttrOr("lang", "") != "es" {
		t.Errorf("a ko recipient with a Spanish browser gets %q", doc.Find("html").AttrOr("lang", ""))
	}
}

// TestUnsubscribePagesInTheRecipientsLocale: the confirmation, the page
// after it and the page after its undo are German for a German
// recipient, naming the type by its German name; a broken link, which
// names no one, speaks the browser's language.
func TestUnsubscribePagesInTheRecipientsLocale(t *testing.T) {
	t.Parallel()
	a, _ := localeSetup(t, "de")
	link := strings.Replace(a.web.Links.UnsubscribeURL("u_bob", []string{"comment"}, time.Now()), "http://lull.test", a.srv.URL, 1)
	c := langClient("en-US")
	_, doc := getDoc(t, c, link)
	if got := doc.Find("h1").Text(); got != "Keine E-Mails mehr zu Kommentare?" {
		t.Errorf("confirmation asks %q", got)
	}
	if got := doc.Find(`[data-testid="unsubscribe"]`).Text(); got != "Abbestellen" || doc.Find("html").AttrOr("lang", "") != "de" {
		t.Errorf("confirmation button %q", got)
	}
	_, doc = postDoc(t, c, link, nil, "")
	done := doc.Find(`[data-testid="done"]`)
	if h1, p := done.Find("h1").Text(), done.Find("p").First().Text(); h1 != "Sie haben abbestellt" || p != "bob@example.com erhält keine E-Mails mehr zu Kommentare." {
		t.Errorf("done page: %q / %q", h1, p)
	}
	if got := done.Find(`[data-testid="undo"]`).Text(); got != "Rückgängig machen" {
		t.Errorf("undo button %q", got)
	}
	undo, _ := done.Find(`[data-testid=undo]`).Closest("form").Attr("action")
	_, doc = postDoc(t, c, a.srv.URL+undo, nil, "")
	if got := doc.Find(`[data-testid="done"] p`).First().Text(); got != "bob@example.com erhält diese E-Mails wieder." {
		t.Errorf("undo page: %q", got)
	}

	bad := link[:len(link)-3] + "xyz"
	resp, doc := getDoc(t, langClient("ar"), bad)
	if h1 := doc.Find("h1").Text(); resp.StatusCode != http.StatusForbidden || h1 != "هذا الرابط غير صالح" || doc.Find("html").AttrOr("dir", "") != "rtl" {
		t.Errorf("broken link in an Arabic browser: %d %q", resp.StatusCode, h1)
	}
}

// TestSettingsInArabicInBrowser: an Arabic recipient's page is right to
// left, passes axe, does not scroll sideways, and still saves: a mode
// chosen by click and saved with the keyboard is shown after a reload.
func TestSettingsInArabicInBrowser(t *testing.T) {
	t.Parallel()
	_, link := localeSetup(t, "ar")
	ctx := browsertest.New(t)
	browsertest.Do(t, ctx, chromedp.Navigate(link), chromedp.WaitVisible(chromedp.CSS(`[data-testid="save"]`)))
	if got := browsertest.Eval[string](t, ctx, `document.documentElement.lang + " " + document.documentElement.dir + " " + getComputedStyle(document.body).direction`); got != "ar rtl rtl" {
		t.Errorf("lang, dir and direction: %q", got)
	}
	if got := browsertest.Eval[string](t, ctx, `document.querySelector("h1").textContent`); got != "كم مرة تريد أن نراسلك؟" {
		t.Errorf("heading %q", got)
	}
	// Right to left, the first type's radio sits right of its label.
	if right := browsertest.Eval[bool](t, ctx, `(l => l.querySelector("input").getBoundingClientRect().left > l.getBoundingClientRect().left + l.getBoundingClientRect().width/2)(document.querySelector(".modes label"))`); !right {
		t.Error("a mode's radio button is on the left of its label")
	}
	if wide := browsertest.Eval[bool](t, ctx, `document.documentElement.scrollWidth > document.documentElement.clientWidth`); wide {
		t.Error("the Arabic page scrolls sideways")
	}
	for _, v := range browsertest.Axe(t, ctx) {
		t.Errorf("Arabic settings: %s", v)
	}
	browsertest.Do(t, ctx,
		chromedp.Click(chromedp.CSS(`input[name="types.comment.mode"][value="daily"]`)),
		chromedp.Focus(chromedp.CSS(`[data-testid="save"]`)),
		chromedp.KeyEvent("\r"),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid="flash"]`)),
	)
	if got := browsertest.Eval[string](t, ctx, `document.querySelector('[data-testid="flash"]').textContent`); got != "تم الحفظ. تسري إعداداتك الجديدة من الآن." {
		t.Errorf("flash %q", got)
	}
	browsertest.Do(t, ctx, chromedp.Reload())
	browsertest.WaitURL(t, ctx, "/settings")
	browsertest.Do(t, ctx, chromedp.WaitVisible(chromedp.CSS(`[data-testid="save"]`)))
	if got := browsertest.Eval[string](t, ctx, `document.querySelector('input[name="types.comment.mode"]:checked').value`); got != "daily" {
		t.Errorf("comments after reload: %q, want daily", got)
	}
	if got := browsertest.Eval[string](t, ctx, `document.querySelector('[data-testid="preview-comment"]').textContent`); !strings.HasPrefix(got, "رسالة واحدة يوميًا") {
		t.Errorf("daily comments described as %q", got)
	}
	browsertest.Screenshot(t, ctx, "settings-ar.png")
}

// TestRecipientErrorPagesSpeakTheBrowsersLanguage: a settings page whose
// recipient is gone is "not found" in the language the browser asks for,
// like every other word of a recipient's pages.
func TestRecipientErrorPagesSpeakTheBrowsersLanguage(t *testing.T) {
	t.Parallel()
	a, link := localeSetup(t, "de")
	cases := []struct{ accept, lang, h1, text string }{
		{"de-DE,de;q=0.9", "de", "Nicht gefunden", "Hier gibt es nichts."},
		{"ar", "ar", "غير موجود", "لا يوجد شيء هنا."},
		{"", "en", "Not found", "There is nothing here."},
	}
	clients := make([]*http.Client, len(cases))
	var page string
	for i, c := range cases {
		clients[i] = langClient(c.accept)
		resp, _ := getDoc(t, clients[i], link) // the link opens a session
		page = resp.Request.URL.String()
	}
	if _, err := a.db.Pool.Exec(t.Context(), `DELETE FROM recipients WHERE id = 'u_bob'`); err != nil {
		t.Fatal(err)
	}
	for i, c := range cases {
		resp, doc := getDoc(t, clients[i], page)
		lang, h1 := doc.Find("html").AttrOr("lang", ""), strings.TrimSpace(doc.Find("h1").Text())
		if resp.StatusCode != http.StatusNotFound || lang != c.lang || h1 != c.h1 || !strings.Contains(doc.Find("main").Text(), c.text) {
			t.Errorf("Accept-Language %q: %d, lang %q, h1 %q, main %q; want 404, %q, %q, %q",
				c.accept, resp.StatusCode, lang, h1, strings.TrimSpace(doc.Find("main").Text()), c.lang, c.h1, c.text)
		}
	}
}
