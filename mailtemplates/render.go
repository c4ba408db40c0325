package mailtemplates

import (
	"bytes"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/lull-dev/lull/i18n"
	"github.com/lull-dev/lull/internal/qp"
)

// ErrNothingToRender is returned for an Input without a single item: an
// empty batch or digest is never sent, so rendering one is a caller's bug
// that should surface rather than produce an email that says nothing.
var ErrNothingToRender = errors.New("nothing to render: the batch has no items")

const (
	// maxSubject caps subjects: mail clients cut long ones anyway, and a
	// hostile 10,000-character title must not become a 10,000-character
	// header.
	maxSubject = 150
	// maxLine caps each item line and maxHeading each group heading in
	// the body, so one huge field cannot bury the rest of the email.
	maxLine    = 500
	maxHeading = 200
	// maxHeadline is the longest item text a single-item email uses as
	// its headline; a longer one (an excerpt) goes in the body under the
	// group heading, as GitHub puts a comment under its issue's title.
	maxHeadline = 150
	// maxHTML is the HTML part's budget as sent (quoted-printable, as
	// go-mail encodes it): Gmail clips a message above about 102 KB and
	// hides what follows, the footer with the unsubscribe link first.
	// Render shows fewer items, saying how many more there are, to stay
	// under it.
	maxHTML = 100_000
	// textWidth is where the plain-text part wraps: short enough for any
	// reader, and under the 78 characters RFC 5322 recommends.
	textWidth = 76
)

// The three layouts. DESIGN.md: a batch of one notification has its own
// layout; a batch of one type lists its items under the group heading; a
// digest has a section per type under a summary.
const (
	layoutSingle = "single"
	layoutBatch  = "batch"
	layoutDigest = "digest"
)

// view is what the layouts render: every string is already expanded to
// plain text, which the HTML layout escapes and the text part writes as
// it is. No field holds markup.
type view struct {
	Layout    string
	Title     string // <title>, the digest's h1, the single item's headline
	Context   string // single layout: the group heading above the item
	Body      string // single layout: an item too long to be the headline
	Preheader string // the inbox preview line, hidden in the body
	Summary   string // digest: "17 updates since Sunday: Comments (15), Shared apps (2)"
	Item      itemView
	Groups    []groupView
	// Rest says what a digest too big for maxHTML leaves out entirely.
	Rest                      string
	restSections, restUpdates int
	Email                     string
	SettingsURL               string
	// UnsubscribeURL is the same one-click URL as the header; a GET on it
	// shows a confirmation page.
	UnsubscribeURL string
	// Product is the brand's name, empty for a neutral email; ProductURL,
	// Logo and Accent are the rest of the brand, safe to use as they are.
	Product, ProductURL, Logo, Accent string
	// UnsubscribeLabel names what the unsubscribe link stops.
	UnsubscribeLabel string
	// MuteURL mutes the email's conversation; MuteLabel is its word.
	MuteURL, MuteLabel string
	// Lang and Dir are the email's language and direction; SentTo,
	// ChooseLabel and ViewAll the footer's and buttons' words in it.
	Lang, Dir, SentTo, ChooseLabel string
	lang                           i18n.Locale
}

type groupView struct {
	Label   string // "Documents · Comments"
	Heading string // the expanded group_text
	Note    string // "15 in all — showing the latest 5"
	Items   []itemView
	More    string // "and 10 more"
	// ViewURL is where "View all" leads: the type's view_url, or the
	// one object every item is about; ViewAllLabel is that button's word.
	ViewURL, ViewAllLabel string
	// MuteLabel is the word of the items' mute links.
	MuteLabel string
	name      string // the type's name, for the digest's summary
	order     string // "first" or "latest"
	total     int
	lang      i18n.Locale
}

type itemView struct {
	Text   string
	URL    string // http(s) only
	When   string
	Action string // the single layout's button: "View pipeline"
	// MuteURL mutes the item's conversation: set on the first item of
	// each conversation in its group, so ten comments on a document offer
	// it once, and a list cut short keeps it.
	MuteURL string
	// objectType names Action, which compose words only for the single
	// layout: a translated phrase per item was a tenth of a digest's render.
	objectType string
}

