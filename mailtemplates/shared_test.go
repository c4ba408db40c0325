package mailtemplates

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lull-dev/lull/i18n"
)

// recipients gives in to n recipients whose addresses and links need
// escaping in every way the HTML part knows ("+", "&", quotes), some
// long enough to push an email over maxHTML where a token would not.
func recipients(in Input, n int) []Input {
	out := make([]Input, n)
	for i := range n {
		c := in
		c.BatchID = int64(100 + i)
		c.MessageID = fmt.Sprintf("batch-%d@example.com", 100+i)
		c.ThreadID = fmt.Sprintf("thread.%d@example.com", i)
		c.Recipient.ID = fmt.Sprintf("u_%d", i)
		c.Recipient.Name = fmt.Sprintf("Member \"%d\" <x>", i)
		c.Recipient.Email = fmt.Sprintf("m%d+alerts&ops'%d@example.com", i, i)
		c.SettingsURL = fmt.Sprintf("https://lull.example/settings/enter?token=s%d&x=<%d>", i, i)
		c.UnsubscribeURL = fmt.Sprintf("https://lull.example/unsubscribe?token=u%d&t=a+b", i)
		// Mute links are each recipient's own too: the footer's of an
		// email about one conversation, and a digest's per conversation.
		if in.MuteURL != "" {
			c.MuteURL = fmt.Sprintf("https://lull.example/mute?token=m%d&x=\"%d\"", i, i)
		}
		c.ThreadMuteURLs = map[string]string{}
		for th := range in.ThreadMuteURLs {
			c.ThreadMuteURLs[th] = fmt.Sprintf("https://lull.example/mute?token=%d<%s>", i, th)
		}
		switch i % 4 {
		case 1:
			c.Recipient.Email += strings.Repeat("z", 300)
			c.SettingsURL += "&pad=" + strings.Repeat("p", 3000)
			c.UnsubscribeURL += "&pad=" + strings.Repeat("q", 3000)
			for th, link := range c.ThreadMuteURLs {
				c.ThreadMuteURLs[th] = link + "&pad=" + strings.Repeat("r", 3000)
			}
		case 2:
			c.Recipient.Email = "" // no address: no "sent to" line
		}
		out[i] = c
	}
	return out
}

// big is a group whose HTML lands near maxHTML: the larger n, the closer
// and then past it.
func big(n int) Group {
	g := Group{Type: failureType(), Total: n}
	g.Type.DisplayLimit = n
	g.Type.ItemText = "{{object.title}} — {{data.error}}"
	for i := range n {
		it := event("CI", fmt.Sprintf("nightly build #%d ünïcödé", i), "", i)
		it.Data["error"] = strings.Repeat("stack frame ", 70)
		g.Items = append(g.Items, it)
	}
	return g
}

// Each copy of a shared render is byte for byte the email its input
// renders alone, for every layout, a brand, a right-to-left language, and
// emails at the edge of the HTML budget.
func TestRenderManyEqualsRenderingEachAlone(t *testing.T) {
	t.Parallel()
	cases := map[string]Input{}
	for name, in := range layouts() {
		cases[name] = in
	}
	branded := input("cooldown", comments())
	branded.Brand = acme
	cases["branded"] = branded
	arabic := input("daily", comments(), failures())
	arabic.Locale = i18n.Resolve("ar", "", "")
	cases["arabic"] = arabic
	for _, n := range []int{60, 100, 104, 106, 108, 110, 140} {
		cases[fmt.Sprintf("big%d", n)] = input("cooldown", big(n))
		cases[fmt.Sprintf("mutebig%d", n)] = threads(input("daily", big(n)))
	}
	// A digest of one item reads as a single email; its conversation's
	// mute link moves to the footer.
	cases["muteone"] = mutable(input("daily", Group{Type: commentType(), Total: 1, Items: comments().Items[:1]}))
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ins := recipients(in, 9)
			got, errs := RenderMany(ins)
			for i, in := range ins {
				want, err := Render(in)
				if err != nil || errs[i] != nil {
					t.Fatalf("recipient %d: %v / %v", i, err, errs[i])
				}
				if !reflect.DeepEqual(got[i], want) {
					t.Fatalf("recipient %d: the shared copy differs from rendering alone\nshared HTML tail: %q\nalone HTML tail:  %q",
						i, tail(got[i].HTML), tail(want.HTML))
				}
			}
		})
	}
}

