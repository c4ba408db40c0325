package web_test

import (
	"testing"
)

// TestRecipientLocaleIsValidated stores a recipient's locale in canonical
// BCP 47 form and refuses what is not a language tag, naming the field.
func TestRecipientLocaleIsValidated(t *testing.T) {
	t.Parallel()
	a := setupAPI(t)
	for _, bad := range []string{`"english!"`, `"und"`, `"` + string(make([]byte, 0)) + `x"`} {
		if got, p := a.call(t, "PUT", "/api/v1/recipients/u_loc", `{"locale":`+bad+`}`); got != 422 || fieldOf(p) != "locale" {
			t.Errorf("locale %s: status %d, field %q, want 422 naming locale: %v", bad, got, fieldOf(p), p)
		}
	}
	p := a.mustCall(t, "PUT", "/api/v1/recipients/u_loc", `{"locale":"de-at"}`, 200)
	if p["locale"] != "de-AT" {
		t.Fatalf("stored locale %v, want de-AT", p["locale"])
	}
	a.mustCall(t, "PUT", "/api/v1/recipients/u_loc", `{"locale":null}`, 200)
}

// TestTypeTextsPerLocale accepts a type's texts per locale with the same
// placeholder checks as its own texts, each error naming the locale and
// the field, and keys them by canonical tag.
func TestTypeTextsPerLocale(t *testing.T) {
	t.Parallel()
	a := setupAPI(t)
	cases := []struct{ body, field string }{
		{`{"texts":{"de":{"item_text":"{{actor.nam}} hat kommentiert"}}}`, "texts.de.item_text"},
		{`{"texts":{"de":{"group_text":"{{count}"}}}`, "texts.de.group_text"},
		{`{"texts":{"not a tag":{"name":"x"}}}`, "texts.not a tag"},
		{`{"texts":{"de":{"nmae":"x"}}}`, "texts.de.nmae"},
		{`{"texts":{"de":{"name":"` + string(make([]byte, 0)) + `"},"fr":{"description":7}}}`, "texts.fr.description"},
	}
	for _, c := range cases {
		got, p := a.call(t, "PUT", "/api/v1/types/comment", c.body)
		if got != 422 || fieldOf(p) != c.field {
			t.Errorf("%s: status %d, field %q, want 422 naming %s: %v", c.body, got, fieldOf(p), c.field, p)
		}
	}
	p := a.mustCall(t, "PUT", "/api/v1/types/comment", `{"name":"Comments","texts":{
		"de-at":{"name":"Kommentare","item_text":"{{actor.name}} hat {{object.title}} kommentiert"},
		"ar":{"group_text":"{{actors}} علّقوا"},
		"fr":{}}}`, 200)
	texts, _ := p["texts"].(map[string]any)
	if _, ok := texts["de-AT"]; !ok || len(texts) != 2 {
		t.Fatalf("texts %v, want de-AT and ar (fr gave nothing)", texts)
	}
	p = a.mustCall(t, "GET", "/api/v1/types/comment", "", 200)
	if de, _ := p["texts"].(map[string]any)["de-AT"].(map[string]any); de["name"] != "Kommentare" {
		t.Fatalf("read back %v", p["texts"])
	}
}
