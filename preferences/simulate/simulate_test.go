package simulate_test

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lull-dev/lull/preferences"
	"github.com/lull-dev/lull/preferences/simulate"
)

var start = time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)

func dur(d time.Duration) *time.Duration { return &d }
func intp(n int) *int                    { return &n }

// settings has one cooldown type (5m window, 12m cap) and recipients bob
// (UTC) and ana (Berlin).
func settings() *simulate.Settings {
	berlin, _ := time.LoadLocation("Europe/Berlin")
	ana := simulate.DefaultRecipient("ana")
	ana.Schedule.Location = berlin
	return &simulate.Settings{
		Types: map[string]simulate.Type{
			"comment": {Key: "comment", Name: "Comments", DisplayLimit: 2, BurstLimit: 3,
				Defaults: preferences.TypeDefaults{Mode: preferences.Cooldown, Window: 5 * time.Minute, MaxWait: 12 * time.Minute}},
			"alert": {Key: "alert", Name: "Alerts", DisplayLimit: 10, BurstLimit: 3,
				Defaults: preferences.TypeDefaults{Mode: preferences.Immediate}},
		},
		Recipients: map[string]*simulate.Recipient{"bob": simulate.DefaultRecipient("bob"), "ana": ana},
	}
}

// replay runs events (minutes after start) under policies and returns the
// batches each policy formed.
func replay(t *testing.T, s *simulate.Settings, policies []simulate.Policy, events []simulate.Event) ([][]simulate.Batch, *simulate.Report) {
	t.Helper()
	r := simulate.New(s, policies)
	out := make([][]simulate.Batch, len(policies))
	r.OnBatch(func(p int, b simulate.Batch) { out[p] = append(out[p], b) })
	for _, ev := range events {
		if err := r.Add(ev); err != nil {
			t.Fatal(err)
		}
	}
	return out, r.Report()
}

func at(min float64, typ string, recipients ...string) simulate.Event {
	return simulate.Event{At: start.Add(time.Duration(min * float64(time.Minute))), Type: typ, Recipients: recipients}
}

func TestCooldownSlidesUntilMaxWaitAndProposalWidensIt(t *testing.T) {
	t.Parallel()
	events := []simulate.Event{at(0, "comment", "bob"), at(4, "comment", "bob"), at(8, "comment", "bob"), at(11, "comment", "bob"), at(20, "comment", "bob")}
	ten := simulate.Policy{Name: "10m", Types: map[string]simulate.TypeChange{"comment": {Window: dur(10 * time.Minute), MaxWait: dur(0)}}}
	got, rep := replay(t, settings(), []simulate.Policy{{Name: "current"}, ten}, events)
	cur := got[0]
	if len(cur) != 2 || cur[0].Items != 4 || !cur[0].ClosesAt.Equal(start.Add(12*time.Minute)) || cur[1].Items != 1 {
		t.Fatalf("current settings: %+v, want 4 items closing at the 12m cap, then 1", cur)
	}
	if len(got[1]) != 1 || got[1][0].Items != 5 || !got[1][0].ClosesAt.Equal(start.Add(30*time.Minute)) {
		t.Fatalf("10m window without cap: %+v, want one batch of 5 closing at +30m", got[1])
	}
	if rep.Results[0].Overall.Emails != 2 || rep.Results[1].Overall.Emails != 1 {
		t.Fatalf("emails: %d and %d, want 2 and 1", rep.Results[0].Overall.Emails, rep.Results[1].Overall.Emails)
	}
	// Delay from the first event to the email: 12m and 5m under the
	// current settings (median of two is the lower), 30m proposed.
	if d := rep.Results[0].Overall.Delay; d.Median != 5*time.Minute || d.P90 != 12*time.Minute {
		t.Fatalf("current delay %v / %v, want 5m / 12m", d.Median, d.P90)
	}
	// Display limit 2: the batch of 4 hides 2 items.
	if h := rep.Results[0].Overall.HiddenItems; h != 2 {
		t.Fatalf("hidden items %d, want 2", h)
	}
}