// textCache holds the type texts parsed during one Render, so a digest
// whose groups share a text parses it once.
type textCache struct {
	item, group map[string]*text
}

func (c *textCache) get(s string, group bool) (*text, error) {
	m := &c.item
	if group {
		m = &c.group
	}
	if t, ok := (*m)[s]; ok {
		return t, nil
	}
	t, err := parseText(s, group)
	if err != nil {
		return nil, err
	}
	if *m == nil {
		*m = map[string]*text{}
	}
	(*m)[s] = t
	return t, nil
}

// Render turns a batch's view model into an email. It is the one path for
// sending and for the operator's preview, so what is previewed is what is
// sent. Type texts are validated when a type is saved; one that fails here
// anyway (stored before validation existed) is an error naming the type,
// so the flush fails visibly instead of sending a broken email.
func Render(in Input) (*Message, error) {
	m, _, err := renderFit(in)
	return m, err
}

// zoneAndDate are the recipient's zone and the email's date, UTC and
// now when the input leaves them out.
func (in Input) zoneAndDate() (*time.Location, time.Time) {
	loc, now := in.Recipient.Location, in.Date
	if loc == nil {
		loc = time.UTC
	}
	if now.IsZero() {
		now = time.Now()
	}
	return loc, now
}

// renderFit is Render, also saying whether the HTML part had to shrink to
// fit maxHTML (RenderShared cannot reuse such a render).
func renderFit(in Input) (*Message, bool, error) {
	loc, now := in.zoneAndDate()
	var cache textCache
	v := view{
		Product:        clip(oneLine(in.ProductName), maxBrandName),
		ProductURL:     safeURL(in.ProductURL),
		Logo:           safeURL(in.LogoURL),
		Accent:         in.Accent(),
		Email:          oneLine(in.Recipient.Email),
		SettingsURL:    in.SettingsURL,
		UnsubscribeURL: in.UnsubscribeURL,
		MuteURL:        in.MuteURL,
	}
	v.setWords(in.Locale)
	if in.UnsubscribeThread {
		v.UnsubscribeLabel = in.Locale.T("footer_unsubscribe_thread", nil)
	}
	if _, ok := luminance(v.Accent); !ok {
		v.Accent = DefaultColor // the layouts write it unescaped
	}
	total := 0
	for _, g := range in.Groups {
		if g.Total <= 0 && len(g.Items) == 0 {
			continue
		}
		gv, err := renderGroup(g, loc, in.Locale, &cache, in.ThreadMuteURLs)
		if err != nil {
			return nil, false, fmt.Errorf("render batch %d: %w", in.BatchID, err)
		}
		v.Groups = append(v.Groups, gv)
		total += gv.total
	}
	if len(v.Groups) == 0 {
		return nil, false, fmt.Errorf("render batch %d: %w", in.BatchID, ErrNothingToRender)
	}
	// The busiest group comes first: it is what the recipient most likely
	// opens the email for, and the subject names it.
	sort.SliceStable(v.Groups, func(i, j int) bool { return v.Groups[i].total > v.Groups[j].total })

	subject := v.compose(in, total, now, loc)
	if strings.TrimSpace(subject) == "" {
		subject = strings.TrimPrefix(v.Product+": ", ": ") + in.Locale.N("updates", total, nil)
	}
	subject = Subject(subject)
	if v.Title == "" {
		v.Title = subject
	}

	html, shrunk, err := v.fitHTML()
	if err != nil {
		return nil, false, fmt.Errorf("render batch %d html: %w", in.BatchID, err)
	}
	var txt strings.Builder
	txt.Grow(2 << 10)
	renderText(&txt, &v)
	return &Message{
		From:           in.Sender(in.From),
		To:             in.Recipient.Email,
		ToName:         oneLine(in.Recipient.Name),
		Subject:        subject,
		MessageID:      in.MessageID,
		ThreadID:       in.ThreadID,
		ListID:         in.ListID,
		Date:           in.Date,
		Text:           txt.String(),
		HTML:           html,
		UnsubscribeURL: in.UnsubscribeURL,
		BatchID:        in.BatchID,
	}, shrunk, nil
}

