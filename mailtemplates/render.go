package mailtemplates

import (
	"bytes"
	"embed"
	"fmt"
	htmltemplate "html/template"
	"net/url"
	"strings"
	texttemplate "text/template"
	"time"
	"unicode/utf8"
)

//go:embed templates/*
var templateFiles embed.FS

var (
	htmlLayout = htmltemplate.Must(htmltemplate.ParseFS(templateFiles, "templates/email.html.tmpl"))
	textLayout = texttemplate.Must(texttemplate.ParseFS(templateFiles, "templates/email.txt.tmpl"))
)

// maxSubject caps subjects: long ones are cut by mail clients anyway, and a
// hostile 10,000-character title must not become a 10,000-character header.
const maxSubject = 150

// view is what the layouts render: every string already expanded to plain
// text, which html/template escapes and text/template writes as it is.
type view struct {
	Product     string
	Preheader   string
	Heading     string
	Summary     string
	Single      bool
	Groups      []groupView
	SettingsURL string
	Unsubscribe string
}

type groupView struct {
	Heading string
	Note    string // "showing 5 of 15"
	Items   []itemView
	More    int
}

type itemView struct {
	Text string
	URL  string // http(s) only
	When string
}

// Render turns a batch's view model into an email. It is the one path
// for sending and previewing.
func Render(in Input) (*Message, error) {
	if len(in.Groups) == 0 {
		return nil, fmt.Errorf("render batch %d: no items", in.BatchID)
	}
	loc := in.Recipient.Location
	if loc == nil {
		loc = time.UTC
	}
	v := view{Product: in.ProductName, SettingsURL: in.SettingsURL, Unsubscribe: in.UnsubscribeURL}
	if v.Product == "" {
		v.Product = "lull"
	}
	total := 0
	for _, g := range in.Groups {
		gv, err := renderGroup(g, loc)
		if err != nil {
			return nil, err
		}
		v.Groups = append(v.Groups, gv)
		total += g.Total
	}
	v.Single = len(in.Groups) == 1 && in.Groups[0].Total == 1 && len(v.Groups[0].Items) == 1
	subject := v.Groups[0].Heading
	switch {
	case v.Single:
		subject = v.Groups[0].Items[0].Text
		v.Heading = subject
	case in.Mode == "daily" || in.Mode == "weekly":
		period := "daily"
		if in.Mode == "weekly" {
			period = "weekly"
		}
		v.Heading = fmt.Sprintf("Your %s digest", period)
		v.Summary = fmt.Sprintf("%s in %s since %s", plural(total, "update"), plural(len(in.Groups), "category", "categories"), since(in.Since, in.Date, loc))
		subject = fmt.Sprintf("Your %s digest: %s — %s", period, plural(total, "update"), v.Groups[0].Heading)
	default:
		v.Heading = v.Groups[0].Heading
	}
	subject = Subject(subject)
	v.Preheader = v.Summary
	if v.Preheader == "" {
		v.Preheader = subject
	}
	var html, text bytes.Buffer
	if err := htmlLayout.Execute(&html, v); err != nil {
		return nil, fmt.Errorf("render html: %w", err)
	}
	if err := textLayout.Execute(&text, v); err != nil {
		return nil, fmt.Errorf("render text: %w", err)
	}
	return &Message{
		From: in.From, To: in.Recipient.Email, ToName: oneLine(in.Recipient.Name), Subject: subject,
		MessageID: in.MessageID, Date: in.Date, Text: text.String(), HTML: html.String(),
		UnsubscribeURL: in.UnsubscribeURL, BatchID: in.BatchID,
	}, nil
}

