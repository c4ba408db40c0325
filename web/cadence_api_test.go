package web_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestCadencesThroughTheAPI sets the hourly, several-day weekly and
// monthly digests, reads them back, and refuses what they cannot be,
// naming the field.
func TestCadencesThroughTheAPI(t *testing.T) {
	t.Parallel()
	a := setupAPI(t)
	a.mustCall(t, "PUT", "/api/v1/types/comment", `{"name":"Comments","default_mode":"hourly"}`, 200)
	a.mustCall(t, "PUT", "/api/v1/types/recap", `{"name":"Recap","default_mode":"monthly"}`, 200)
	a.mustCall(t, "PUT", "/api/v1/recipients/u_bob", `{"email":"bob@example.com"}`, 200)
	const prefs = "/api/v1/recipients/u_bob/preferences"

	p := a.mustCall(t, "GET", prefs, "", 200)
	digest := func(p map[string]any) string {
		d := p["digest"].(map[string]any)
		return fmt.Sprintf("%v %v %v %v %v %v", d["weekly_on"], d["weekly_days"], d["weekly_at"], d["every_hours"], d["monthly_day"], d["monthly_at"])
	}
	if got := digest(p); got != "monday [monday] 08:00 4 1 08:00" {
		t.Fatalf("defaults: %s", got)
	}
	p = a.mustCall(t, "PUT", prefs, `{"digest":{"weekly_days":["thursday","mon"],"every_hours":6,"monthly_day":31,"monthly_at":"09:30"},
		"types":{"comment":{"mode":"monthly"},"recap":{"mode":"hourly"}}}`, 200)
	if got := digest(p); got != "monday [monday thursday] 08:00 6 31 09:30" {
		t.Fatalf("after PUT: %s", got)
	}
	// A partial PUT keeps the days; weekly_on alone makes one day.
	p = a.mustCall(t, "PUT", prefs, `{"digest":{"weekly_at":"07:00"}}`, 200)
	if got := digest(p); got != "monday [monday thursday] 07:00 6 31 09:30" {
		t.Fatalf("partial PUT: %s", got)
	}
	p = a.mustCall(t, "PUT", prefs, `{"digest":{"weekly_on":"friday"}}`, 200)
	if d := p["digest"].(map[string]any); d["weekly_on"] != "friday" || !slices.Equal(toStrings(d["weekly_days"]), []string{"friday"}) {
		t.Fatalf("weekly_on alone: %v", d)
	}
	for _, c := range []struct{ body, field string }{
		{`{"digest":{"every_hours":5}}`, "digest.every_hours"},
		{`{"digest":{"every_hours":0}}`, "digest.every_hours"},
		{`{"digest":{"every_hours":-4}}`, "digest.every_hours"},
		{`{"digest":{"monthly_day":32}}`, "digest.monthly_day"},
		{`{"digest":{"monthly_day":0}}`, "digest.monthly_day"},
		{`{"digest":{"monthly_at":"24:00"}}`, "digest.monthly_at"},
		{`{"digest":{"weekly_days":[]}}`, "digest.weekly_days"},
		{`{"digest":{"weekly_days":["funday"]}}`, "digest.weekly_days"},
		{`{"digest":{"weekly_days":null}}`, "digest.weekly_days"},
		{`{"digest":{"weekly_days":["monday"],"weekly_on":"tuesday"}}`, "digest.weekly_on"},
		{`{"types":{"comment":{"mode":"yearly"}}}`, "types.comment.mode"},
	} {
		if got, p := a.call(t, "PUT", prefs, c.body); got != 422 || fieldOf(p) != c.field {
			t.Errorf("%s: status %d, field %q, want 422 naming %s: %v", c.body, got, fieldOf(p), c.field, p)
		}
	}
	// One message a field, saying what it wants: a null is refused as a
	// null (not also as out of range), 4.0 as not a whole number.
	for body, msg := range map[string]string{
		`{"digest":{"every_hours":null}}`: "cannot be null",
		`{"digest":{"monthly_day":null}}`: "cannot be null",
		`{"digest":{"every_hours":4.0}}`:  "must be a whole number",
		`{"digest":{"monthly_day":1e1}}`:  "must be a whole number",
	} {
		_, p := a.call(t, "PUT", prefs, body)
		errs, _ := p["errors"].([]any)
		if len(errs) != 1 || !strings.Contains(fmt.Sprint(errs[0]), msg) {
			t.Errorf("%s: errors %v, want one saying %q", body, errs, msg)
		}
	}
	if got := digest(a.mustCall(t, "GET", prefs, "", 200)); got != "friday [friday] 07:00 6 31 09:30" {
		t.Fatalf("refused PUTs changed the digest: %s", got)
	}
}

func toStrings(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}
