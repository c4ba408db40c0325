package web_test

import (
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/lull-dev/lull/db"
)

// storedPrefs is a recipient who has changed every setting away from its
// default, as the merge tests start from.
const storedPrefs = `{"timezone":"Europe/Berlin",
	"digest":{"daily_at":"07:00","weekly_on":"friday","weekly_at":"16:00"},
	"quiet_hours":{"start":"22:00","end":"07:00"},
	"types":{"comment":{"mode":"cooldown","window":"15m","max_wait":"1h","lead":true},"share":{"mode":"never"}}}`

// setupPrefs stores storedPrefs for a new recipient id, unsubscribes
// them with the one-click link of their emails, and returns what GET
// then answers.
func setupPrefs(t *testing.T, a *apiBundle, id string) map[string]any {
	t.Helper()
	a.mustCall(t, "PUT", "/api/v1/recipients/"+id, `{"email":"`+id+`@example.com"}`, 200)
	a.mustCall(t, "PUT", "/api/v1/recipients/"+id+"/preferences", storedPrefs, 200)
	link := strings.Replace(a.web.Links.UnsubscribeURL(id, nil, time.Now()), "http://lull.test", a.srv.URL, 1)
	resp, err := http.Post(link, "application/x-www-form-urlencoded", strings.NewReader("List-Unsubscribe=One-Click"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("one-click unsubscribe = %d", resp.StatusCode)
	}
	got := a.mustCall(t, "GET", "/api/v1/recipients/"+id+"/preferences", "", 200)
	if got["unsubscribed"] != true {
		t.Fatalf("after the one-click unsubscribe: %v", got)
	}
	return got
}

func setupPrefTypes(t *testing.T, a *apiBundle) {
	t.Helper()
	for _, k := range []string{"comment", "share", "mention"} {
		a.mustCall(t, "PUT", "/api/v1/types/"+k, `{}`, 200)
	}
}

// TestPartialPreferencesKeepUnsubscribe is the audit's case: after a
// one-click unsubscribe, a PUT of the time zone alone changed only the
// time zone. (It used to subscribe the recipient again, clear the quiet
// hours and drop every type choice.)
func TestPartialPreferencesKeepUnsubscribe(t *testing.T) {
	t.Parallel()
	a := setupAPI(t)
	setupPrefTypes(t, a)
	want := setupPrefs(t, a, "u_bob")
	got := a.mustCall(t, "PUT", "/api/v1/recipients/u_bob/preferences", `{"timezone":"Asia/Tokyo"}`, 200)
	want["timezone"] = "Asia/Tokyo"
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("PUT of the time zone alone answered\n%v\nwant\n%v", got, want)
	}
	if stored := a.mustCall(t, "GET", "/api/v1/recipients/u_bob/preferences", "", 200); !reflect.DeepEqual(stored, want) {
		t.Fatalf("stored after a PUT of the time zone alone:\n%v\nwant\n%v", stored, want)
	}
}