func TestMaxItemsClosesAtOnce(t *testing.T) {
	t.Parallel()
	events := []simulate.Event{at(0, "comment", "bob"), at(1, "comment", "bob"), at(2, "comment", "bob"), at(2, "comment", "bob")}
	p := simulate.Policy{Types: map[string]simulate.TypeChange{"comment": {MaxItems: intp(3)}}}
	got, _ := replay(t, settings(), []simulate.Policy{p}, events)
	if len(got[0]) != 2 || got[0][0].Items != 3 || !got[0][0].ClosesAt.Equal(start.Add(2*time.Minute)) || got[0][1].Items != 1 {
		t.Fatalf("max items 3: %+v, want 3 closing at the third event, then a new batch", got[0])
	}
}

func TestBurstGuardAndLead(t *testing.T) {
	t.Parallel()
	var flood []simulate.Event
	for i := range 10 {
		flood = append(flood, at(float64(i)/4, "alert", "bob"))
	}
	got, _ := replay(t, settings(), []simulate.Policy{{}}, flood)
	modes := map[preferences.Mode]int{}
	for _, b := range got[0] {
		modes[b.Mode] += b.Items
	}
	if modes[preferences.Immediate] != 3 || modes[preferences.Cooldown] != 7 || len(got[0]) != 4 {
		t.Fatalf("burst: %d batches, items by mode %v; want 3 immediate and one burst batch of 7", len(got[0]), modes)
	}

	lead := simulate.Policy{Types: map[string]simulate.TypeChange{"comment": {Lead: boolp(true)}}}
	events := []simulate.Event{at(0, "comment", "bob"), at(1, "comment", "bob"), at(2, "comment", "bob"), at(30, "comment", "bob")}
	got, _ = replay(t, settings(), []simulate.Policy{lead}, events)
	var shape []string
	for _, b := range got[0] {
		shape = append(shape, string(b.Mode)+":"+strconv.Itoa(b.Items))
	}
	if strings.Join(shape, " ") != "immediate:1 cooldown:2 immediate:1" {
		t.Fatalf("lead: %v, want the first at once, two batched, and the next quiet period's first at once", shape)
	}
}

func boolp(b bool) *bool { return &b }
func tod(s string) *preferences.TimeOfDay {
	t, err := preferences.ParseTimeOfDay(s)
	if err != nil {
		panic(err)
	}
	return &t
}

// TestEveryoneDailyAcrossDaylightSaving replays a week around the end of
// summer time in Berlin (25 October 2026): the digest stays at 08:00 local,
// which is 06:00 UTC before the switch (03:00 on the 25th) and 07:00 from
// that morning on.
func TestEveryoneDailyAcrossDaylightSaving(t *testing.T) {
	t.Parallel()
	day0 := time.Date(2026, 10, 23, 12, 0, 0, 0, time.UTC)
	var events []simulate.Event
	for d := range 5 {
		events = append(events, simulate.Event{At: day0.Add(time.Duration(d) * 24 * time.Hour), Type: "comment", Recipients: []string{"ana", "bob"}})
	}
	daily := simulate.Policy{Name: "daily", Everyone: &simulate.Everyone{Mode: preferences.Daily, DailyAt: tod("08:00")}}
	got, rep := replay(t, settings(), []simulate.Policy{daily}, events)
	var ana []string
	for _, b := range got[0] {
		if b.Recipient == "ana" {
			ana = append(ana, b.ClosesAt.UTC().Format("01-02 15:04"))
		}
		if b.Key != "digest:daily" {
			t.Fatalf("batch key %q, want digest:daily", b.Key)
		}
	}
	want := "10-24 06:00 10-25 07:00 10-26 07:00 10-27 07:00 10-28 07:00"
	if strings.Join(ana, " ") != want {
		t.Fatalf("ana's digests at %v, want %s", ana, want)
	}
	m := rep.Results[0].Overall
	if m.Emails != 10 || m.EmailsPerRecipient != (simulate.Spread{Median: 5, P90: 5, Max: 5}) || m.Recipients != 2 {
		t.Fatalf("overall %+v", m)
	}
	// Noisiest: both got 5, ana wins the tie by id; one digest per hour.
	if w := m.WorstHour; w == nil || w.Recipient != "ana" || w.Emails != 1 || !w.Start.Equal(time.Date(2026, 10, 24, 6, 0, 0, 0, time.UTC)) {
		t.Fatalf("worst hour %+v", m.WorstHour)
	}
	// Bob (UTC) gets his digest 20h after each 12:00 event, ana 18h or 19h.
	if m.Delay.P90 != 20*time.Hour {
		t.Fatalf("delay p90 %v, want 20h", m.Delay.P90)
	}
}