// compose picks the layout and fills the headline, summary and preheader;
// it returns the subject.
func (v *view) compose(in Input, total int, now time.Time, loc *time.Location) string {
	first := v.Groups[0]
	switch {
	case len(v.Groups) == 1 && total == 1 && len(first.Items) == 1:
		v.Layout = layoutSingle
		v.Item = first.Items[0]
		v.Item.Action = action(in.Locale, v.Item.objectType)
		if v.MuteURL == "" {
			// A digest of one item is about one conversation: its
			// footer offers to mute it, as a single email's does.
			v.MuteURL = v.Item.MuteURL
		}
		v.Title, v.Context = v.Item.Text, first.Heading
		if utf8.RuneCountInString(v.Item.Text) > maxHeadline {
			v.Title, v.Context, v.Body = first.Heading, "", v.Item.Text
		}
		if v.Context == v.Title {
			v.Context = ""
		}
		v.Preheader = first.Heading
		return v.Title
	case isDigest(in.Mode) || len(v.Groups) > 1:
		v.Layout = layoutDigest
		v.Title = in.Locale.T("digest_title_updates", nil)
		if isDigest(in.Mode) {
			v.Title = in.Locale.T("digest_title_"+in.Mode, nil)
		}
		v.Summary = summary(in.Locale, v.Groups, total, in.Since, now, loc)
		v.Preheader = v.Summary
		return in.Locale.T("subject_digest", map[string]any{"Title": v.Title, "Updates": in.Locale.N("updates", total, nil), "Heading": first.Heading})
	default:
		v.Layout = layoutBatch
		v.Title = first.Heading
		if len(first.Items) > 0 {
			v.Preheader = first.Items[0].Text
		}
		return first.Heading
	}
}

// summary is the digest's line above its sections: the total, then every
// section with its count in the order shown, so the numbers add up with
// what the reader sees ("17 updates since Sunday: Comments (15), Shared
// apps (2)").
func summary(lang i18n.Locale, groups []groupView, total int, opened, now time.Time, loc *time.Location) string {
	s := since(lang.N("updates", total, nil), opened, now, loc, lang)
	if len(groups) < 2 {
		return s
	}
	parts := make([]string, len(groups))
	for i, g := range groups {
		parts[i] = lang.Isolate(g.name) + " (" + lang.Number(g.total) + ")"
	}
	return lang.T("summary_sections", map[string]any{"Summary": s, "Sections": strings.Join(parts, lang.T("list_separator", nil))})
}

// setWords fills the frame's words in the email's language.
func (v *view) setWords(lang i18n.Locale) {
	v.lang, v.Lang, v.Dir = lang, lang.Tag(), lang.Dir()
	v.UnsubscribeLabel = lang.T("footer_unsubscribe", nil)
	v.ChooseLabel = lang.T("footer_choose", nil)
	v.MuteLabel = lang.T("mute_footer", nil)
	if v.Email != "" {
		email := lang.Isolate(v.Email)
		v.SentTo = lang.T("footer_sent_to", map[string]any{"Email": email})
		if v.Product != "" {
			v.SentTo = lang.T("footer_sent_by", map[string]any{"Product": lang.Isolate(v.Product), "Email": email})
		}
	}
}

// fitHTML renders the HTML part within maxHTML: while it is over, every
// group shows fewer items (in proportion to the excess, so a few renders
// suffice), then a digest leaves out its last sections, saying so. The
// footer is part of the frame, so it is always inside the budget.
func (v *view) fitHTML() (string, bool, error) {
	var html bytes.Buffer
	html.Grow(8 << 10)
	for shrunk := false; ; shrunk = true {
		html.Reset()
		if err := renderHTML(&html, v); err != nil {
			return "", false, err
		}
		size := encodedSize(html.Bytes())
		if size <= maxHTML || !v.shrink(size) {
			return html.String(), shrunk, nil
		}
	}
}

