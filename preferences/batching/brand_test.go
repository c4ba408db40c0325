package batching

import (
	"testing"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/db/dbtest"
	"github.com/lull-dev/lull/mailtemplates"
)

// TestBrandInUseIsChecked: a brand field stored before a check existed
// (a product link with a user name, which reads as one host and leads to
// another), or written to the database past the console, reached every
// email and recipient page, where the pages link it as it is. The brand
// in use now leaves out what Check refuses, falling back to the
// environment's value.
func TestBrandInUseIsChecked(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx := t.Context()
	err := db.SaveBrandSettings(ctx, d.Pool, map[string]string{"product_name": "Acme\u202e Docs",
		"product_url": "https://docs.acme.example@evil.example/", "logo_url": "javascript:alert(1)", "color": "#ffff00", "from_name": "Acme"})
	if err != nil {
		t.Fatal(err)
	}
	b := &Brands{DB: d.Pool, Defaults: mailtemplates.Brand{ProductURL: "https://docs.acme.example/"}}
	want := mailtemplates.Brand{ProductURL: "https://docs.acme.example/", FromName: "Acme"}
	if got := b.Get(ctx); got != want {
		t.Errorf("brand in use %+v, want %+v", got, want)
	}
}
