package web

import (
	"cmp"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/i18n"
	"github.com/lull-dev/lull/mailtemplates"
	"github.com/lull-dev/lull/preferences"
	"github.com/lull-dev/lull/views"
)

func (s *Server) typeEditPage(w http.ResponseWriter, r *http.Request) {
	t, err := db.GetType(r.Context(), s.DB.Pool, r.PathValue("key"))
	if err != nil {
		s.pageError(w, r, err)
		return
	}
	b := typeBody(t)
	raw := map[string]string{"max_items": strconv.Itoa(b.MaxItems), "display_limit": strconv.Itoa(b.DisplayLimit)}
	s.render(w, r, http.StatusOK, views.TypeEdit(s.typeEditView(r, b, raw, nil)))
}

// typeEditSave validates the form with the API's rules. "Preview" shows
// the unsaved texts in the frame; "Save" stores them and is audited.
func (s *Server) typeEditSave(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("key")
	old, err := db.GetType(r.Context(), s.DB.Pool, key)
	if err != nil {
		s.pageError(w, r, err)
		return
	}
	f := func(n string) string { return strings.TrimSpace(r.PostFormValue(n)) }
	b := TypeBody{Key: key, Name: f("name"), Description: f("description"), Category: f("category"), DefaultMode: f("default_mode"),
		Window: f("window"), MaxWait: f("max_wait"), ItemOrder: f("item_order"), ItemText: f("item_text"), GroupText: f("group_text"),
		Required: f("required") == "on", Lead: f("lead") == "on", Texts: formTexts(r)}
	// The form shows the default group_text built from the stored name;
	// left as it is, it follows a new name, as an API save's does.
	if b.GroupText == mailtemplates.DefaultGroupText(old.Name) {
		b.GroupText = ""
	}
	var errs []FieldError
	if b.Name == "" {
		errs = append(errs, FieldError{"name", "must not be empty"})
	}
	// Only cool-down batches wait: for another mode the page hides these
	// fields, so what they hold is kept, not judged.
	if b.DefaultMode != "cooldown" {
		b.Window, b.MaxWait = preferences.FormatDuration(old.Window()), preferences.FormatDuration(old.MaxWait())
	}
	raw := map[string]string{"max_items": f("max_items"), "display_limit": f("display_limit")}
	if b.MaxItems, err = strconv.Atoi(f("max_items")); err != nil {
		errs = append(errs, FieldError{"max_items", "must be a whole number"})
	}
	if b.DisplayLimit, err = strconv.Atoi(f("display_limit")); err != nil {
		errs = append(errs, FieldError{"display_limit", "must be a whole number"})
	}
	t, more := TypeFromBody(key, b)
	errs = append(errs, more...)
	if len(errs) > 0 || f("do") == "preview" {
		status := http.StatusOK
		if len(errs) > 0 {
			status = http.StatusUnprocessableEntity
		}
		s.render(w, r, status, views.TypeEdit(s.typeEditView(r, b, raw, errs)))
		return
	}
	// The form does not edit these; the API does.
	t.BurstLimit, t.SkipRead, t.ViewURL = old.BurstLimit, old.SkipRead, old.ViewURL
	if b.Texts == nil {
		t.Texts = old.Texts // a form without the language fields
	}
	t.Unsubscribe, t.SharedDelivery, t.DailyBudget = old.Unsubscribe, old.SharedDelivery, old.DailyBudget
	if !t.Required {
		t.CatchUpDays = old.CatchUpDays // a required type is never slowed
	}
	if err := s.Engine.SaveType(r.Context(), t); err != nil {
		s.pageError(w, r, err)
		return
	}
	db.Audit(r.Context(), s.DB.Pool, db.AuditEntry{Operator: operator(r), Action: "edit type", ObjectType: "type", ObjectID: key})
	s.flashRedirect(w, r, "Saved type "+key+".", "/admin/types/"+key+"/edit")
}

// typeEditView fills the form; raw holds the number fields as typed, so a
// value that is not a number comes back as it was, next to its error.
func (s *Server) typeEditView(r *http.Request, b TypeBody, raw map[string]string, errs []FieldError) views.TypeEditView {
	v := views.TypeEditView{AdminPage: s.adminPage(r, "Type "+b.Key, "types"), Key: b.Key, Name: b.Name, Description: b.Description,
		Category: b.Category, Required: b.Required, Lead: b.Lead, Window: b.Window, MaxWait: b.MaxWait,
		MaxItems: raw["max_items"], DisplayLimit: raw["display_limit"], ItemText: b.ItemText, GroupText: b.GroupText,
		Errors: map[string]string{}}
	for _, e := range errs {
		v.Errors[e.Field] = e.Message
	}
	for _, m := range []string{"immediate", "cooldown", "hourly", "daily", "weekly", "monthly", "never"} {
		v.Modes = append(v.Modes, views.Option{Value: m, Label: m, Selected: m == b.DefaultMode})
	}
	for _, o := range []string{"latest", "first"} {
		v.Orders = append(v.Orders, views.Option{Value: o, Label: o + " items", Selected: o == b.ItemOrder})
	}
	q := url.Values{"item_text": {b.ItemText}, "group_text": {b.GroupText}, "display_limit": {strconv.Itoa(b.DisplayLimit)}, "item_order": {b.ItemOrder}}
	// The frame previews in the language picked, with that language's
	// unsaved texts; a bad pick previews in the default.
	locale, _ := i18n.Parse(strings.TrimSpace(r.FormValue("preview_locale")))
	if locale != "" {
		lt := b.Texts[locale]
		q.Set("locale", locale)
		q.Set("locale_name", lt.Name)
		q.Set("locale_item_text", lt.ItemText)
		q.Set("locale_group_text", lt.GroupText)
	}
	v.PreviewURL = "/admin/types/" + b.Key + "/preview/html?" + q.Encode()
	v.Locales, v.WithTexts = localeRows(b.Key, b.Texts)
	v.PreviewLocales = localeOptions("Default ("+cmp.Or(s.DefaultLocale, "en")+")", locale)
	return v
}