// TestPreferencesPutChangesOnlyWhatIsSent sends each field alone (and
// each null that clears) and checks that GET then differs from before in
// that field only.
func TestPreferencesPutChangesOnlyWhatIsSent(t *testing.T) {
	t.Parallel()
	a := setupAPI(t)
	setupPrefTypes(t, a)
	comment := func(m map[string]any) map[string]any { return m["types"].(map[string]any)["comment"].(map[string]any) }
	cases := []struct {
		name, body string
		change     func(m map[string]any)
	}{
		{"Nothing", `{}`, func(map[string]any) {}},
		{"Timezone", `{"timezone":"Asia/Tokyo"}`, func(m map[string]any) { m["timezone"] = "Asia/Tokyo" }},
		{"EmptyTimezoneKeeps", `{"timezone":""}`, func(map[string]any) {}},
		{"DigestDailyAt", `{"digest":{"daily_at":"09:00"}}`, func(m map[string]any) { m["digest"].(map[string]any)["daily_at"] = "09:00" }},
		// weekly_on alone is the one-day form: the days become that day.
		{"DigestWeeklyOn", `{"digest":{"weekly_on":"sunday"}}`, func(m map[string]any) {
			m["digest"].(map[string]any)["weekly_on"] = "sunday"
			m["digest"].(map[string]any)["weekly_days"] = []any{"sunday"}
		}},
		{"DigestWeeklyDays", `{"digest":{"weekly_days":["sunday","wednesday"]}}`, func(m map[string]any) {
			m["digest"].(map[string]any)["weekly_on"] = "sunday"
			m["digest"].(map[string]any)["weekly_days"] = []any{"sunday", "wednesday"}
		}},
		{"DigestEveryHours", `{"digest":{"every_hours":12}}`, func(m map[string]any) { m["digest"].(map[string]any)["every_hours"] = 12.0 }},
		{"DigestMonthlyDay", `{"digest":{"monthly_day":31}}`, func(m map[string]any) { m["digest"].(map[string]any)["monthly_day"] = 31.0 }},
		{"DigestMonthlyAt", `{"digest":{"monthly_at":"06:45"}}`, func(m map[string]any) { m["digest"].(map[string]any)["monthly_at"] = "06:45" }},
		{"DigestWeeklyAt", `{"digest":{"weekly_at":"18:30"}}`, func(m map[string]any) { m["digest"].(map[string]any)["weekly_at"] = "18:30" }},
		{"DigestEmpty", `{"digest":{}}`, func(map[string]any) {}},
		{"QuietHoursStart", `{"quiet_hours":{"start":"23:00"}}`, func(m map[string]any) { m["quiet_hours"].(map[string]any)["start"] = "23:00" }},
		{"QuietHoursEnd", `{"quiet_hours":{"end":"06:00"}}`, func(m map[string]any) { m["quiet_hours"].(map[string]any)["end"] = "06:00" }},
		{"QuietHoursNull", `{"quiet_hours":null}`, func(m map[string]any) { m["quiet_hours"] = nil }},
		{"Unsubscribed", `{"unsubscribed":false}`, func(m map[string]any) { m["unsubscribed"] = false }},
		{"TypeMode", `{"types":{"comment":{"mode":"daily"}}}`, func(m map[string]any) { comment(m)["mode"] = "daily" }},
		{"TypeWindow", `{"types":{"comment":{"window":"5m"}}}`, func(m map[string]any) { comment(m)["window"] = "5m" }},
		{"TypeMaxWait", `{"types":{"comment":{"max_wait":"2h"}}}`, func(m map[string]any) { comment(m)["max_wait"] = "2h" }},
		{"TypeLead", `{"types":{"comment":{"lead":false}}}`, func(m map[string]any) { comment(m)["lead"] = false }},
		{"TypeWindowNull", `{"types":{"comment":{"window":null}}}`, func(m map[string]any) { delete(comment(m), "window") }},
		{"TypeMaxWaitNull", `{"types":{"comment":{"max_wait":null}}}`, func(m map[string]any) { delete(comment(m), "max_wait") }},
		{"TypeLeadNull", `{"types":{"comment":{"lead":null}}}`, func(m map[string]any) { delete(comment(m), "lead") }},
		{"TypeNull", `{"types":{"comment":null}}`, func(m map[string]any) { delete(m["types"].(map[string]any), "comment") }},
		{"TypeAdded", `{"types":{"mention":{"mode":"weekly"}}}`, func(m map[string]any) {
			m["types"].(map[string]any)["mention"] = map[string]any{"mode": "weekly"}
		}},
		{"TypesEmpty", `{"types":{}}`, func(map[string]any) {}},
		{"TypesNull", `{"types":null}`, func(m map[string]any) { m["types"] = map[string]any{} }},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			id := "u_" + itoa(int64(i))
			want := setupPrefs(t, a, id)
			tc.change(want)
			a.mustCall(t, "PUT", "/api/v1/recipients/"+id+"/preferences", tc.body, 200)
			if got := a.mustCall(t, "GET", "/api/v1/recipients/"+id+"/preferences", "", 200); !reflect.DeepEqual(got, want) {
				t.Fatalf("after PUT %s:\n%v\nwant\n%v", tc.body, got, want)
			}
		})
	}
}

