package web

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/preferences"
)

// FuzzPreferences sends arbitrary bodies through the API's decoding and
// the merge and validation of PUT /api/v1/recipients/{id}/preferences,
// onto a recipient who has changed every setting (unsubscribed
// included). Neither panics; every refusal names a field; what is
// accepted is within the rules (a known zone, times within the day,
// valid modes, windows of at least a second); whatever the body leaves
// out is as it was; the same body sent twice changes nothing the second
// time; and what is stored reads back through GET and saves again
// unchanged, so a client that round-trips its preferences never changes
// them by accident.
func FuzzPreferences(f *testing.F) {
	for _, seed := range []string{
		`{"timezone":"America/New_York","digest":{"daily_at":"07:30","weekly_on":"friday","weekly_at":"16:00"},
		  "quiet_hours":{"start":"22:00","end":"07:00"},"unsubscribed":false,
		  "types":{"comment":{"mode":"cooldown","window":"15m","max_wait":"1h","lead":true}}}`,
		`{"types":{"comment":{"mode":"never"},"share":{"mode":"daily"}}}`,
		`{"types":{"nope":{"mode":"daily"}}}`,
		`{"types":{"comment":{"mode":"cooldown","window":"0s","max_wait":"-1s"}}}`,
		`{"types":{"comment":{"mode":"Cooldown","window":"1.0000001s"}}}`,
		`{"types":{"comment":{"window":null,"lead":null},"share":{"window":"5m"}}}`,
		`{"types":{"comment":null,"share":{"mode":null}}}`,
		`{"types":null}`,
		`{"digest":{"daily_at":"25:00","weekly_on":"someday","weekly_at":"7"}}`,
		`{"digest":{"daily_at":"09:00"}}`,
		`{"digest":null}`,
		`{"quiet_hours":{"start":"22:00"}}`,
		`{"quiet_hours":{"end":null}}`,
		`{"quiet_hours":{"start":"07:00","end":"07:00"}}`,
		`{"quiet_hours":null,"timezone":"Local"}`,
		`{"timezone":"../../etc/passwd"}`,
		`{"timezone":"Asia/Tokyo"}`,
		`{"unsubscribed":"yes"}`,
		`{"unsubscribed":null}`,
		`{"types":{"comment":{"mode":"immediate","colour":"red"}}}`,
		`{"types":[]}`,
		`{"timezone":"\u0000"}`,
		"{\"timezone\":\"\xff\"}",
		`{}`,
	} {
		f.Add([]byte(seed))
	}
	known := map[string]bool{"comment": true, "share": true}
	f.Fuzz(func(t *testing.T, body []byte) {
		p, ok := decodeFuzzPatch(t, body)
		if !ok {
			return
		}
		rec, stored := changedFuzzRecipient()
		rows, errs := mergeFuzzPatch(rec, stored, p, known)
		if len(errs) > 0 {
			for _, e := range errs {
				if e.Field == "" || e.Message == "" {
					t.Fatalf("refusal without a field or message: %+v", errs)
				}
			}
			return
		}
		assertStorable(t, rec, rows, known)
		assertLeftAlone(t, p, rec, rows)

		// The same body again changes nothing.
		again := *rec
		rowsAgain, errs := mergeFuzzPatch(&again, byType(rows), p, known)
		if len(errs) > 0 || !reflect.DeepEqual(*rec, again) || !reflect.DeepEqual(rows, rowsAgain) {
			t.Fatalf("the same body sent twice changed the preferences again: %v\n%+v %+v\n%+v %+v", errs, rec, rows, &again, rowsAgain)
		}

		// What GET would answer for the stored preferences saves again,
		// onto a recipient who has never changed anything, to the same.
		out, err := json.Marshal(preferencesBody(rec, byType(rows)))
		if err != nil {
			t.Fatal(err)
		}
		p2, ok := decodeFuzzPatch(t, out)
		if !ok {
			t.Fatalf("GET's answer %s does not decode", out)
		}
		rec2 := newFuzzRecipient()
		rows2, errs := mergeFuzzPatch(rec2, nil, p2, known)
		if len(errs) > 0 {
			t.Fatalf("GET's answer %s is refused: %v", out, errs)
		}
		if !reflect.DeepEqual(rec, rec2) || !reflect.DeepEqual(rows, rows2) {
			t.Fatalf("preferences changed on a round trip through %s:\n%+v %+v\n%+v %+v", out, rec, rows, rec2, rows2)
		}
	})
}

// decodeFuzzPatch decodes body as PUT does; a refusal must be a 4xx problem.
func decodeFuzzPatch(t *testing.T, body []byte) (PreferencesPatch, bool) {
	t.Helper()
	var p PreferencesPatch
	req := httptest.NewRequest("PUT", "/api/v1/recipients/u/preferences", bytes.NewReader(body))
	if err := decodeJSON(httptest.NewRecorder(), req, &p); err != nil {
		if p, ok := err.(*Problem); !ok || p.Status < 400 || p.Status >= 500 {
			t.Fatalf("decoding refused with %T %v, want a 4xx problem", err, err)
		}
		return p, false
	}
	return p, true
}