// shrink makes the email smaller for a render of size bytes; it reports
// false when nothing is left to take out.
func (v *view) shrink(size int) bool {
	most := 0
	for _, g := range v.Groups {
		most = max(most, len(g.Items))
	}
	if most > 0 {
		keep := min(most-1, most*maxHTML/size)
		for i := range v.Groups {
			v.Groups[i].cut(keep)
		}
		return true
	}
	if len(v.Groups) < 2 || v.Layout != layoutDigest {
		return false
	}
	// Leave out the last sections, as many as the excess suggests.
	keep := max(1, min(len(v.Groups)-1, len(v.Groups)*maxHTML/size))
	for _, g := range v.Groups[keep:] {
		v.restSections++
		v.restUpdates += g.total
	}
	v.Groups = v.Groups[:keep]
	v.Rest = v.lang.T("rest", map[string]any{"Updates": v.lang.N("more_updates", v.restUpdates, nil),
		"Sections": v.lang.N("more_sections", v.restSections, nil)})
	return true
}

// cut shows at most n of the group's items and says how many more there
// are.
func (g *groupView) cut(n int) {
	if n < len(g.Items) {
		g.Items = g.Items[:n]
	}
	g.More, g.Note = "", ""
	more := g.total - len(g.Items)
	if more <= 0 {
		return
	}
	if len(g.Items) == 0 {
		g.More = g.lang.N("not_shown", more, nil)
		return
	}
	g.More = g.lang.N("more", more, nil)
	g.Note = g.lang.N("note_"+g.order, len(g.Items), map[string]any{"Total": g.lang.Number(g.total)})
}

// encodedSize is the length of html as go-mail sends it, quoted-printable:
// what Gmail's clipping counts, and up to three times the raw size for
// non-ASCII text.
func encodedSize(html []byte) int { return qp.Len(html) }

// renderGroup expands one group's texts: each item's item_text once, and
// the group_text once against the newest item; mute has the links of the
// items' conversations (Input.ThreadMuteURLs).
func renderGroup(g Group, loc *time.Location, lang i18n.Locale, cache *textCache, mute map[string]string) (groupView, error) {
	items := g.Items
	if g.Type.DisplayLimit > 0 && len(items) > g.Type.DisplayLimit {
		items = items[:g.Type.DisplayLimit]
	}
	total := max(g.Total, len(g.Items))
	name := oneLine(g.Type.Name)
	if name == "" {
		name = oneLine(g.Type.Key)
	}
	name = clip(name, maxName)

	itemSrc := g.Type.ItemText
	if strings.TrimSpace(itemSrc) == "" {
		itemSrc = DefaultItemText()
	}
	itemText, err := cache.get(itemSrc, false)
	if err != nil {
		return groupView{}, fmt.Errorf("type %s item_text: %w", g.Type.Key, err)
	}
	var groupText *text // nil: the default heading, in the email's language
	if strings.TrimSpace(g.Type.GroupText) != "" {
		if groupText, err = cache.get(g.Type.GroupText, true); err != nil {
			return groupView{}, fmt.Errorf("type %s group_text: %w", g.Type.Key, err)
		}
	}

	gv := groupView{total: total, name: name, order: "latest", lang: lang, ViewAllLabel: lang.T("view_all", nil),
		Items: make([]itemView, len(items))}
	if g.Type.ItemOrder == "first" {
		gv.order = "first"
	}
	whenLayout := lang.T("layout_when", nil)
	offered := map[string]bool{} // conversations whose mute link is shown
	for i := range items {
		it := &items[i]
		s := itemText.expand(fields{item: it, loc: loc, lang: lang, count: 1}, maxLine)
		if s == "" {
			s = name // an event without the fields its text names
		}
		gv.Items[i] = itemView{Text: s, URL: safeURL(it.Object.URL), When: formatWhenAs(it.OccurredAt, loc, whenLayout), objectType: it.Object.Type}
		if !offered[it.Thread] {
			gv.Items[i].MuteURL, offered[it.Thread] = mute[it.Thread], true
		}
	}
	if len(mute) > 0 {
		gv.MuteLabel = lang.T("digest_mute_item", nil)
	}

	names, count := g.ActorNames, g.ActorCount
	if len(names) == 0 && count == 0 {
		names, count = actorsOf(items)
	}
	top := newest(items, g.Type.ItemOrder)
	if groupText != nil {
		gv.Heading = groupText.expand(fields{item: top, loc: loc, lang: lang, count: total, one: i18n.OneForm(g.Type.GroupTextLocale, total),
			actors: ActorsIn(lang, names, count)}, maxHeading)
	} else {
		gv.Heading = defaultHeading(g.Type, total, lang)
	}
	if gv.Heading == "" {
		gv.Heading = name + ": " + lang.Number(total)
	}
	gv.ViewURL = viewURL(g.Type.ViewURL, items, top, loc, cache)

	cat, tname := clip(oneLine(g.Type.Category), maxName), clip(oneLine(g.Type.Name), maxName)
	switch {
	case cat != "" && tname != "" && cat != tname:
		gv.Label = cat + " · " + tname
	case tname != "":
		gv.Label = tname
	default:
		gv.Label = cat
	}
	gv.cut(len(items))
	return gv, nil
}