func TestRecipientChoicesQuietHoursAndSkips(t *testing.T) {
	t.Parallel()
	s := settings()
	s.Recipients["bob"].Overrides = map[string]*preferences.Override{"comment": {Mode: preferences.Never}}
	quiet := simulate.DefaultRecipient("cy")
	quiet.Schedule.Quiet = preferences.QuietHours{Start: 8 * 60, End: 10 * 60, Enabled: true}
	s.Recipients["cy"] = quiet
	s.Recipients["dee"] = &simulate.Recipient{ID: "dee", Active: false}
	s.Recipients["eve"] = &simulate.Recipient{ID: "eve", Active: true, HasEmail: false}
	events := []simulate.Event{at(0, "comment", "bob", "cy", "dee", "eve", "cy")}
	forced := simulate.Policy{Types: map[string]simulate.TypeChange{"comment": {Mode: preferences.Immediate, IgnoreChoices: true}}}
	got, rep := replay(t, s, []simulate.Policy{{}, forced}, events)
	cur := rep.Results[0].Overall
	if cur.Suppressed != 1 || cur.Inactive != 1 || cur.Unsent != 1 || cur.Emails != 1 || cur.Recipients != 4 {
		t.Fatalf("current: %+v; want bob muted, dee inactive, eve without address, one email to cy", cur)
	}
	// cy's quiet hours end at 10:00 UTC; the 09:05 close waits for them.
	for _, b := range got[0] {
		if b.Recipient == "cy" && !b.ClosesAt.Equal(start.Add(time.Hour)) {
			t.Fatalf("cy's batch closes %v, want the end of quiet hours", b.ClosesAt)
		}
	}
	if f := rep.Results[1].Overall; f.Suppressed != 0 || f.Emails != 2 {
		t.Fatalf("forcing immediate on everyone: %+v; want bob's mute overridden, 2 emails", f)
	}
}

func TestOutOfOrderEventsAreRefused(t *testing.T) {
	t.Parallel()
	r := simulate.New(settings(), []simulate.Policy{{}})
	if err := r.Add(at(5, "comment", "bob")); err != nil {
		t.Fatal(err)
	}
	if err := r.Add(at(4, "comment", "bob")); !errors.Is(err, simulate.ErrOutOfOrder) {
		t.Fatalf("earlier event: %v, want ErrOutOfOrder", err)
	}
}

func TestActualResultLeadsTheReport(t *testing.T) {
	t.Parallel()
	r := simulate.New(settings(), []simulate.Policy{{Name: "current"}})
	r.Add(at(0, "comment", "bob"))
	r.AddSent(simulate.SentEmail{Recipient: "bob", SentAt: start.Add(7 * time.Minute), Parts: []simulate.SentPart{{Type: "comment", Items: 1, First: start}}})
	rep := r.Report()
	if len(rep.Results) != 2 || rep.Results[0].Kind != simulate.KindActual || rep.Results[0].Overall.Emails != 1 || rep.Results[0].Overall.Delay.Median != 7*time.Minute {
		t.Fatalf("results %+v", rep.Results)
	}
	b, err := json.Marshal(rep)
	if err != nil || !strings.Contains(string(b), `"median":"7m","p90":"7m","median_seconds":420`) {
		t.Fatalf("JSON %s (%v)", b, err)
	}
}

