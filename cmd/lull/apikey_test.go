package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/lull-dev/lull/db/dbtest"
)

// TestAPIKeyCommands creates, lists and revokes keys through the command
// line: the list never shows a key, revoking works by id or by the key
// itself, and revoking a key twice is an error.
func TestAPIKeyCommands(t *testing.T) {
	t.Parallel()
	env := map[string]string{"DATABASE_URL": dbtest.NewURL(t)}
	lull := func(args ...string) (string, error) {
		var out, errOut bytes.Buffer
		err := run(context.Background(), args, func(k string) string { return env[k] }, &out, &errOut)
		return out.String() + errOut.String(), err
	}
	key, err := lull("apikey", "create", "ci")
	if err != nil || !strings.HasPrefix(key, "lull_") {
		t.Fatalf("apikey create: %q, %v", key, err)
	}
	key = strings.TrimSpace(key)
	other, _ := lull("apikey", "create", "other")
	list, err := lull("apikey", "list")
	if err != nil || !strings.Contains(list, "\tci\t") || !strings.Contains(list, "live") || strings.Contains(list, key) {
		t.Fatalf("apikey list: %q, %v", list, err)
	}
	if out, err := lull("apikey", "revoke", key); err != nil || !strings.Contains(out, "revoked") {
		t.Fatalf("apikey revoke KEY: %q, %v", out, err)
	}
	if out, err := lull("apikey", "revoke", "2"); err != nil || !strings.Contains(out, "api key 2 revoked") {
		t.Fatalf("apikey revoke ID: %q, %v", out, err)
	}
	if _, err := lull("apikey", "revoke", strings.TrimSpace(other)); err == nil || strings.Contains(err.Error(), strings.TrimSpace(other)) {
		t.Fatalf("revoking a revoked key: %v; want an error that does not print the key", err)
	}
	if list, _ := lull("apikey", "list"); strings.Count(list, "revoked") != 2 {
		t.Fatalf("apikey list after revoking both: %q", list)
	}
	if _, err := lull("apikey", "rotate"); err == nil {
		t.Fatal("an unknown subcommand was accepted")
	}
}
