package batching

import (
	"strings"
	"testing"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/mailtemplates"
)

// TestDefaultGroupTextInRecipientLanguage: a type saved without a
// group_text is stored with the English default built from its name
// ("Comments: 1 new|Comments: {{count}} new"). A German recipient must not
// read that: the heading is built in German from the type's German name.
func TestDefaultGroupTextInRecipientLanguage(t *testing.T) {
	t.Parallel()
	fc := digestIn("de-AT")
	c := fc.Types["comment"]
	c.GroupText = mailtemplates.DefaultGroupText(c.Name)
	c.Texts = map[string]db.TypeTexts{"de": {Name: "Kommentare"}}
	m := compose(t, envelope("k"), fc)
	for part, body := range map[string]string{"text": m.Text, "html": m.HTML} {
		if !strings.Contains(body, "Kommentare: 5 neu") {
			t.Errorf("%s part lacks the German heading:\n%s", part, body)
		}
		if strings.Contains(body, "new") || strings.Contains(body, "Comments") {
			t.Errorf("%s part has the English default heading", part)
		}
	}
	// English keeps the heading it always had.
	fc = digestIn("en")
	c = fc.Types["comment"]
	c.GroupText = mailtemplates.DefaultGroupText(c.Name)
	if m := compose(t, envelope("k"), fc); !strings.Contains(m.Text, "Comments: 5 new") {
		t.Errorf("English heading changed:\n%s", m.Text)
	}
}

// TestTypeTextSingularFollowsItsLanguage: a type's group_text has two
// forms, "one|other". In Russian the singular also serves 21, 31, 101
// ("21 новый комментарий"), so the form is picked by the plural rules of
// the locale the text was given in; the type's own texts keep "1 only".
func TestTypeTextSingularFollowsItsLanguage(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		locale string
		n      int
		want   string
	}{
		{"ru", 21, "21 новый комментарий"},
		{"ru", 25, "25 новых комментариев"},
		{"ru", 1, "1 новый комментарий"},
		{"en", 21, "21 new comments"},
		{"en", 1, "1 new comment"},
	} {
		fc := digestIn(c.locale)
		comment := fc.Types["comment"]
		comment.GroupText = "{{count}} new comment|{{count}} new comments"
		comment.Texts = map[string]db.TypeTexts{"ru": {GroupText: "{{count}} новый комментарий|{{count}} новых комментариев"}}
		first := fc.Items[0]
		fc.Items = fc.Items[:0]
		for i := range c.n {
			it := first
			it.NotificationID = int64(100 + i)
			fc.Items = append(fc.Items, it)
		}
		fc.Batch.Mode = "cooldown"
		m := compose(t, envelope("k"), fc)
		if !strings.Contains(m.Text, c.want) {
			t.Errorf("%s, %d comments: email lacks %q:\n%s", c.locale, c.n, c.want, m.Text)
		}
	}
}
