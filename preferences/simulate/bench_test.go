package simulate_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/lull-dev/lull/preferences"
	"github.com/lull-dev/lull/preferences/simulate"
)

// weekSettings is a mid-sized installation: 20,000 recipients in eight
// time zones, a tenth with quiet hours and a twentieth with choices of
// their own, and six types covering every mode.
func weekSettings() *simulate.Settings {
	zones := []string{"UTC", "Europe/Berlin", "Europe/London", "America/New_York", "America/Los_Angeles", "Asia/Tokyo", "Australia/Sydney", "Asia/Kolkata"}
	s := &simulate.Settings{Types: map[string]simulate.Type{}, Recipients: map[string]*simulate.Recipient{}}
	for _, t := range []simulate.Type{
		{Key: "comment.created", Defaults: preferences.TypeDefaults{Mode: preferences.Cooldown, Window: 5 * time.Minute, MaxWait: time.Hour}, MaxItems: 50},
		{Key: "mention", Defaults: preferences.TypeDefaults{Mode: preferences.Immediate}, BurstLimit: 5},
		{Key: "task.failed", Defaults: preferences.TypeDefaults{Mode: preferences.Cooldown, Window: 2 * time.Minute, MaxWait: 10 * time.Minute, Lead: true}},
		{Key: "share", Defaults: preferences.TypeDefaults{Mode: preferences.Daily}},
		{Key: "digest.news", Defaults: preferences.TypeDefaults{Mode: preferences.Weekly}},
		{Key: "security", Defaults: preferences.TypeDefaults{Mode: preferences.Immediate, Required: true}, BurstLimit: 0},
	} {
		t.DisplayLimit = 10
		s.Types[t.Key] = t
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range benchRecipients {
		r := simulate.DefaultRecipient(fmt.Sprintf("u%05d", i))
		r.Schedule.Location, _ = time.LoadLocation(zones[i%len(zones)])
		if i%10 == 0 {
			r.Schedule.Quiet = preferences.QuietHours{Start: 22 * 60, End: 7 * 60, Enabled: true}
		}
		if i%20 == 0 {
			r.Overrides = map[string]*preferences.Override{"comment.created": {Mode: preferences.Mode([]string{"daily", "immediate", "never"}[rng.IntN(3)])}}
		}
		s.Recipients[r.ID] = r
	}
	return s
}

const benchRecipients = 20_000

// weekEvents calls fn with n events spread over a week, in time order.
// Activity is skewed as in real installations: most events are comments
// on 2,000 documents, each followed by two to six recipients (a few busy
// documents by fifty), and a fifth of the traffic lands on 200 people.
func weekEvents(n int, fn func(simulate.Event)) {
	rng := rand.New(rand.NewPCG(3, 4))
	types := []string{"comment.created", "comment.created", "comment.created", "mention", "task.failed", "share", "digest.news", "security"}
	ids := make([]string, benchRecipients)
	for i := range ids {
		ids[i] = fmt.Sprintf("u%05d", i)
	}
	pick := func() string {
		if rng.IntN(5) == 0 {
			return ids[rng.IntN(200)]
		}
		return ids[rng.IntN(benchRecipients)]
	}
	type doc struct {
		key       string
		followers []string
	}
	docs := make([]doc, 2000)
	for i := range docs {
		k := 2 + rng.IntN(5)
		if i%100 == 0 {
			k = 50
		}
		docs[i].key = fmt.Sprintf("doc:%d", i)
		for range k {
			docs[i].followers = append(docs[i].followers, pick())
		}
	}
	gap := float64(7*24*time.Hour) / float64(n)
	t := time.Date(2026, 10, 19, 0, 0, 0, 0, time.UTC) // the week of Europe's switch to winter time
	one := make([]string, 1)
	for range n {
		t = t.Add(time.Duration(rng.ExpFloat64() * gap))
		ev := simulate.Event{At: t, Type: types[rng.IntN(len(types))]}
		if ev.Type == "comment.created" {
			// Busy documents get more comments.
			d := &docs[rng.IntN(len(docs))]
			if rng.IntN(3) == 0 {
				d = &docs[rng.IntN(20)]
			}
			ev.BatchKey, ev.Recipients = d.key, d.followers
		} else {
			one[0] = pick()
			ev.Recipients = one
		}
		fn(ev)
	}
}

// BenchmarkSimulateWeek replays a week of 1,000,000 events under the
// current settings and one proposal side by side, as the console does.
func BenchmarkSimulateWeek(b *testing.B) {
	s := weekSettings()
	ten := 10 * time.Minute
	proposal := simulate.Policy{Name: "comments 10m", Types: map[string]simulate.TypeChange{"comment.created": {Window: &ten}}}
	const events = 1_000_000
	b.ReportAllocs()
	for b.Loop() {
		r := simulate.New(s, []simulate.Policy{{Name: "current"}, proposal})
		var err error
		weekEvents(events, func(ev simulate.Event) {
			if err == nil {
				err = r.Add(ev)
			}
		})
		if err != nil {
			b.Fatal(err)
		}
		rep := r.Report()
		if rep.Events != events || rep.Results[1].Overall.Emails >= rep.Results[0].Overall.Emails {
			b.Fatalf("%d events, emails %d then %d: the wider window should save some", rep.Events, rep.Results[0].Overall.Emails, rep.Results[1].Overall.Emails)
		}
	}
	b.ReportMetric(float64(events)*float64(b.N)/b.Elapsed().Seconds(), "events/s")
}
