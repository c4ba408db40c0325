package web_test

import "testing"

// TestTypeTextsLocaleNullIsRefused: openapi.json says each locale of a
// type's texts is an object; a null one was taken as "no texts", so the
// API accepted a body its own contract refuses. It is a 422 naming the
// locale.
func TestTypeTextsLocaleNullIsRefused(t *testing.T) {
	t.Parallel()
	a := setupAPI(t)
	if got, p := a.call(t, "PUT", "/api/v1/types/t1", `{"texts":{"de":null}}`); got != 422 || fieldOf(p) != "texts.de" {
		t.Errorf("texts.de null: %d %v, want 422 naming texts.de", got, p)
	}
}

// TestTypeTextsNullMeansNone: "texts": null, as many JSON encoders write
// an empty map, is a type without texts per locale, and openapi.json
// says so.
func TestTypeTextsNullMeansNone(t *testing.T) {
	t.Parallel()
	a := setupAPI(t)
	a.mustCall(t, "PUT", "/api/v1/types/t1", `{"texts":null}`, 200)
}
