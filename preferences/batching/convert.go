package batching

import (
	"encoding/json"
	"errors"
	"sort"
	"time"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/i18n"
	"github.com/lull-dev/lull/mailtemplates"
	"github.com/lull-dev/lull/preferences"
)

// TypeDefaults is a stored type's settings as the rules see them.
func TypeDefaults(t *db.Type) preferences.TypeDefaults {
	return preferences.TypeDefaults{
		Required: t.Required,
		Mode:     preferences.Mode(t.DefaultMode),
		Window:   t.Window(),
		MaxWait:  t.MaxWait(),
		Lead:     t.Lead,
	}
}

// Override is a stored preference as the rules see it; nil stays nil.
func Override(p *db.TypePreference) *preferences.Override {
	if p == nil {
		return nil
	}
	o := &preferences.Override{Mode: preferences.Mode(p.Mode), Lead: p.Lead}
	if p.WindowMS != nil {
		d := time.Duration(*p.WindowMS) * time.Millisecond
		o.Window = &d
	}
	if p.MaxWaitMS != nil {
		d := time.Duration(*p.MaxWaitMS) * time.Millisecond
		o.MaxWait = &d
	}
	return o
}

// Schedule is a recipient's calendar as the rules see it. An unknown zone
// (which validation keeps out) falls back to UTC rather than failing a flush.
func Schedule(r *db.Recipient) preferences.Schedule {
	loc := preferences.Location(r.Timezone)
	s := preferences.Schedule{
		Location: loc,
		DailyAt:  preferences.TimeOfDay(r.DailyAt),
		WeeklyOn: time.Weekday(r.WeeklyOn),
		WeeklyAt: preferences.TimeOfDay(r.WeeklyAt),
		// Out-of-range bits cannot be stored (a CHECK keeps 0..127).
		WeeklyDays: preferences.WeekdaySet(r.WeeklyDays),
		EveryHours: r.EveryHours,
		MonthlyDay: r.MonthlyDay,
		MonthlyAt:  preferences.TimeOfDay(r.MonthlyAt),
	}
	if r.QuietStart != nil && r.QuietEnd != nil {
		s.Quiet = preferences.QuietHours{Start: preferences.TimeOfDay(*r.QuietStart), End: preferences.TimeOfDay(*r.QuietEnd), Enabled: true}
	}
	return s
}

// TemplateType is a stored type as email shows it, in its own texts.
func TemplateType(t *db.Type) mailtemplates.Type { return TemplateTypeIn(t, nil) }

// TemplateTypeIn is TemplateType in a language: each text from the most
// specific locale of chain that has it (i18n.Locale.TextChain), else the
// type's own.
func TemplateTypeIn(t *db.Type, chain []string) mailtemplates.Type {
	tx := t.TextsIn(chain)
	// A type saved without a group_text holds the English default built
	// from its name; left empty, the email builds it in its own language
	// from the name in that language.
	if tx.GroupText == t.GroupText && t.GroupText == mailtemplates.DefaultGroupText(t.Name) {
		tx.GroupText = ""
	}
	return mailtemplates.Type{Key: t.Key, Name: tx.Name, Category: t.Category, ItemText: tx.ItemText, GroupText: tx.GroupText,
		DisplayLimit: t.DisplayLimit, ItemOrder: t.ItemOrder, ViewURL: t.ViewURL, GroupTextLocale: t.GroupTextLocale(chain)}
}

// input is the view model of a batch's email: one group per type,
// ordered by type name. Every item's type must be in types. Sender,
// Message-ID, date and links are Envelope.Address's to fill.
func input(b *db.Batch, rec *db.Recipient, items []db.Item, types map[string]*db.Type, lang i18n.Locale) mailtemplates.Input {
	in := mailtemplates.Input{
		BatchID:   b.ID,
		Mode:      b.Mode,
		Recipient: mailtemplates.Recipient{ID: rec.ID, Name: rec.Name, Email: rec.Email, Location: preferences.Location(rec.Timezone)},
		Since:     b.OpenedAt,
		Locale:    lang,
	}
	byType := map[string][]db.Item{}
	for _, it := range items {
		byType[it.TypeKey] = append(byType[it.TypeKey], it)
	}
	for key, items := range byType {
		in.Groups = append(in.Groups, Group(TemplateTypeIn(types[key], lang.TextChain()), items))
	}
	sort.Slice(in.Groups, func(i, j int) bool {
		a, b := in.Groups[i].Type, in.Groups[j].Type
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return a.Key < b.Key
	})
	return in
}

// Group turns one type's items (in arrival order) into the group an email
// shows: its true total, its distinct actors (newest first) and at most
// t.DisplayLimit items in t.ItemOrder. The feed's headings are made from
// groups built here too, so they read as the email's do.
func Group(t mailtemplates.Type, items []db.Item) mailtemplates.Group {
	g := mailtemplates.Group{Type: t, Total: len(items)}
	actors := make([]mailtemplates.Actor, len(items))
	seen := map[string]bool{}
	for i := len(items) - 1; i >= 0; i-- {
		a := decodeActor(items[i].Actor)
		actors[i] = a
		key := a.ID
		if key == "" {
			key = a.Name
		}
		if key == "" || seen[key] {
			continue
		}
		seen[key] = true
		g.ActorCount++
		if len(g.ActorNames) < 3 && a.Name != "" {
			g.ActorNames = append(g.ActorNames, a.Name)
		}
	}
	limit := min(max(t.DisplayLimit, 1), len(items))
	keys, all := mailtemplates.DataKeys(t)
	if limit > 0 {
		g.Items = make([]mailtemplates.Item, 0, limit)
	}
	for n := range limit {
		// Latest first, newest at the top, unless the type shows the
		// first ones.
		i := n
		if t.ItemOrder != "first" {
			i = len(items) - 1 - n
		}
		g.Items = append(g.Items, templateItem(items[i], actors[i], keys, all))
	}
	return g
}

func decodeActor(raw json.RawMessage) mailtemplates.Actor {
	var v struct{ ID, Name string }
	if json.Unmarshal(raw, &v) != nil {
		return mailtemplates.Actor{}
	}
	return mailtemplates.Actor{ID: v.ID, Name: v.Name}
}

func templateItem(it db.Item, actor mailtemplates.Actor, keys []string, all bool) mailtemplates.Item {
	var o struct{ Type, ID, Title, URL string }
	json.Unmarshal(it.Object, &o)
	out := mailtemplates.Item{Actor: actor, Object: mailtemplates.Object{Type: o.Type, ID: o.ID, Title: o.Title, URL: o.URL},
		Data: decodeData(it.Data, keys, all), OccurredAt: it.OccurredAt}
	if it.BatchKey != "" {
		out.Thread = it.TypeKey + "+" + it.BatchKey
	}
	return out
}

// decodeData decodes the keys of an item's data that its type's texts
// read (mailtemplates.DataKeys), or all of it: data holds whatever the
// host application sent, often much more than an email shows, and
// decoding it into maps was a tenth of a flush's CPU.
func decodeData(raw json.RawMessage, keys []string, all bool) map[string]any {
	var data map[string]any
	if all {
		json.Unmarshal(raw, &data)
		return data
	}
	if len(keys) == 0 {
		return nil
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) != nil {
		return nil
	}
	for _, k := range keys {
		var v any
		if f, ok := fields[k]; ok && json.Unmarshal(f, &v) == nil {
			if data == nil {
				data = make(map[string]any, len(keys))
			}
			data[k] = v
		}
	}
	return data
}

func isNotFound(err error) bool { return errors.Is(err, db.ErrNotFound) }