// mergeFuzzPatch is putPreferences without the database.
func mergeFuzzPatch(rec *db.Recipient, stored map[string]db.TypePreference, p PreferencesPatch, known map[string]bool) ([]db.TypePreference, []FieldError) {
	body, errs := p.mergeOnto(preferencesBody(rec, stored))
	rows, more := applyPreferences(rec, body, known)
	return rows, append(errs, more...)
}

func byType(rows []db.TypePreference) map[string]db.TypePreference {
	m := map[string]db.TypePreference{}
	for _, r := range rows {
		m[r.TypeKey] = r
	}
	return m
}

func newFuzzRecipient() *db.Recipient {
	return &db.Recipient{ID: "u", Timezone: "UTC", DailyAt: 480, WeeklyOn: 1, WeeklyAt: 480}
}

// changedFuzzRecipient has every setting away from its default.
func changedFuzzRecipient() (*db.Recipient, map[string]db.TypePreference) {
	start, end, window, lead := 22*60, 7*60, int64(15*60_000), true
	rec := &db.Recipient{ID: "u", Timezone: "Europe/Berlin", DailyAt: 7 * 60, WeeklyOn: 5, WeeklyAt: 16 * 60,
		QuietStart: &start, QuietEnd: &end, Unsubscribed: true}
	return rec, map[string]db.TypePreference{
		"comment": {RecipientID: "u", TypeKey: "comment", Mode: "cooldown", WindowMS: &window, Lead: &lead},
		"share":   {RecipientID: "u", TypeKey: "share", Mode: "never"},
	}
}

// assertLeftAlone checks that what the body leaves out is as
// changedFuzzRecipient stored it.
func assertLeftAlone(t *testing.T, p PreferencesPatch, rec *db.Recipient, rows []db.TypePreference) {
	t.Helper()
	was, wasTypes := changedFuzzRecipient()
	if !p.Timezone.Set && rec.Timezone != was.Timezone {
		t.Fatalf("time zone left out, but changed to %q", rec.Timezone)
	}
	if !p.Unsubscribed.Set && !rec.Unsubscribed {
		t.Fatal("unsubscribed left out, but the recipient was subscribed again")
	}
	d := p.Digest.Value
	if !d.DailyAt.Set && rec.DailyAt != was.DailyAt || !d.WeeklyOn.Set && rec.WeeklyOn != was.WeeklyOn || !d.WeeklyAt.Set && rec.WeeklyAt != was.WeeklyAt {
		t.Fatalf("digest times left out, but changed: %+v", rec)
	}
	q := p.QuietHours
	if !q.Set && (rec.QuietStart == nil || rec.QuietEnd == nil || *rec.QuietStart != *was.QuietStart || *rec.QuietEnd != *was.QuietEnd) ||
		q.Set && !q.Null && (!q.Value.Start.Set && *rec.QuietStart != *was.QuietStart || !q.Value.End.Set && *rec.QuietEnd != *was.QuietEnd) {
		t.Fatalf("quiet hours left out, but changed to %v-%v", rec.QuietStart, rec.QuietEnd)
	}
	got := byType(rows)
	for k, w := range wasTypes {
		if _, sent := p.Types.Value[k]; !sent && !p.Types.Null && !reflect.DeepEqual(got[k], w) {
			t.Fatalf("type %s left out, but its choice changed to %+v", k, got[k])
		}
	}
}

func assertStorable(t *testing.T, rec *db.Recipient, rows []db.TypePreference, known map[string]bool) {
	t.Helper()
	if _, err := time.LoadLocation(rec.Timezone); err != nil || rec.Timezone == "Local" {
		t.Fatalf("accepted time zone %q", rec.Timezone)
	}
	inDay := func(m int) bool { return m >= 0 && m < 24*60 }
	if !inDay(rec.DailyAt) || !inDay(rec.WeeklyAt) || rec.WeeklyOn < 0 || rec.WeeklyOn > 6 {
		t.Fatalf("accepted digest times %d, %d on day %d", rec.DailyAt, rec.WeeklyAt, rec.WeeklyOn)
	}
	if (rec.QuietStart == nil) != (rec.QuietEnd == nil) || (rec.QuietStart != nil && (!inDay(*rec.QuietStart) || !inDay(*rec.QuietEnd))) {
		t.Fatalf("accepted quiet hours %v-%v", rec.QuietStart, rec.QuietEnd)
	}
	for _, r := range rows {
		if !known[r.TypeKey] {
			t.Fatalf("accepted unknown type %q", r.TypeKey)
		}
		if _, err := preferences.ParseMode(r.Mode); err != nil {
			t.Fatalf("accepted mode %q", r.Mode)
		}
		if r.WindowMS != nil && *r.WindowMS < 1000 {
			t.Fatalf("accepted a window of %d ms", *r.WindowMS)
		}
		if r.MaxWaitMS != nil && *r.MaxWaitMS != 0 && *r.MaxWaitMS < 1000 {
			t.Fatalf("accepted a maximum wait of %d ms", *r.MaxWaitMS)
		}
	}
}
