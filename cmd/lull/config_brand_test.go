package main

import (
	"io"
	"strings"
	"testing"
)

// TestConfigBrand: the brand comes from the environment (and flags), and
// a value the console would refuse stops the start with the variable's
// name, rather than reaching every email.
func TestConfigBrand(t *testing.T) {
	t.Parallel()
	env := map[string]string{"LULL_PRODUCT_NAME": "Acme Docs", "LULL_PRODUCT_URL": "https://docs.acme.example/",
		"LULL_LOGO_URL": "https://docs.acme.example/logo.png", "LULL_BRAND_COLOR": "#0f5132", "LULL_MAIL_FROM_NAME": "Acme"}
	getenv := func(k string) string { return env[k] }
	c, err := loadConfig([]string{"-LULL_MAIL_FROM_NAME=Acme Docs bot"}, getenv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if b := c.Brand; b.ProductName != "Acme Docs" || b.ProductURL != env["LULL_PRODUCT_URL"] || b.LogoURL != env["LULL_LOGO_URL"] ||
		b.Color != "#0f5132" || b.FromName != "Acme Docs bot" {
		t.Fatalf("brand %+v", b)
	}
	for name, bad := range map[string]string{"LULL_BRAND_COLOR": "#ffff00", "LULL_LOGO_URL": "file:///etc/passwd",
		"LULL_PRODUCT_URL": "javascript:alert(1)", "LULL_PRODUCT_NAME": strings.Repeat("A", 61),
		// No address: every email would be refused when sent, silently.
		"LULL_MAIL_FROM": "Acme Notifications"} {
		good := env[name]
		env[name] = bad
		if _, err := loadConfig(nil, getenv, io.Discard); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s=%s gave %v, want an error naming it", name, bad, err)
		}
		env[name] = good
	}
}