func TestPolicySpecNamesEveryBadField(t *testing.T) {
	t.Parallel()
	known := func(k string) bool { return k == "comment" }
	spec := simulate.PolicySpec{Name: "x", Types: map[string]simulate.TypeSpec{
		"comment": {Mode: "sometimes", Window: "0s", MaxWait: "-1m", DisplayLimit: intp(0), MaxItems: intp(-1)},
		"nope":    {Mode: "daily"},
	}, Everyone: &simulate.EveryoneSpec{Mode: "daily", DailyAt: "25:00"}}
	_, errs := spec.Parse(known)
	fields := map[string]bool{}
	for _, e := range errs {
		fields[e.Field] = true
	}
	for _, f := range []string{"types.comment.mode", "types.comment.window", "types.comment.max_wait", "types.comment.display_limit",
		"types.comment.max_items", "types.nope", "everyone.daily_at"} {
		if !fields[f] {
			t.Errorf("no error for %s (got %v)", f, errs)
		}
	}
	ok := simulate.PolicySpec{Name: "10m", Types: map[string]simulate.TypeSpec{"comment": {Mode: "cooldown", Window: "10m"}}}
	p, errs := ok.Parse(known)
	if len(errs) != 0 || p.Types["comment"].Mode != preferences.Cooldown || *p.Types["comment"].Window != 10*time.Minute {
		t.Fatalf("valid spec: %+v, %v", p, errs)
	}
	if d := p.Describe(); d != "comment: cooldown, window 10m" {
		t.Fatalf("describe %q", d)
	}
}

func TestUploadedLines(t *testing.T) {
	t.Parallel()
	file := `{"type":"comment","occurred_at":"2026-11-23T09:05:00Z","recipients":["bob"]}

{"type":"comment","occurred_at":"2026-11-23T09:00:00Z","recipients":[{"id":"zed","timezone":"Asia/Tokyo"}],"actor":{"id":"a"}}
{"type":"comment","recipients":["bob"]}
{"type":"comment","occurred_at":"2026-11-23T09:00:00Z","recipients":[{"id":"x","timezone":"Mars/Olympus"}]}
`
	_, errs := simulate.ReadEventLines(strings.NewReader(file), "events", 100)
	if len(errs) != 2 || !strings.Contains(errs[0].Message, "line 4: occurred_at") || !strings.Contains(errs[1].Message, "line 5: recipients[0].timezone") {
		t.Fatalf("errors %v", errs)
	}
	good := strings.Join(strings.Split(file, "\n")[:3], "\n")
	u, errs := simulate.ReadEventLines(strings.NewReader(good), "events", 100)
	if len(errs) != 0 || len(u.Events) != 2 || u.Events[0].Recipients[0] != "zed" {
		t.Fatalf("upload %+v, %v; want two events sorted by time", u, errs)
	}
	s := settings()
	u.Apply(s)
	if s.Recipients["zed"].Schedule.Location.String() != "Asia/Tokyo" || !s.Recipients["zed"].Active {
		t.Fatalf("zed from the upload: %+v", s.Recipients["zed"])
	}
}

// TestPolicySpecRefusesAZeroPeriod: a proposal that gives every_hours or
// monthly_day as 0 (or -0) names the field, as the preferences API does,
// rather than simulating each recipient's own setting as if it were left
// out.
func TestPolicySpecRefusesAZeroPeriod(t *testing.T) {
	t.Parallel()
	var spec simulate.PolicySpec
	if err := json.Unmarshal([]byte(`{"name":"x","everyone":{"mode":"hourly","every_hours":-0,"monthly_day":0}}`), &spec); err != nil {
		t.Fatal(err)
	}
	_, errs := spec.Parse(func(string) bool { return true })
	fields := map[string]bool{}
	for _, e := range errs {
		fields[e.Field] = true
	}
	if !fields["everyone.every_hours"] || !fields["everyone.monthly_day"] {
		t.Errorf("errors %v, want everyone.every_hours and everyone.monthly_day", errs)
	}
	if err := json.Unmarshal([]byte(`{"name":"x","everyone":{"mode":"hourly","every_hours":6,"monthly_day":31}}`), &spec); err != nil {
		t.Fatal(err)
	}
	if p, errs := spec.Parse(func(string) bool { return true }); len(errs) != 0 || *p.Everyone.EveryHours != 6 || *p.Everyone.MonthlyDay != 31 {
		t.Errorf("valid periods: %v", errs)
	}
}
