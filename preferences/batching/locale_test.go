package batching

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/lull-dev/lull/db"
)

// digestIn is a daily digest of comments and shares for a recipient in
// locale, with the comment type's texts in German (de, not de-AT).
func digestIn(locale string) *db.FlushContent {
	comment := &db.Type{Key: "comment", Name: "Comments", DisplayLimit: 2, ItemOrder: "latest",
		ItemText: "{{actor.name}} commented on {{object.title}}", GroupText: "{{actors}} left {{count}} comments",
		Texts: map[string]db.TypeTexts{"de": {Name: "Kommentare", ItemText: "{{actor.name}} hat {{object.title}} kommentiert",
			GroupText: "{{actors}}: {{count}} Kommentare"}}}
	share := &db.Type{Key: "share", Name: "Shares", DisplayLimit: 10, ItemOrder: "latest",
		ItemText: "{{actor.name}} shared {{object.title}}", GroupText: "{{count}} shares",
		Texts: map[string]db.TypeTexts{"de": {Name: "Freigaben", ItemText: "{{actor.name}} hat {{object.title}} freigegeben",
			GroupText: "{{count}} Freigaben"}, "ar": {Name: "مشاركات", ItemText: "شارك {{actor.name}} {{object.title}}", GroupText: "مشاركات: {{count}}"}}}
	rec := db.Recipient{ID: "u_ute", Email: "ute@example.com", Timezone: "Europe/Vienna", Locale: locale, Active: true}
	fc := &db.FlushContent{
		Batch:    &db.Batch{ID: 7, RecipientID: rec.ID, BatchKey: "digest:daily", Mode: "daily", OpenedAt: composeNow.Add(-50 * time.Hour)},
		Types:    map[string]*db.Type{"comment": comment, "share": share},
		Settings: map[string]db.RecipientSettings{"comment": {Recipient: rec}, "share": {Recipient: rec}},
	}
	actors := []string{"Ann", "Ben", "Cleo", "Dan", "Eva"}
	for i := range 5 {
		obj, _ := json.Marshal(map[string]string{"type": "document", "id": "d1", "title": "Plan", "url": "https://app.example/d1"})
		actor, _ := json.Marshal(map[string]string{"id": actors[i], "name": actors[i]})
		fc.Items = append(fc.Items, db.Item{NotificationID: int64(i), TypeKey: "comment", Actor: actor, Object: obj,
			Data: json.RawMessage(`{}`), OccurredAt: composeNow.Add(-time.Duration(i) * time.Minute)})
	}
	obj, _ := json.Marshal(map[string]string{"type": "document", "id": "d2", "title": "Budget"})
	fc.Items = append(fc.Items, db.Item{NotificationID: 9, TypeKey: "share", Actor: json.RawMessage(`{"id":"Ann","name":"Ann"}`),
		Object: obj, Data: json.RawMessage(`{}`), OccurredAt: composeNow.Add(-time.Hour)})
	return fc
}

// TestDigestInGerman: a digest to a de-AT recipient is German throughout
// (lull's words, the types' texts from de, plural and list forms, dates),
// in both parts and the subject.
func TestDigestInGerman(t *testing.T) {
	t.Parallel()
	m := compose(t, envelope("k"), digestIn("de-AT"))
	for _, want := range []string{
		"Deine tägliche Zusammenfassung: 6 Neuigkeiten — Eva, Dan und 3 weitere: 5 Kommentare", // subject
	} {
		if m.Subject != want {
			t.Errorf("subject %q, want %q", m.Subject, want)
		}
	}
	for part, body := range map[string]string{"text": m.Text, "html": m.HTML} {
		for _, want := range []string{"6 Neuigkeiten seit Samstag", "Kommentare (5), Freigaben (1)", "Eva hat Plan kommentiert",
			"und 3 weitere", "5 insgesamt — die neuesten 2 werden gezeigt", "An ute@example.com gesendet", "Wähle, wie oft", "Abmelden",
			"Ann hat Budget freigegeben", "23.11., 07:56 CET"} {
			if !strings.Contains(body, want) {
				t.Errorf("%s part lacks %q", part, want)
			}
		}
		words := regexp.MustCompile(`<[^>]*>`).ReplaceAllString(body, " ") // what a reader sees
		for _, english := range regexp.MustCompile(`\b(updates?|since|Sent|Choose|Unsubscribe|commented|showing|more|View all)\b`).FindAllString(words, -1) {
			t.Errorf("%s part has English %q", part, english)
		}
	}
	if !strings.Contains(m.HTML, `<html lang="de" dir="ltr">`) {
		t.Error("the HTML part does not say it is German")
	}
}

// TestDigestInArabic: Arabic is right to left, with its own plural forms
// (three updates take the "few" form) and the type's Arabic texts where
// given.
func TestDigestInArabic(t *testing.T) {
	t.Parallel()
	fc := digestIn("ar")
	fc.Items = fc.Items[2:] // three comments and a share: 4 updates
	m := compose(t, envelope("k"), fc)
	if !strings.Contains(m.HTML, `<html lang="ar" dir="rtl">`) {
		t.Error("the HTML part is not right to left")
	}
	for _, want := range []string{"ملخصك اليومي", "تحديثات", "مشاركات", "إلغاء الاشتراك"} {
		if !strings.Contains(m.Text, want) || !strings.Contains(m.HTML, want) {
			t.Errorf("lacks %q", want)
		}
	}
	if !strings.Contains(m.Subject, "ملخصك اليومي") {
		t.Errorf("subject %q is not Arabic", m.Subject)
	}
}
