package web

import (
	"net/http"
	"strings"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/mailtemplates"
	"github.com/lull-dev/lull/views"
)

func brandValues(b mailtemplates.Brand) map[string]string {
	return map[string]string{"product_name": b.ProductName, "product_url": b.ProductURL, "logo_url": b.LogoURL,
		"color": b.Color, "from_name": b.FromName}
}

// adminBrand shows the brand page: what the console saved, over the
// environment's defaults.
func (s *Server) adminBrand(w http.ResponseWriter, r *http.Request) {
	stored, err := s.Brands.Stored(r.Context())
	if err != nil {
		s.pageError(w, r, err)
		return
	}
	s.render(w, r, http.StatusOK, views.BrandEdit(s.brandView(r, brandValues(stored), nil)))
}

// adminBrandSave validates and stores the brand; every process uses it
// within seconds (see batching.Brands).
func (s *Server) adminBrandSave(w http.ResponseWriter, r *http.Request) {
	f := func(n string) string { return strings.TrimSpace(r.PostFormValue(n)) }
	b := mailtemplates.Brand{ProductName: f("product_name"), ProductURL: f("product_url"), LogoURL: f("logo_url"),
		Color: strings.ToLower(f("color")), FromName: f("from_name")}
	if errs := b.Check(); len(errs) > 0 {
		s.render(w, r, http.StatusUnprocessableEntity, views.BrandEdit(s.brandView(r, brandValues(b), errs)))
		return
	}
	if err := s.Brands.Save(r.Context(), b); err != nil {
		s.pageError(w, r, err)
		return
	}
	db.Audit(r.Context(), s.DB.Pool, db.AuditEntry{Operator: operator(r), Action: "edit brand", ObjectType: "settings", ObjectID: "brand"})
	s.flashRedirect(w, r, "Saved the brand.", "/admin/brand")
}

func (s *Server) brandView(r *http.Request, values, errs map[string]string) views.BrandView {
	v := views.BrandView{AdminPage: s.adminPage(r, "Brand", "brand"), Values: values, Errors: errs}
	if s.Brands != nil {
		v.Defaults = brandValues(s.Brands.Defaults)
	}
	if types, err := db.ListTypes(r.Context(), s.DB.Bun); err == nil && len(types) > 0 {
		v.PreviewURL = "/admin/types/" + types[0].Key + "/preview/html"
	}
	return v
}
