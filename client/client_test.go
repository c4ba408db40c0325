package client

import (
	"encoding/json"
	"testing"
)

// TestMergeBodies: a field left out is absent from the body, Null is
// null and Value is the value, at every level of a merge; a recipient
// with details is an object and one without is a bare id.
func TestMergeBodies(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		v    any
		want string
	}{
		{"LeftOut", RecipientPatch{}, `{}`},
		{"NullAndValue", RecipientPatch{Email: Null[string](), Name: Value("Bob")}, `{"email":null,"name":"Bob"}`},
		{"EmptyValue", RecipientPatch{Locale: Value("")}, `{"locale":""}`},
		{"Nested", PreferencesPatch{QuietHours: Null[QuietHours](), Types: Value(map[string]Nullable[TypePreferencePatch]{
			"a": Null[TypePreferencePatch](),
			"b": Value(TypePreferencePatch{Mode: "cooldown", Window: Value("15m"), Lead: Null[bool]()}),
		})}, `{"quiet_hours":null,"types":{"a":null,"b":{"mode":"cooldown","window":"15m","lead":null}}}`},
		{"AllTypesCleared", PreferencesPatch{Types: Null[map[string]Nullable[TypePreferencePatch]]()}, `{"types":null}`},
		{"Recipients", []RecipientRef{{ID: "u_bob"}, {ID: "u_new", Inline: true}, {ID: "u_carol", Email: "carol@example.com"}},
			`["u_bob",{"id":"u_new"},{"id":"u_carol","email":"carol@example.com"}]`},
		{"RecipientLocale", []RecipientRef{{ID: "u_dora", Locale: "de"}}, `[{"id":"u_dora","locale":"de"}]`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, err := json.Marshal(tc.v)
			if err != nil || string(b) != tc.want {
				t.Fatalf("%s (%v), want %s", b, err, tc.want)
			}
		})
	}
}
