package main

import (
	"io"
	"strings"
	"testing"
)

// TestConfigMaxData: LULL_MAX_DATA defaults to 64 KiB, is read from the
// environment and overridden by its flag, and a size that not even {}
// fits is refused.
func TestConfigMaxData(t *testing.T) {
	t.Parallel()
	env := map[string]string{}
	getenv := func(k string) string { return env[k] }
	c, err := loadConfig(nil, getenv, io.Discard)
	if err != nil || c.MaxData != 65536 {
		t.Fatalf("default LULL_MAX_DATA = %v (%v), want 65536", c, err)
	}
	env["LULL_MAX_DATA"] = "1024"
	if c, err = loadConfig(nil, getenv, io.Discard); err != nil || c.MaxData != 1024 {
		t.Fatalf("LULL_MAX_DATA=1024 gave %v (%v)", c, err)
	}
	if c, err = loadConfig([]string{"-LULL_MAX_DATA=2048"}, getenv, io.Discard); err != nil || c.MaxData != 2048 {
		t.Fatalf("-LULL_MAX_DATA=2048 gave %v (%v)", c, err)
	}
	for _, bad := range []string{"1", "64k"} {
		env["LULL_MAX_DATA"] = bad
		if _, err := loadConfig(nil, getenv, io.Discard); err == nil || !strings.Contains(err.Error(), "LULL_MAX_DATA") {
			t.Errorf("LULL_MAX_DATA=%s gave %v, want an error naming it", bad, err)
		}
	}
}