// defaultHeading is the heading of a type without a group_text
// ("Comments: 3 new"), written in lang with the language's plural, so a
// German email does not fall back to English words around a German name.
func defaultHeading(t Type, total int, lang i18n.Locale) string {
	name := clip(oneLine(t.Name), maxHeading)
	if name == "" {
		name = clip(oneLine(t.Key), maxHeading)
	}
	if name == "" {
		return lang.N("updates", total, nil)
	}
	return clip(lang.N("type_default_heading", total, map[string]any{"Name": name}), maxHeading)
}

// viewURL is where a group's "View all" leads: the type's view_url
// expanded for the newest item, else the URL every item shares (comments
// on one document), else nothing.
func viewURL(src string, items []Item, top *Item, loc *time.Location, cache *textCache) string {
	if src != "" && top != nil {
		if t, err := cache.get(src, false); err == nil && ValidateViewURL(src) == nil {
			return t.expandURL(top, loc)
		}
	}
	shared := ""
	for i, it := range items {
		u := safeURL(it.Object.URL)
		if u == "" || (i > 0 && u != shared) {
			return ""
		}
		shared = u
	}
	return shared
}

// action labels a single item's button from its object's type ("View
// pipeline"), which says where the click leads better than "Open". A type
// that is not a plain word or two reads "View".
func action(lang i18n.Locale, objectType string) string {
	t := strings.NewReplacer("_", " ", "-", " ").Replace(oneLine(objectType))
	if t == "" || utf8.RuneCountInString(t) > 30 {
		return lang.T("view", nil)
	}
	for _, r := range t {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) && r != ' ' {
			return lang.T("view", nil)
		}
	}
	return lang.T("view_object", map[string]any{"Object": strings.Join(strings.Fields(t), " ")})
}

// newest is the item a group text's item fields come from. Items arrive
// in the type's order, and with "first" the newest is not necessarily
// shown first, so the times decide; without times, the order does.
func newest(items []Item, order string) *Item {
	if len(items) == 0 {
		return nil
	}
	best := 0
	if order == "first" {
		best = len(items) - 1
	}
	for i := range items {
		if items[i].OccurredAt.After(items[best].OccurredAt) {
			best = i
		}
	}
	return &items[best]
}

// actorsOf derives the actors from the shown items, for inputs built by
// hand (previews, tests) that leave ActorNames empty.
func actorsOf(items []Item) ([]string, int) {
	var names []string
	seen := map[string]bool{}
	for _, it := range items {
		key := it.Actor.ID
		if key == "" {
			key = it.Actor.Name
		}
		if key == "" || seen[key] {
			continue
		}
		seen[key] = true
		if len(names) < 3 && it.Actor.Name != "" {
			names = append(names, it.Actor.Name)
		}
	}
	return names, len(seen)
}

