package i18n

import "testing"

// TestNumbersFollowARequestedNumberingSystem: a recipient stored as
// ar-u-nu-latn asked for Arabic with Latin digits, as most Arabic
// products in the Maghreb and online write them; counts follow it. Plain
// ar keeps CLDR's Arabic-Indic digits.
func TestNumbersFollowARequestedNumberingSystem(t *testing.T) {
	t.Parallel()
	for locale, want := range map[string]string{
		"ar-u-nu-latn":  "1,234",
		"de-u-nu-xyzzy": "1.234",
		"ar":            "١٬٢٣٤",
		"de-u-nu-latn":  "1.234",
		"en":            "1,234",
	} {
		if got := Resolve(locale, "", "").Number(1234); got != want {
			t.Errorf("%s: Number(1234) = %q, want %q", locale, got, want)
		}
	}
}