// Recipients alike are rendered once, however many there are.
func TestRenderAlikeRendersOnce(t *testing.T) {
	t.Parallel()
	ins := make([]Input, 50)
	for i := range ins {
		ins[i] = input("cooldown", comments())
		ins[i].Recipient.Email = fmt.Sprintf("member%d@example.com", i)
		ins[i].UnsubscribeURL = fmt.Sprintf("https://lull.example/unsubscribe?token=u%d", i)
	}
	if _, errs, renders := renderAlike(ins); renders != 1 || errs[0] != nil {
		t.Fatalf("%d renders for 50 recipients alike (%v), want 1", renders, errs[0])
	}
}

// A digest with a mute link per conversation is still rendered once for
// recipients alike.
func TestRenderAlikeRendersDigestOnce(t *testing.T) {
	t.Parallel()
	ins := recipients(mutable(input("daily", comments(), shares())), 8)
	for i := range ins {
		ins[i].Recipient.Email = fmt.Sprintf("member%d@example.com", i)
	}
	if _, errs, renders := renderAlike(ins); renders != 1 || errs[0] != nil {
		t.Fatalf("%d renders for 8 recipients alike (%v), want 1", renders, errs[0])
	}
}

// threads puts each of in's items in a conversation of its own, each
// with a mute link: the most links a digest can carry.
func threads(in Input) Input {
	in.ThreadMuteURLs = map[string]string{}
	for gi, g := range in.Groups {
		items := slices.Clone(g.Items)
		for i := range items {
			items[i].Thread = fmt.Sprintf("%s+build:%d", g.Type.Key, i)
			in.ThreadMuteURLs[items[i].Thread] = "https://lull.example/mute?token=" + items[i].Thread
		}
		in.Groups[gi].Items = items
	}
	return in
}

func tail(s string) string { return s[max(0, len(s)-600):] }

// Recipients differ in content where their zone or language changes how
// the email reads, and only there.
func TestContentKeySeparatesZonesAndLanguages(t *testing.T) {
	t.Parallel()
	in := input("cooldown", comments())
	ins := recipients(in, 3)
	if ContentKey(ins[0]) != ContentKey(ins[1]) {
		t.Fatal("two recipients of one email got different keys")
	}
	if ContentKey(ins[0]) == ContentKey(ins[2]) {
		t.Fatal("a recipient without an address (no footer line) shares the key of one with")
	}
	tokyo := ins[0]
	tokyo.Recipient.Location, _ = time.LoadLocation("Asia/Tokyo")
	german := ins[0]
	german.Locale = i18n.Resolve("de", "", "")
	later := ins[0]
	later.Date = later.Date.Add(time.Second)
	digest := recipients(input("daily", comments()), 2)
	digest[1].Since = digest[1].Since.Add(time.Minute)
	if ContentKey(digest[0]) != ContentKey(digest[1]) {
		t.Error("digests opened a minute apart, both \"since\" the same day, got different keys")
	}
	for name, other := range map[string]Input{"zone": tokyo, "locale": german, "date": later} {
		if ContentKey(other) == ContentKey(ins[0]) {
			t.Errorf("a different %s gives the same key", name)
		}
	}
}

// BenchmarkRenderMany renders a set of 100 digests: the same fan-out to
// 100 recipients (rendered once, filled in 100 times) against 100
// digests that each differ.
func BenchmarkRenderMany(b *testing.B) {
	plain := func() []Input {
		ins := make([]Input, 100)
		for i := range ins {
			in := input("daily", comments(), failures())
			in.Recipient.Email = fmt.Sprintf("member%d@example.com", i)
			in.SettingsURL = fmt.Sprintf("https://lull.example/settings/enter?token=s%d", i)
			in.UnsubscribeURL = fmt.Sprintf("https://lull.example/unsubscribe?token=u%d", i)
			ins[i] = in
		}
		return ins
	}
	same, differ := plain(), plain()
	for i := range differ {
		differ[i].Groups = []Group{comments(), failures()}
		differ[i].Groups[0].Items[0].Object.Title = fmt.Sprintf("Q3 plan %d", i)
	}
	for name, ins := range map[string][]Input{"Same": same, "Differ": differ} {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				RenderMany(ins)
			}
		})
	}
}