// Heading is a group's heading exactly as an email shows it ("Alice and 4
// others commented on Q3 plan"), so the in-app feed and the email never
// disagree. A group whose texts do not parse falls back to its type name.
func Heading(g Group, loc *time.Location) string { return HeadingIn(g, loc, i18n.Locale{}) }

// HeadingIn is Heading in a language: its list form, plurals and dates.
// g's type texts should be those of the same language
// (batching.TemplateTypeIn), as an email's are.
func HeadingIn(g Group, loc *time.Location, lang i18n.Locale) string {
	if loc == nil {
		loc = time.UTC
	}
	var cache textCache
	gv, err := renderGroup(g, loc, lang, &cache, nil)
	if err != nil {
		return g.Type.Name
	}
	return gv.Heading
}

// Actors writes "Alice", "Alice and Bob", "Alice, Bob and Carol" or
// "Alice, Bob and 13 others" from up to three names (newest first) and the
// true number of distinct actors. Three names, each cut to maxName, fit a
// subject with its verb; the count keeps it honest.
func Actors(names []string, count int) string { return ActorsIn(i18n.Locale{}, names, count) }

// ActorsIn is Actors in a language: its list form and its plurals.
func ActorsIn(lang i18n.Locale, names []string, count int) string {
	clean := make([]string, 0, len(names))
	for _, n := range names {
		if n = clip(oneLine(n), maxName); n != "" {
			clean = append(clean, n)
		}
	}
	names = clean
	if len(names) == 0 {
		if count <= 0 {
			return lang.T("someone", nil)
		}
		return lang.N("people", count, nil)
	}
	count = max(count, len(names))
	switch {
	case count == 1:
		return names[0]
	case count == len(names) && count <= 3:
		return lang.List(names, 0)
	}
	shown := names[:min(len(names), 2)]
	return lang.List(shown, count-len(shown))
}

// since is the digest's count with when it started, in the recipient's
// zone: a time with its zone when it opened today, a weekday within the
// last week ("17 updates since Monday"), else a date. Each kind is a
// phrase of its own in the catalogs, because a preposition bends what
// follows it (Russian "со вторника", Spanish "desde el martes"). Calendar
// days, not 24-hour periods, because that is how people count "since
// Monday".
func since(updates string, opened, now time.Time, loc *time.Location, lang i18n.Locale) string {
	if opened.IsZero() {
		return updates
	}
	o, n := opened.In(loc), now.In(loc)
	days := int(time.Date(n.Year(), n.Month(), n.Day(), 0, 0, 0, 0, time.UTC).
		Sub(time.Date(o.Year(), o.Month(), o.Day(), 0, 0, 0, 0, time.UTC)).Hours() / 24)
	date := map[string]any{"Day": o.Day(), "Month": lang.Month(o.Month()), "Year": o.Year()}
	switch {
	case days <= 0:
		return lang.T("summary_since_time", map[string]any{"Updates": updates, "Time": o.Format(lang.T("layout_clock_zone", nil))})
	case days < 7:
		return lang.T("summary_since_"+weekdayNames[o.Weekday()], map[string]any{"Updates": updates})
	case o.Year() == n.Year():
		return lang.T("summary_since_date", map[string]any{"Updates": updates, "Date": lang.T("format_date", date)})
	default:
		return lang.T("summary_since_date", map[string]any{"Updates": updates, "Date": lang.T("format_date_year", date)})
	}
}

var weekdayNames = [...]string{"sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday"}

