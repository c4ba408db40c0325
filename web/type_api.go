package web

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/i18n"
	"github.com/lull-dev/lull/mailtemplates"
	"github.com/lull-dev/lull/preferences"
	"github.com/lull-dev/lull/preferences/batching"
)

// TypeBody is a notification type as the API shows and accepts it.
type TypeBody struct {
	Key          string `json:"key"`
	Name         string `json:"name"`
	Description  string `json:"description"`
	Category     string `json:"category"`
	Required     bool   `json:"required"`
	DefaultMode  string `json:"default_mode"`
	Window       string `json:"window"`
	MaxWait      string `json:"max_wait"`
	Lead         bool   `json:"lead"`
	MaxItems     int    `json:"max_items"`
	DisplayLimit int    `json:"display_limit"`
	ItemOrder    string `json:"item_order"`
	ItemText     string `json:"item_text"`
	GroupText    string `json:"group_text"`
	// ViewURL is where an email's "View all" leads, a type text such as
	// "https://app.example/docs/{{object.id}}/comments"; empty for the
	// object's own URL.
	ViewURL    string `json:"view_url"`
	BurstLimit *int   `json:"burst_limit,omitempty"`
	// SkipRead (default true) drops notifications read in the app from
	// the email that would carry them.
	SkipRead *bool `json:"skip_read,omitempty"`
	// Texts are the type's name, description and texts per locale, such as
	// {"de": {"item_text": "..."}}; what a locale leaves out falls back.
	Texts LocaleTexts `json:"texts,omitempty"`
	// Unsubscribe is what an email's one-click link stops: "type" (the
	// default) or "thread", the email's batch.
	Unsubscribe string `json:"unsubscribe"`
	// Budget is the daily email budget of recipients who set none of
	// their own, when an email of this type is due; absent or null
	// follows LULL_DAILY_EMAIL_BUDGET, 0 is no limit.
	Budget *int `json:"budget"`
	// SharedDelivery sends recipients due at the same moment with the
	// same email one message, each an envelope recipient (README).
	SharedDelivery bool `json:"shared_delivery"`
	// CatchUp slows the type to a weekly digest for a recipient not seen
	// for that long, "7d" (1d to 365d); absent or "" is off (README).
	CatchUp string `json:"catch_up,omitempty"`
}

// LocaleTexts decodes each locale's texts on its own, so an unknown or
// mistyped field is named with its locale ("texts.de.nmae"), not alone.
type LocaleTexts map[string]db.TypeTexts

func (lt *LocaleTexts) UnmarshalJSON(b []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	out := make(LocaleTexts, len(raw))
	v := &batching.ValidationError{}
	for _, tag := range slices.Sorted(maps.Keys(raw)) {
		r := raw[tag]
		var tt db.TypeTexts
		dec := json.NewDecoder(bytes.NewReader(r))
		dec.DisallowUnknownFields()
		err := dec.Decode(&tt)
		if err == nil && bytes.Equal(bytes.TrimSpace(r), []byte("null")) {
			err = errors.New("null") // openapi.json: an object, never null
		}
		if err != nil {
			fe, ok := decodeFieldError(err)
			if !ok {
				fe.Message = "must be an object of name, description, item_text and group_text"
			}
			v.Add(strings.TrimSuffix("texts."+clip(tag, 40)+"."+fe.Field, "."), fe.Message)
			continue
		}
		out[tag] = tt
	}
	*lt = out
	return v.Err()
}

// maxCount bounds max_items and burst_limit.
const maxCount = 1_000_000

var typeKeyPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9._:-]{0,99}$`)

func typeBody(t *db.Type) TypeBody {
	bl := t.BurstLimit
	return TypeBody{
		Key: t.Key, Name: t.Name, Description: t.Description, Category: t.Category, Required: t.Required,
		DefaultMode: t.DefaultMode, Window: preferences.FormatDuration(t.Window()), MaxWait: preferences.FormatDuration(t.MaxWait()),
		Lead: t.Lead, MaxItems: t.MaxItems, DisplayLimit: t.DisplayLimit, ItemOrder: t.ItemOrder,
		ItemText: t.ItemText, GroupText: t.GroupText, ViewURL: t.ViewURL, BurstLimit: &bl, SkipRead: &t.SkipRead, Texts: t.Texts,
		Unsubscribe: t.Unsubscribe, Budget: t.DailyBudget, SharedDelivery: t.SharedDelivery, CatchUp: formatCatchUp(t.CatchUpDays),
	}
}

// TypeFromBody validates a type body and fills the defaults of
// DESIGN.md: display limit 10, latest items first, a cooldown of 5 minutes
// capped at an hour, and texts built from the type's name.
func TypeFromBody(key string, b TypeBody) (*db.Type, []FieldError) {
	var errs []FieldError
	add := func(f, m string) { errs = append(errs, FieldError{f, m}) }
	if !typeKeyPattern.MatchString(key) {
		add("key", "must be 1-100 lowercase letters, digits, '.', '_', ':' or '-', such as comment.created")
	}
	if key == preferences.HeldKey {
		// Its batches would share the held digest's key, and a fold
		// would land in them.
		add("key", "is the held digest's batch key, which no type may take")
	}
	t := &db.Type{Key: key, Name: b.Name, Description: b.Description, Category: b.Category, Required: b.Required,
		Lead: b.Lead, MaxItems: b.MaxItems, DisplayLimit: b.DisplayLimit, ItemOrder: b.ItemOrder,
		ItemText: b.ItemText, GroupText: b.GroupText, ViewURL: b.ViewURL, DefaultMode: b.DefaultMode, BurstLimit: 5, SkipRead: b.SkipRead == nil || *b.SkipRead}
	if t.Name == "" {
		t.Name = key
	}
	switch t.Unsubscribe = b.Unsubscribe; t.Unsubscribe {
	case "":
		t.Unsubscribe = "type"
	case "type", "thread":
	default:
		add("unsubscribe", `must be "type" or "thread"`)
	}
	if t.SharedDelivery = b.SharedDelivery; t.SharedDelivery && t.Unsubscribe == "thread" {
		// One email for many cannot carry each recipient's own link to
		// stop its thread.
		add("shared_delivery", `cannot be true with unsubscribe "thread": a shared email cannot carry each recipient's link to stop one conversation; use unsubscribe "type"`)
	}
	if t.DefaultMode == "" {
		t.DefaultMode = string(preferences.Immediate)
	} else if _, err := preferences.ParseMode(t.DefaultMode); err != nil {
		add("default_mode", err.Error())
	}
	window, maxWait := "5m", "1h"
	if b.Window != "" {
		window = b.Window
	}
	if b.MaxWait != "" {
		maxWait = b.MaxWait
	}
	if d, err := preferences.ParseWindow(window); err != nil {
		add("window", err.Error())
	} else {
		t.WindowMS = d.Milliseconds()
	}
	if d, err := preferences.ParseMaxWait(maxWait); err != nil {
		add("max_wait", err.Error())
	} else {
		t.MaxWaitMS = d.Milliseconds()
	}
	checkLength(add, "name", b.Name, 200)
	checkLength(add, "category", b.Category, 100)
	checkLength(add, "description", b.Description, 1000)
	// Counts are stored as 32-bit integers; the bounds are far below that
	// and far above any sensible setting.
	if t.MaxItems < 0 || t.MaxItems > maxCount {
		add("max_items", fmt.Sprintf("must be from 0 (no limit) to %d", maxCount))
	}
	switch {
	case t.DisplayLimit == 0:
		t.DisplayLimit = 10
	case t.DisplayLimit < 1 || t.DisplayLimit > 100:
		add("display_limit", "must be from 1 to 100")
	}
	switch t.ItemOrder {
	case "":
		t.ItemOrder = "latest"
	case "first", "latest":
	default:
		add("item_order", "must be first or latest")
	}
	if b.BurstLimit != nil {
		if *b.BurstLimit < 0 || *b.BurstLimit > maxCount {
			add("burst_limit", fmt.Sprintf("must be from 0 (off) to %d", maxCount))
		}
		t.BurstLimit = *b.BurstLimit
	}
	if t.ItemText == "" {
		t.ItemText = mailtemplates.DefaultItemText()
	} else if err := mailtemplates.ValidateItemText(t.ItemText); err != nil {
		add("item_text", err.Error())
	}
	if t.GroupText == "" {
		t.GroupText = mailtemplates.DefaultGroupText(t.Name)
	} else if err := mailtemplates.ValidateGroupText(t.GroupText); err != nil {
		add("group_text", err.Error())
	}
	if t.ViewURL != "" {
		if err := mailtemplates.ValidateViewURL(t.ViewURL); err != nil {
			add("view_url", err.Error())
		}
	}
	if b.Budget != nil {
		if msg := checkBudget(*b.Budget); msg != "" {
			add("budget", msg)
		}
		n := *b.Budget
		t.DailyBudget = &n
	}
	if b.CatchUp != "" {
		n, msg := parseCatchUp(b.CatchUp)
		if msg == "" && t.Required {
			msg = "cannot be set on a required type: required emails are never slowed"
		}
		if msg != "" {
			add("catch_up", msg)
		}
		t.CatchUpDays = &n
	}
	t.Texts = localeTexts(b.Texts, add)
	return t, errs
}