// A mute link is signed for one recipient: rendered once for a team,
// every member's copy must carry their own, never the first member's.
func TestRenderManyGivesEachRecipientTheirOwnMuteLink(t *testing.T) {
	t.Parallel()
	ins := recipients(input("cooldown", comments()), 4)
	for i := range ins {
		ins[i].MuteURL = fmt.Sprintf("https://lull.example/mute?token=m%d&r=u_%d", i, i)
	}
	got, errs := RenderMany(ins)
	for i := range ins {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		for j := range ins {
			own := fmt.Sprintf("token=m%d&", j)
			if has := strings.Contains(got[i].Text, own); has != (i == j) {
				t.Errorf("recipient %d's email carries mute link of recipient %d: %v", i, j, has)
			}
		}
	}
}

// Two inputs with one key render the same email: an email of several
// groups reads as a digest, "since" its start, whatever its mode, so
// emails opened on different days must not share a key.
func TestContentKeyCoversSinceOfEveryDigestLayout(t *testing.T) {
	t.Parallel()
	one := input("cooldown", comments(), shares())
	other := one
	other.Since = one.Since.Add(-3 * 24 * time.Hour)
	a, _ := Render(one)
	b, _ := Render(other)
	if a.Text == b.Text {
		t.Fatal("the test's emails read alike; it tests nothing")
	}
	if ContentKey(one) == ContentKey(other) {
		t.Fatal("emails that read differently (since when) share a content key")
	}
}

// Every field of an input either changes its content key or is filled in
// per recipient: two inputs that differ in any one field, rendered
// together, each get the email they would alone. A field added later
// (a new per-recipient link) fails here until RenderAlike fills it or
// ContentKey covers it.
func TestRenderManyAccountsForEveryInputField(t *testing.T) {
	t.Parallel()
	base := layouts()["cooldown"]
	tokyo, _ := time.LoadLocation("Asia/Tokyo")
	variants := map[string]Input{}
	top := reflect.TypeOf(base)
	for i := range top.NumField() {
		f := top.Field(i)
		if f.Type.Kind() == reflect.Struct && (f.Name == "Recipient" || f.Name == "Brand") {
			for j := range f.Type.NumField() {
				c := base
				field := reflect.ValueOf(&c).Elem().Field(i).Field(j)
				if !vary(field, tokyo) {
					t.Fatalf("the test cannot vary %s.%s", f.Name, f.Type.Field(j).Name)
				}
				variants[f.Name+"."+f.Type.Field(j).Name] = c
			}
			continue
		}
		c := base
		if !vary(reflect.ValueOf(&c).Elem().Field(i), tokyo) {
			t.Fatalf("the test cannot vary %s", f.Name)
		}
		variants[f.Name] = c
	}
	for name, v := range variants {
		if ContentKey(v) != ContentKey(base) {
			continue
		}
		got, errs := RenderMany([]Input{base, v})
		want, err := Render(v)
		if err != nil || errs[1] != nil {
			t.Fatalf("%s: %v / %v", name, err, errs[1])
		}
		if !reflect.DeepEqual(got[1], want) {
			t.Errorf("inputs differing in %s share a key, and the second got the first's email", name)
		}
	}
}

// vary changes a settable field to another value of its kind, reporting
// false for a kind it does not know.
func vary(f reflect.Value, zone *time.Location) bool {
	switch x := f.Addr().Interface().(type) {
	case *string:
		if strings.HasPrefix(*x, "http") {
			*x += "&other=1"
		} else if *x == "" {
			*x = "https://lull.example/other"
		} else {
			*x += "x"
		}
	case *int64:
		*x++
	case *bool:
		*x = !*x
	case *time.Time:
		*x = x.Add(-49 * time.Hour)
	case **time.Location:
		*x = zone
	case *i18n.Locale:
		*x = i18n.Resolve("de", "", "")
	case *[]Group:
		*x = append(slices.Clone(*x), shares())
	case *map[string]string:
		m := map[string]string{"comment+doc:other": "https://lull.example/other"}
		for k, v := range *x {
			m[k] = v + "&other=1"
		}
		*x = m
	default:
		return false
	}
	return true
}