// TestPreferencesPutRefusals: a bad value or a null that has nothing to
// clear to is refused with 422 naming the field, and nothing is stored.
func TestPreferencesPutRefusals(t *testing.T) {
	t.Parallel()
	a := setupAPI(t)
	setupPrefTypes(t, a)
	want := setupPrefs(t, a, "u_bob")
	cases := []struct{ name, body, field string }{
		{"UnsubscribedNull", `{"unsubscribed":null}`, "unsubscribed"},
		{"UnsubscribedString", `{"unsubscribed":"no"}`, "unsubscribed"},
		{"TimezoneNull", `{"timezone":null}`, "timezone"},
		{"TimezoneUnknown", `{"timezone":"Mars/Base"}`, "timezone"},
		{"DigestNull", `{"digest":null}`, "digest"},
		{"DailyAtBad", `{"digest":{"daily_at":"25:00"}}`, "digest.daily_at"},
		{"DailyAtNull", `{"digest":{"daily_at":null}}`, "digest.daily_at"},
		{"DailyAtNumber", `{"digest":{"daily_at":9}}`, "digest.daily_at"},
		{"WeeklyOnBad", `{"digest":{"weekly_on":"someday"}}`, "digest.weekly_on"},
		{"WeeklyAtBad", `{"digest":{"weekly_at":"7"}}`, "digest.weekly_at"},
		{"QuietStartBad", `{"quiet_hours":{"start":"7"}}`, "quiet_hours.start"},
		{"QuietEndNull", `{"quiet_hours":{"end":null}}`, "quiet_hours.end"},
		{"ModeNull", `{"types":{"comment":{"mode":null}}}`, "types.comment.mode"},
		{"ModeBad", `{"types":{"comment":{"mode":"fortnightly"}}}`, "types.comment.mode"},
		{"ModeMissingForANewChoice", `{"types":{"mention":{"window":"5m"}}}`, "types.mention.mode"},
		{"WindowBad", `{"types":{"comment":{"window":"0s"}}}`, "types.comment.window"},
		{"MaxWaitBad", `{"types":{"comment":{"max_wait":"-1s"}}}`, "types.comment.max_wait"},
		{"LeadString", `{"types":{"comment":{"lead":"yes"}}}`, "types.comment.lead"},
		{"TypeUnknown", `{"types":{"nope":{"mode":"daily"}}}`, "types.nope"},
		{"TypeFieldUnknown", `{"types":{"comment":{"when":"now"}}}`, "when"},
		{"DigestFieldUnknown", `{"digest":{"monthly_on":1}}`, "monthly_on"},
		{"TypesArray", `{"types":[]}`, "types"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, p := a.call(t, "PUT", "/api/v1/recipients/u_bob/preferences", tc.body)
			if status != http.StatusUnprocessableEntity || fieldOf(p) != tc.field {
				t.Fatalf("PUT %s = %d naming %q, want 422 naming %q: %v", tc.body, status, fieldOf(p), tc.field, p)
			}
			if got := a.mustCall(t, "GET", "/api/v1/recipients/u_bob/preferences", "", 200); !reflect.DeepEqual(got, want) {
				t.Fatalf("a refused PUT %s changed the preferences:\n%v\nwant\n%v", tc.body, got, want)
			}
		})
	}
	t.Run("QuietHoursHalfWithNoneStored", func(t *testing.T) {
		a.mustCall(t, "PUT", "/api/v1/recipients/u_new", `{}`, 200)
		status, p := a.call(t, "PUT", "/api/v1/recipients/u_new/preferences", `{"quiet_hours":{"start":"22:00"}}`)
		if status != http.StatusUnprocessableEntity || fieldOf(p) != "quiet_hours" {
			t.Fatalf("half the quiet hours with none stored = %d %v, want 422 naming quiet_hours", status, p)
		}
	})
}