func renderGroup(g Group, loc *time.Location) (groupView, error) {
	itemText, err := parseText(g.Type.ItemText, false)
	if err != nil {
		return groupView{}, fmt.Errorf("type %s item_text: %w", g.Type.Key, err)
	}
	groupText, err := parseText(g.Type.GroupText, true)
	if err != nil {
		return groupView{}, fmt.Errorf("type %s group_text: %w", g.Type.Key, err)
	}
	gv := groupView{More: g.Total - len(g.Items)}
	for _, it := range g.Items {
		gv.Items = append(gv.Items, itemView{
			Text: oneLine(itemText.expand(1, itemValue(it, loc))),
			URL:  safeURL(it.Object.URL),
			When: it.OccurredAt.In(loc).Format("Jan 2, 15:04"),
		})
	}
	var newest Item
	if len(g.Items) > 0 {
		newest = g.Items[0]
		if g.Type.ItemOrder == "first" {
			newest = g.Items[len(g.Items)-1]
		}
	}
	base := itemValue(newest, loc)
	gv.Heading = oneLine(groupText.expand(g.Total, func(f string) string {
		switch f {
		case "count":
			return fmt.Sprint(g.Total)
		case "actors":
			return Actors(g.ActorNames, g.ActorCount)
		}
		return base(f)
	}))
	if gv.More > 0 {
		gv.Note = fmt.Sprintf("%d in all — showing %d", g.Total, len(g.Items))
	}
	return gv, nil
}

// itemValue looks up an item's fields for placeholders.
func itemValue(it Item, loc *time.Location) func(string) string {
	return func(f string) string {
		switch f {
		case "actor.name":
			return it.Actor.Name
		case "actor.id":
			return it.Actor.ID
		case "object.title":
			return it.Object.Title
		case "object.url":
			return it.Object.URL
		case "object.type":
			return it.Object.Type
		case "object.id":
			return it.Object.ID
		case "occurred_at":
			if it.OccurredAt.IsZero() {
				return ""
			}
			return it.OccurredAt.In(loc).Format("Jan 2, 15:04")
		}
		if key, ok := strings.CutPrefix(f, "data."); ok {
			return dataValue(it.Data, key)
		}
		return ""
	}
}

// dataValue follows a dotted key into event data; maps and lists render
// empty, other values as they print.
func dataValue(data map[string]any, key string) string {
	var v any = data
	for _, part := range strings.Split(key, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return ""
		}
		v = m[part]
	}
	switch x := v.(type) {
	case nil, map[string]any, []any:
		return ""
	case string:
		return x
	case float64:
		if x == float64(int64(x)) {
			return fmt.Sprint(int64(x))
		}
	}
	return fmt.Sprint(v)
}

// Actors writes "Alice", "Alice and Bob", "Alice, Bob and Carol" or
// "Alice, Bob and 13 others" from up to three names and the true count.
func Actors(names []string, count int) string {
	if len(names) == 0 {
		if count == 0 {
			return "Someone"
		}
		return plural(count, "person", "people")
	}
	count = max(count, len(names))
	if count == 1 {
		return names[0]
	}
	if count == len(names) {
		return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
	}
	shown := names
	if len(shown) > 2 {
		shown = shown[:2]
	}
	rest := count - len(shown)
	return strings.Join(shown, ", ") + " and " + plural(rest, "other")
}

func plural(n int, one string, many ...string) string {
	if n == 1 {
		return "1 " + one
	}
	word := one + "s"
	if len(many) > 0 {
		word = many[0]
	}
	return fmt.Sprintf("%s %s", groupDigits(n), word)
}

func groupDigits(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// since names the batch's start: a weekday within the last week, else a date.
func since(opened, now time.Time, loc *time.Location) string {
	if now.IsZero() {
		now = time.Now()
	}
	o := opened.In(loc)
	if now.Sub(opened) < 6*24*time.Hour {
		if o.YearDay() == now.In(loc).YearDay() {
			return o.Format("15:04")
		}
		return o.Weekday().String()
	}
	return o.Format("January 2")
}

// oneLine folds control characters (CR, LF, tabs) into spaces.
func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)), " ")
}

// Subject makes s safe for a Subject header: one line, at most maxSubject
// characters, cut on a character boundary with an ellipsis.
func Subject(s string) string {
	s = oneLine(s)
	if utf8.RuneCountInString(s) <= maxSubject {
		return s
	}
	r := []rune(s)
	return strings.TrimSpace(string(r[:maxSubject-1])) + "…"
}

// safeURL keeps only http and https links, so an event cannot smuggle a
// javascript: or data: URL into an email.
func safeURL(s string) string {
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return ""
	}
	return u.String()
}

// Heading is a group's heading as an email shows it ("Alice and 4 others
// commented on Q3 plan"), for the in-app feed.
func Heading(g Group, loc *time.Location) string {
	if loc == nil {
		loc = time.UTC
	}
	gv, err := renderGroup(g, loc)
	if err != nil {
		return g.Type.Name
	}
	return gv.Heading
}
