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
// the validation of PUT /api/v1/recipients/{id}/preferences. Neither
// panics; every refusal names a field; what is accepted is within the
// rules (a known zone, times within the day, valid modes, windows of at
// least a second); and what is stored reads back through GET and saves
// again unchanged, so a client that round-trips its preferences never
// changes them by accident.
func FuzzPreferences(f *testing.F) {
	for _, seed := range []string{
		`{"timezone":"America/New_York","digest":{"daily_at":"07:30","weekly_on":"friday","weekly_at":"16:00"},
		  "quiet_hours":{"start":"22:00","end":"07:00"},"unsubscribed":false,
		  "types":{"comment":{"mode":"cooldown","window":"15m","max_wait":"1h","lead":true}}}`,
		`{"types":{"comment":{"mode":"never"},"share":{"mode":"daily"}}}`,
		`{"types":{"nope":{"mode":"daily"}}}`,
		`{"types":{"comment":{"mode":"cooldown","window":"0s","max_wait":"-1s"}}}`,
		`{"types":{"comment":{"mode":"Cooldown","window":"1.0000001s"}}}`,
		`{"digest":{"daily_at":"25:00","weekly_on":"someday","weekly_at":"7"}}`,
		`{"quiet_hours":{"start":"22:00"}}`,
		`{"quiet_hours":{"start":"07:00","end":"07:00"}}`,
		`{"quiet_hours":null,"timezone":"Local"}`,
		`{"timezone":"../../etc/passwd"}`,
		`{"unsubscribed":"yes"}`,
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
		var b PreferencesBody
		req := httptest.NewRequest("PUT", "/api/v1/recipients/u/preferences", bytes.NewReader(body))
		if err := decodeJSON(httptest.NewRecorder(), req, &b); err != nil {
			if p, ok := err.(*Problem); !ok || p.Status < 400 || p.Status >= 500 {
				t.Fatalf("decoding refused with %T %v, want a 4xx problem", err, err)
			}
			return
		}
		rec := newFuzzRecipient()
		rows, errs := applyPreferences(rec, b, known)
		if len(errs) > 0 {
			for _, e := range errs {
				if e.Field == "" || e.Message == "" {
					t.Fatalf("refusal without a field or message: %+v", errs)
				}
			}
			return
		}
		assertStorable(t, rec, rows, known)

		// What GET would answer for the stored preferences...
		stored := map[string]db.TypePreference{}
		for _, r := range rows {
			stored[r.TypeKey] = r
		}
		out, err := json.Marshal(preferencesBody(rec, stored))
		if err != nil {
			t.Fatal(err)
		}
		// ... saves again to the same thing.
		var b2 PreferencesBody
		req = httptest.NewRequest("PUT", "/api/v1/recipients/u/preferences", bytes.NewReader(out))
		if err := decodeJSON(httptest.NewRecorder(), req, &b2); err != nil {
			t.Fatalf("GET's answer %s does not decode: %v", out, err)
		}
		rec2 := newFuzzRecipient()
		rows2, errs := applyPreferences(rec2, b2, known)
		if len(errs) > 0 {
			t.Fatalf("GET's answer %s is refused: %v", out, errs)
		}
		if !reflect.DeepEqual(rec, rec2) || !reflect.DeepEqual(rows, rows2) {
			t.Fatalf("preferences changed on a round trip through %s:\n%+v %+v\n%+v %+v", out, rec, rows, rec2, rows2)
		}
	})
}

func newFuzzRecipient() *db.Recipient {
	return &db.Recipient{ID: "u", Timezone: "UTC", DailyAt: 480, WeeklyOn: 1, WeeklyAt: 480}
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