// TestRecipientPutChangesOnlyWhatIsSent: PUT /api/v1/recipients/{id}
// merges too. A field left out keeps its stored value; null clears
// email, name and locale and is refused for timezone and active; a new
// recipient gets the defaults; the preferences are never touched.
func TestRecipientPutChangesOnlyWhatIsSent(t *testing.T) {
	t.Parallel()
	a := setupAPI(t)
	setupPrefTypes(t, a)
	const full = `{"email":"bob@example.com","name":"Bob","timezone":"Europe/Berlin","locale":"de","active":false}`
	base := db.Recipient{Email: "bob@example.com", Name: "Bob", Timezone: "Europe/Berlin", Locale: "de", Active: false}
	cases := []struct {
		name, body string
		change     func(r *db.Recipient)
	}{
		{"Nothing", `{}`, func(*db.Recipient) {}},
		{"Email", `{"email":"robert@example.com"}`, func(r *db.Recipient) { r.Email = "robert@example.com" }},
		{"EmailNull", `{"email":null}`, func(r *db.Recipient) { r.Email = "" }},
		{"Name", `{"name":"Robert"}`, func(r *db.Recipient) { r.Name = "Robert" }},
		{"NameNull", `{"name":null}`, func(r *db.Recipient) { r.Name = "" }},
		{"Timezone", `{"timezone":"Asia/Tokyo"}`, func(r *db.Recipient) { r.Timezone = "Asia/Tokyo" }},
		{"EmptyTimezoneKeeps", `{"timezone":""}`, func(*db.Recipient) {}},
		{"Locale", `{"locale":"fr"}`, func(r *db.Recipient) { r.Locale = "fr" }},
		{"LocaleNull", `{"locale":null}`, func(r *db.Recipient) { r.Locale = "" }},
		{"Active", `{"active":true}`, func(r *db.Recipient) { r.Active = true }},
		{"SameID", `{"id":"ID"}`, func(*db.Recipient) {}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			id := "u_" + itoa(int64(i))
			prefs := setupPrefs(t, a, id)
			a.mustCall(t, "PUT", "/api/v1/recipients/"+id, full, 200)
			want := base
			want.ID = id
			tc.change(&want)
			prefs["timezone"] = want.Timezone // the same column
			got := a.mustCall(t, "PUT", "/api/v1/recipients/"+id, strings.ReplaceAll(tc.body, "ID", id), 200)
			if answered := recipientOf(t, got); answered != want {
				t.Errorf("PUT %s answered %+v, want %+v", tc.body, answered, want)
			}
			if stored := storedRecipient(t, a, id); stored != want {
				t.Errorf("after PUT %s, stored %+v, want %+v", tc.body, stored, want)
			}
			if p := a.mustCall(t, "GET", "/api/v1/recipients/"+id+"/preferences", "", 200); !reflect.DeepEqual(p, prefs) {
				t.Errorf("PUT %s changed the preferences:\n%v\nwant\n%v", tc.body, p, prefs)
			}
		})
	}
	t.Run("NewGetsDefaults", func(t *testing.T) {
		a.mustCall(t, "PUT", "/api/v1/recipients/u_new", `{"name":"New"}`, 200)
		want := db.Recipient{ID: "u_new", Name: "New", Timezone: "UTC", Active: true}
		if got := storedRecipient(t, a, "u_new"); got != want {
			t.Fatalf("new recipient stored as %+v, want %+v", got, want)
		}
	})
	for _, tc := range []struct{ name, body, field string }{
		{"TimezoneNull", `{"timezone":null}`, "timezone"},
		{"TimezoneUnknown", `{"timezone":"Nowhere"}`, "timezone"},
		{"ActiveNull", `{"active":null}`, "active"},
		{"ActiveString", `{"active":"yes"}`, "active"},
		{"EmailBad", `{"email":"not-an-email"}`, "email"},
		{"OtherID", `{"id":"u_other"}`, "id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a.mustCall(t, "PUT", "/api/v1/recipients/u_refused", full, 200)
			status, p := a.call(t, "PUT", "/api/v1/recipients/u_refused", tc.body)
			if status != http.StatusUnprocessableEntity || fieldOf(p) != tc.field {
				t.Fatalf("PUT %s = %d naming %q, want 422 naming %q: %v", tc.body, status, fieldOf(p), tc.field, p)
			}
			want := base
			want.ID = "u_refused"
			if stored := storedRecipient(t, a, "u_refused"); stored != want {
				t.Fatalf("a refused PUT %s stored %+v, want %+v", tc.body, stored, want)
			}
		})
	}
}

// recipientOf reads PUT's answer into the fields a recipient PUT sets.
func recipientOf(t *testing.T, m map[string]any) db.Recipient {
	t.Helper()
	raw, _ := json.Marshal(m)
	var b struct {
		ID, Email, Name, Timezone, Locale string
		Active                            bool
	}
	if err := json.Unmarshal(raw, &b); err != nil {
		t.Fatal(err)
	}
	return db.Recipient{ID: b.ID, Email: b.Email, Name: b.Name, Timezone: b.Timezone, Locale: b.Locale, Active: b.Active}
}

// storedRecipient is the stored contact fields of a recipient.
func storedRecipient(t *testing.T, a *apiBundle, id string) db.Recipient {
	t.Helper()
	r, err := db.GetRecipient(context.Background(), a.db.Bun, id)
	if err != nil {
		t.Fatal(err)
	}
	return db.Recipient{ID: r.ID, Email: r.Email, Name: r.Name, Timezone: r.Timezone, Locale: r.Locale, Active: r.Active}
}

// TestPreferencesPutDuplicateFieldLastWins: a field sent twice counts as
// its last value, as elsewhere in encoding/json. A null sent first used
// to stay behind: quiet hours sent after a null were cleared instead.
func TestPreferencesPutDuplicateFieldLastWins(t *testing.T) {
	t.Parallel()
	a := setupAPI(t)
	a.mustCall(t, "PUT", "/api/v1/recipients/u_bob", `{"email":"bob@example.com"}`, 200)
	got := a.mustCall(t, "PUT", "/api/v1/recipients/u_bob/preferences",
		`{"quiet_hours":null,"quiet_hours":{"start":"22:00","end":"07:00"}}`, 200)
	if q, _ := got["quiet_hours"].(map[string]any); q["start"] != "22:00" || q["end"] != "07:00" {
		t.Fatalf("quiet hours sent after a null = %v, want 22:00–07:00", got["quiet_hours"])
	}
	got = a.mustCall(t, "PUT", "/api/v1/recipients/u_bob",
		`{"name":null,"name":"Bob"}`, 200)
	if got["name"] != "Bob" {
		t.Fatalf("name sent after a null = %v, want Bob", got["name"])
	}
}
