package web

import (
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/views"
)

// suppressionsPage is how many entries the console's list shows at once.
const suppressionsPage = 100

// adminSuppressions lists the suppression list, searched by address
// prefix, with forms to add an entry and to remove each.
func (s *Server) adminSuppressions(w http.ResponseWriter, r *http.Request) {
	prefix, after := r.URL.Query().Get("prefix"), r.URL.Query().Get("after")
	if len(prefix) > 320 || len(after) > 320 {
		s.pageError(w, r, Invalid(FieldError{"prefix", "is longer than 320 characters"}))
		return
	}
	ss, err := db.ListSuppressions(r.Context(), s.DB.Pool, prefix, after, suppressionsPage)
	if err != nil {
		s.pageError(w, r, err)
		return
	}
	v := views.SuppressionsView{AdminPage: s.adminPage(r, "Suppressions", "suppressions"), Prefix: prefix,
		Reasons: []views.Option{{Value: db.ReasonOperator, Label: "operator", Selected: true}, {Value: db.ReasonHardBounce, Label: "hard bounce"},
			{Value: db.ReasonSoftBounce, Label: "soft bounces"}, {Value: db.ReasonComplaint, Label: "complaint"}},
		Scopes: []views.Option{{Value: "", Label: "as the reason implies", Selected: true}, {Value: db.ScopeAll, Label: "all mail"},
			{Value: db.ScopeNonRequired, Label: "all but required types"}}}
	for _, e := range ss {
		row := views.SuppressionRow{Address: e.Address, Reason: e.Reason, Scope: e.Scope, Detail: e.Detail, Source: e.Source,
			CreatedBy: e.CreatedBy, When: fmtTime(&e.CreatedAt)}
		if e.BatchID > 0 {
			row.Batch = strconv.FormatInt(e.BatchID, 10)
		}
		v.Rows = append(v.Rows, row)
	}
	if len(ss) == suppressionsPage {
		v.NextURL = "/admin/suppressions?" + url.Values{"prefix": {prefix}, "after": {ss[len(ss)-1].Address}}.Encode()
	}
	s.render(w, r, http.StatusOK, views.Suppressions(v))
}

// adminSuppressionAdd adds an entry as the API does, checked the same
// way, and records it in the audit log.
func (s *Server) adminSuppressionAdd(w http.ResponseWriter, r *http.Request) {
	req := SuppressionRequest{Address: r.PostFormValue("address"), Reason: r.PostFormValue("reason"),
		Scope: r.PostFormValue("scope"), Detail: r.PostFormValue("detail")}
	sup, errs := req.suppression(operator(r))
	if len(errs) > 0 {
		s.flashRedirect(w, r, "Not added: "+errs[0].Field+" "+errs[0].Message+".", "/admin/suppressions")
		return
	}
	sup.Source = "console"
	err := s.DB.InTx(r.Context(), func(tx pgx.Tx) error {
		if _, _, err := db.AddSuppression(r.Context(), tx, sup, time.Now()); err != nil {
			return err
		}
		return db.Audit(r.Context(), tx, db.AuditEntry{Operator: operator(r), Action: "suppress", ObjectType: "suppression",
			ObjectID: db.NormalizeAddress(sup.Address), Detail: sup.Reason + ", " + sup.Scope})
	})
	if err != nil {
		s.pageError(w, r, err)
		return
	}
	s.flashRedirect(w, r, "Suppressed "+db.NormalizeAddress(sup.Address)+".", "/admin/suppressions")
}

// adminSuppressionRemove removes an entry and records it in the audit
// log. The address comes in the form, not the path: an address may hold
// a "/".
func (s *Server) adminSuppressionRemove(w http.ResponseWriter, r *http.Request) {
	address := r.PostFormValue("address")
	err := s.DB.InTx(r.Context(), func(tx pgx.Tx) error {
		gone, err := db.Unsuppress(r.Context(), tx, address)
		if err != nil {
			return err
		}
		return db.Audit(r.Context(), tx, db.AuditEntry{Operator: operator(r), Action: "unsuppress", ObjectType: "suppression",
			ObjectID: gone.Address, Detail: gone.Reason + ", " + gone.Scope})
	})
	switch {
	case err == nil:
		s.flashRedirect(w, r, "Removed "+db.NormalizeAddress(address)+": lull mails it again.", "/admin/suppressions")
	case isNotFound(err):
		s.flashRedirect(w, r, "Nothing done: "+db.NormalizeAddress(address)+" was not on the list.", "/admin/suppressions")
	default:
		s.pageError(w, r, err)
	}
}

// deliveryRateRows are the dashboard's rows of rates: all emails first,
// then each type.
func deliveryRateRows(rates []db.DeliveryRate) []views.RateRow {
	pct := func(f float64) string { return strconv.FormatFloat(100*f, 'f', 2, 64) + " %" }
	out := make([]views.RateRow, 0, len(rates))
	for _, r := range rates {
		t := r.Type
		if t == "" {
			t = "all"
		}
		out = append(out, views.RateRow{Type: t, Sent: strconv.FormatInt(r.Sent, 10),
			Bounce: pct(r.BounceRate()), BounceLevel: db.RateLevel(r.BounceRate()),
			Complaint: pct(r.ComplaintRate()), ComplaintLevel: db.RateLevel(r.ComplaintRate())})
	}
	return out
}
