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
		if !strings.Contains(body, "Kommentare: 5 Neuigkeiten") {
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