// oneLine makes s a single line of plain text: control characters and
// line or paragraph separators become spaces, runs of white space collapse
// to one, and bidirectional embedding, override and isolate controls are
// dropped, so an event can neither break a header nor reverse the text
// that follows it. Right-to-left text itself is left alone.
func oneLine(s string) string {
	if isOneLine(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	space := false
	for _, r := range s {
		switch {
		case IsBidiControl(r):
			continue
		case unicode.IsSpace(r) || unicode.IsControl(r) || r == utf8.RuneError:
			space = b.Len() > 0
			continue
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		b.WriteRune(r)
	}
	return b.String()
}

// isOneLine reports whether oneLine would return s unchanged; most values
// are, and this keeps Render from copying them.
func isOneLine(s string) bool {
	prevSpace := true // a leading space needs work
	for _, r := range s {
		if r == ' ' {
			if prevSpace {
				return false
			}
			prevSpace = true
			continue
		}
		if r == utf8.RuneError || IsBidiControl(r) || unicode.IsSpace(r) || unicode.IsControl(r) {
			return false
		}
		prevSpace = false
	}
	return !prevSpace || s == ""
}

// IsBidiControl reports whether r is one of U+202A–U+202E or
// U+2066–U+2069, which reorder the text around them: rendering and the
// mail headers both drop them.
func IsBidiControl(r rune) bool {
	return (r >= 0x202A && r <= 0x202E) || (r >= 0x2066 && r <= 0x2069)
}

// clip cuts s to at most n characters, at a word boundary when one is
// near, ending in "…". It counts runes, so it never splits a character,
// and reads no further than character n+1, so clipping a long value costs
// no more than clipping a short one.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	// Keep n-1 characters and leave room for the ellipsis.
	end, kept, longer := 0, 0, false
	for i := range s {
		if kept == n-1 {
			end = i
		}
		if kept == n {
			longer = true
			break
		}
		kept++
	}
	if !longer {
		return s
	}
	head := s[:end]
	if sp := strings.LastIndexByte(head, ' '); sp > 0 && utf8.RuneCountInString(head[sp:]) <= 20 {
		head = head[:sp]
	}
	return strings.TrimRight(head, " ") + "…"
}

// Subject makes s safe for a Subject header: one line, without control
// characters, at most maxSubject characters, cut on a character boundary
// with an ellipsis. Render applies it; it is exported for senders that
// build a subject of their own.
func Subject(s string) string {
	return clip(oneLine(s), maxSubject)
}

// maxURL is the longest link an email carries, the longest object.url
// an event may have: a longer one, from an input built by hand, would
// spend the HTML budget on attributes.
const maxURL = 4096

// safeURL keeps only absolute http and https links of at most maxURL
// bytes, so an event cannot
// smuggle a javascript: or data: URL into an email. Characters that would
// end an <angle-bracketed> URL in the text part are percent-encoded.
func safeURL(s string) string {
	if len(s) > maxURL {
		return ""
	}
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return ""
	}
	return urlEscaper.Replace(u.String())
}

var urlEscaper = strings.NewReplacer(" ", "%20", "<", "%3C", ">", "%3E", `"`, "%22", "`", "%60")

// wrap fills s into lines of at most textWidth characters for the text
// part, starting with first and indenting the following lines with rest.
// A word longer than a line (a URL, a hostile title) stays whole on its
// own line rather than being broken.
func wrap(s, first, rest string) string {
	words := strings.Fields(s)
	if len(words) == 0 {
		return strings.TrimRight(first, " ")
	}
	var b strings.Builder
	b.Grow(len(s) + len(s)/textWidth*(len(rest)+1) + len(first))
	b.WriteString(first)
	col := utf8.RuneCountInString(first)
	restCol := utf8.RuneCountInString(rest)
	lineStart := true
	for _, w := range words {
		n := utf8.RuneCountInString(w)
		if !lineStart && col+1+n > textWidth {
			b.WriteByte('\n')
			b.WriteString(rest)
			col, lineStart = restCol, true
		}
		if !lineStart {
			b.WriteByte(' ')
			col++
		}
		b.WriteString(w)
		col += n
		lineStart = false
	}
	return b.String()
}

// rule underlines a heading in the text part, the way plain-text email
// has always marked headings.
func rule(s, char string) string {
	return strings.Repeat(char, min(max(utf8.RuneCountInString(s), 3), textWidth))
}

// isDigest reports whether mode gathers every type into one email at set
// times (preferences.Mode.Digest, which this package does not import).
func isDigest(mode string) bool {
	return mode == "hourly" || mode == "daily" || mode == "weekly" || mode == "monthly"
}
