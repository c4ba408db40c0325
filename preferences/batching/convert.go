package batching

import (
	"bytes"
	"encoding/json"
	"errors"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

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
	if !all && len(keys) == 0 {
		return nil
	}
	if !all {
		if data, ok := pickFields(raw, keys); ok {
			return data
		}
	}
	var data map[string]any
	json.Unmarshal(raw, &data)
	return data
}

// pickFields decodes the members of the JSON object raw named by keys
// and steps over the others without decoding them. ok is false for
// anything but an object whose structure it can follow, which the caller
// then decodes whole. Data comes from a jsonb column, so it is valid
// JSON; a member it decodes is checked by json.Unmarshal anyway.
func pickFields(raw []byte, keys []string) (data map[string]any, ok bool) {
	i := skipSpace(raw, 0)
	if i == len(raw) || raw[i] != '{' {
		return nil, false
	}
	i = skipSpace(raw, i+1)
	if i < len(raw) && raw[i] == '}' {
		return nil, skipSpace(raw, i+1) == len(raw)
	}
	for i < len(raw) && raw[i] == '"' {
		end := stringEnd(raw, i)
		if end < 0 {
			return nil, false
		}
		name := raw[i+1 : end-1]
		if bytes.IndexByte(name, '\\') >= 0 || !utf8.Valid(name) {
			// As json.Unmarshal reads it: escapes decoded, bad bytes
			// made U+FFFD.
			var k string
			if json.Unmarshal(raw[i:end], &k) != nil {
				return nil, false
			}
			name = []byte(k)
		}
		key, picked := keyNamed(keys, name)
		i = skipSpace(raw, end)
		if i == len(raw) || raw[i] != ':' {
			return nil, false
		}
		i = skipSpace(raw, i+1)
		end = valueEnd(raw, i)
		if end < 0 {
			return nil, false
		}
		if picked {
			var v any
			if json.Unmarshal(raw[i:end], &v) != nil {
				return nil, false
			}
			if data == nil {
				data = make(map[string]any, len(keys))
			}
			data[key] = v
		}
		i = skipSpace(raw, end)
		if i < len(raw) && raw[i] == ',' {
			i = skipSpace(raw, i+1)
			continue
		}
		if i < len(raw) && raw[i] == '}' {
			return data, skipSpace(raw, i+1) == len(raw)
		}
		return nil, false
	}
	return nil, false
}

// keyNamed is the key of keys spelled name.
func keyNamed(keys []string, name []byte) (string, bool) {
	for _, k := range keys {
		if string(name) == k {
			return k, true
		}
	}
	return "", false
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// stringEnd is the index just past the JSON string starting at b[i], -1
// when it does not end.
func stringEnd(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return -1
}

// valueEnd is the index just past the JSON value starting at b[i], -1
// when it does not end: strings are stepped over whole, so a bracket in
// one does not count.
func valueEnd(b []byte, i int) int {
	if i == len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				if j = stringEnd(b, j); j < 0 {
					return -1
				}
				j--
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	}
	j := i
	for j < len(b) && !strings.ContainsRune(",}] \t\n\r", rune(b[j])) {
		j++
	}
	if j == i {
		return -1
	}
	return j
}

func isNotFound(err error) bool { return errors.Is(err, db.ErrNotFound) }