var catchUpPattern = regexp.MustCompile(`^([0-9]{1,3})d$`)

// parseCatchUp reads a catch-up period, whole days such as "7d": absence
// is measured in days, and a finer period would slow a recipient who
// merely slept.
func parseCatchUp(s string) (int, string) {
	m := catchUpPattern.FindStringSubmatch(s)
	if m == nil {
		return 0, fmt.Sprintf("%q is not a number of days such as \"7d\"", clip(s, 40))
	}
	n, _ := strconv.Atoi(m[1])
	if n < 1 || n > 365 {
		return 0, "must be from 1d to 365d"
	}
	return n, ""
}

func formatCatchUp(days *int) string {
	if days == nil {
		return ""
	}
	return strconv.Itoa(*days) + "d"
}

// maxLocales bounds a type's locale texts; real products speak a few
// dozen languages at most.
const maxLocales = 100

// localeTexts checks a type's texts per locale as the type's own are
// checked, keyed by canonical tag ("de-at" is stored as "de-AT"), and
// drops locales that give no text at all.
func localeTexts(in map[string]db.TypeTexts, add func(field, msg string)) map[string]db.TypeTexts {
	if len(in) > maxLocales {
		add("texts", fmt.Sprintf("has %d locales; at most %d are allowed", len(in), maxLocales))
		return nil
	}
	out := make(map[string]db.TypeTexts, len(in))
	for _, tag := range slices.Sorted(maps.Keys(in)) {
		tt := in[tag]
		field := "texts." + clip(tag, 40)
		canon, err := i18n.Parse(tag)
		switch {
		case err != nil || canon == "":
			add(field, "is not a BCP 47 language tag such as \"de\" or \"pt-BR\"")
			continue
		case out[canon] != (db.TypeTexts{}):
			add(field, "is given twice ("+canon+")")
			continue
		case tt == (db.TypeTexts{}):
			continue
		}
		checkLength(add, field+".name", tt.Name, 200)
		checkLength(add, field+".description", tt.Description, 1000)
		if tt.ItemText != "" {
			if err := mailtemplates.ValidateItemText(tt.ItemText); err != nil {
				add(field+".item_text", err.Error())
			}
		}
		if tt.GroupText != "" {
			if err := mailtemplates.ValidateGroupText(tt.GroupText); err != nil {
				add(field+".group_text", err.Error())
			}
		}
		out[canon] = tt
	}
	return out
}

func checkLength(add func(field, msg string), field, value string, max int) {
	if n := utf8.RuneCountInString(value); n > max {
		add(field, fmt.Sprintf("is %d characters long; at most %d are allowed", n, max))
	}
}

// clip shortens a client's string for an error message.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

func (s *Server) listTypes(w http.ResponseWriter, r *http.Request) {
	ts, err := db.ListTypes(r.Context(), s.DB.Bun)
	if err != nil {
		s.problem(w, r, err)
		return
	}
	out := make([]TypeBody, len(ts))
	for i := range ts {
		out[i] = typeBody(&ts[i])
	}
	writeJSON(w, http.StatusOK, map[string]any{"types": out})
}

func (s *Server) getType(w http.ResponseWriter, r *http.Request) {
	t, err := db.GetType(r.Context(), s.DB.Pool, r.PathValue("key"))
	if err != nil {
		s.problem(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, typeBody(t))
}

func (s *Server) putType(w http.ResponseWriter, r *http.Request) {
	var b TypeBody
	if err := decodeJSON(w, r, &b); err != nil {
		s.problem(w, r, err)
		return
	}
	key := r.PathValue("key")
	if b.Key != "" && b.Key != key {
		s.problem(w, r, Invalid(FieldError{"key", "differs from the key in the URL"}))
		return
	}
	t, errs := TypeFromBody(key, b)
	if len(errs) > 0 {
		s.problem(w, r, Invalid(errs...))
		return
	}
	if err := s.Engine.SaveType(r.Context(), t); err != nil {
		s.problem(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, typeBody(t))
}