// formTexts reads the editor's texts per locale, from fields named
// texts.TAG.FIELD; TypeFromBody checks them as the API does, and drops a
// locale whose fields are all empty. A form with no such field at all
// gives nil, and the stored texts stay.
func formTexts(r *http.Request) LocaleTexts {
	var out LocaleTexts
	for name, values := range r.PostForm {
		tag, field, ok := strings.Cut(strings.TrimPrefix(name, "texts."), ".")
		if !ok || !strings.HasPrefix(name, "texts.") {
			continue
		}
		tt, v := out[tag], strings.TrimSpace(values[0])
		switch field {
		case "name":
			tt.Name = v
		case "description":
			tt.Description = v
		case "item_text":
			tt.ItemText = v
		case "group_text":
			tt.GroupText = v
		default:
			continue
		}
		if out == nil {
			out = LocaleTexts{}
		}
		out[tag] = tt
	}
	return out
}

// localeRows lays out a type's texts per locale for the editor: every
// shipped locale, then any other the type has texts for (de-AT), and
// names those that have texts.
func localeRows(key string, texts LocaleTexts) ([]views.TypeLocaleTexts, string) {
	var tags []string
	for _, t := range i18n.Shipped() {
		tags = append(tags, t.String())
	}
	for _, tag := range slices.Sorted(maps.Keys(texts)) {
		if !slices.Contains(tags, tag) {
			tags = append(tags, tag)
		}
	}
	var rows []views.TypeLocaleTexts
	var with []string
	for _, tag := range tags {
		tt := texts[tag]
		row := views.TypeLocaleTexts{Tag: tag, Label: localeName(tag), Name: tt.Name, Description: tt.Description,
			ItemText: tt.ItemText, GroupText: tt.GroupText, HasTexts: tt != db.TypeTexts{},
			PreviewURL: "/admin/types/" + key + "/preview?" + url.Values{"locale": {tag}}.Encode()}
		if row.HasTexts {
			with = append(with, row.Label)
		}
		rows = append(rows, row)
	}
	if len(with) == 0 {
		return rows, "none: every language reads the type's own texts"
	}
	return rows, strings.Join(with, ", ")
}

// adminRecipient looks a recipient up by id.
func (s *Server) adminRecipient(w http.ResponseWriter, r *http.Request) {
	id := strings.TrimSpace(r.URL.Query().Get("id"))
	v := views.RecipientView{AdminPage: s.adminPage(r, "Recipients", "recipients"), Query: id}
	if id == "" {
		s.render(w, r, http.StatusOK, views.Recipient(v))
		return
	}
	ctx := r.Context()
	rec, prefs, err := s.loadPreferences(ctx, id)
	if err != nil && !isNotFound(err) {
		s.pageError(w, r, err)
		return
	}
	if rec != nil {
		v.Found = true
		b := preferencesBody(rec, prefs)
		v.Details = []views.Stat{{Label: "Email", Value: rec.Email}, {Label: "Name", Value: rec.Name},
			{Label: "Time zone", Value: rec.Timezone},
			{Label: "Active", Value: yesNo(rec.Active), Note: pick(rec.Active, "the application lets lull email them", "the application turned their email off")},
			{Label: "Unsubscribed", Value: yesNo(rec.Unsubscribed), Note: pick(rec.Unsubscribed, "only required types reach them", "they get what their preferences say")}}
		v.SettingsURL, _ = s.Links.SettingsURL(rec.ID, s.now())
		v.BatchesURL = "/admin/batches?" + url.Values{"recipient": {rec.ID}}.Encode()
		v.Prefs = []views.Stat{{Label: "Daily digest", Value: b.Digest.DailyAt}, {Label: "Weekly digest", Value: b.Digest.WeeklyOn + " " + b.Digest.WeeklyAt}}
		if b.QuietHours != nil {
			v.Prefs = append(v.Prefs, views.Stat{Label: "Quiet hours", Value: b.QuietHours.Start + "–" + b.QuietHours.End})
		}
		for k, p := range b.Types {
			v.Prefs = append(v.Prefs, views.Stat{Label: k, Value: p.Mode, Note: strings.TrimSpace(p.Window + " " + p.MaxWait)})
		}
		bs, err := db.ListBatches(ctx, s.DB.Pool, db.BatchFilter{Recipient: id, Limit: 50})
		if err != nil {
			s.pageError(w, r, err)
			return
		}
		for _, bt := range bs {
			v.Batches = append(v.Batches, batchRow(bt, s.now()))
		}
		skips, err := db.ListSkips(ctx, s.DB.Pool, 0, id, 50)
		if err != nil {
			s.pageError(w, r, err)
			return
		}
		v.Skips = skipRows(skips)
	}
	s.render(w, r, http.StatusOK, views.Recipient(v))
}

func yesNo(b bool) string { return pick(b, "Yes", "No") }

func pick(b bool, yes, no string) string {
	if b {
		return yes
	}
	return no
}
