package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestHelpIsNotAnError(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"serve", "-h"}, {"demo", "-help"}, {"migrate", "-h"}, {"simulate", "-h"}} {
		var out, errOut bytes.Buffer
		if err := run(context.Background(), args, func(string) string { return "" }, &out, &errOut); err != nil {
			t.Errorf("lull %s: %v", strings.Join(args, " "), err)
		}
		if !strings.Contains(out.String()+errOut.String(), "LULL_") && args[0] != "simulate" {
			t.Errorf("lull %s printed no settings:\n%s", strings.Join(args, " "), errOut.String())
		}
	}
	if err := run(context.Background(), []string{"serve", "-bogus"}, func(string) string { return "" }, io.Discard, io.Discard); err == nil {
		t.Error("an unknown flag was accepted")
	}
}

func TestSecretsFromFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	env := map[string]string{
		"LULL_SECRET_FILE":         write("secret", strings.Repeat("s", 40)+"\n"),
		"LULL_API_KEY_FILE":        write("key", "lull_from_file\r\n"),
		"LULL_ADMIN_PASSWORD_FILE": write("pw", "pass word"),
		"LULL_SMTP_URL_FILE":       write("smtp", "smtp://u:p@mail.example:25"),
		"DATABASE_URL_FILE":        write("db", "postgres://x@y/z"),
	}
	c, err := loadConfig(nil, func(k string) string { return env[k] }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	got := []string{c.Secret, c.APIKey, c.AdminPassword, c.SMTPURL, c.DatabaseURL}
	want := []string{strings.Repeat("s", 40), "lull_from_file", "pass word", "smtp://u:p@mail.example:25", "postgres://x@y/z"}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("value %d = %q, want %q", i, got[i], want[i])
		}
	}

	env["LULL_API_KEY"] = "also_set"
	if _, err := loadConfig(nil, func(k string) string { return env[k] }, io.Discard); err == nil || !strings.Contains(err.Error(), "not both") {
		t.Errorf("a secret set twice: err = %v", err)
	}
	delete(env, "LULL_API_KEY")
	env["LULL_SECRET_FILE"] = filepath.Join(dir, "missing")
	if _, err := loadConfig(nil, func(k string) string { return env[k] }, io.Discard); err == nil || !strings.Contains(err.Error(), "LULL_SECRET_FILE") {
		t.Errorf("a missing secret file: err = %v", err)
	}
	// Only secrets are read from files.
	if _, err := loadConfig(nil, func(k string) string { return map[string]string{"LULL_ADDR_FILE": "/nonexistent"}[k] }, io.Discard); err != nil {
		t.Errorf("LULL_ADDR_FILE is not a setting, yet: %v", err)
	}
}

func TestLogLevelAndFormat(t *testing.T) {
	t.Parallel()
	env := map[string]string{"LULL_LOG_LEVEL": "warn", "LULL_LOG_FORMAT": "json"}
	c, err := loadConfig(nil, func(k string) string { return env[k] }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	logger, riverLogger := newLogger(c, &buf)
	logger.Info("hidden")
	logger.Warn("shown", "n", 1)
	riverLogger.Info("river routine")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("log = %q, want one warning", buf.String())
	}
	var rec map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &rec); err != nil || rec["msg"] != "shown" {
		t.Errorf("log line %q is not the JSON warning (%v)", lines[0], err)
	}

	// At info, River's routine lines are left out and lull's kept.
	c.LogLevel, c.LogFormat = slog.LevelInfo, "text"
	buf.Reset()
	logger, riverLogger = newLogger(c, &buf)
	logger.Info("lull line")
	riverLogger.Info("river routine")
	if !strings.Contains(buf.String(), "lull line") || strings.Contains(buf.String(), "river routine") {
		t.Errorf("log at info = %q", buf.String())
	}
	for _, bad := range []map[string]string{{"LULL_LOG_LEVEL": "loud"}, {"LULL_LOG_FORMAT": "xml"}} {
		if _, err := loadConfig(nil, func(k string) string { return bad[k] }, io.Discard); err == nil {
			t.Errorf("%v was accepted", bad)
		}
	}
}
