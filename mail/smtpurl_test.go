package mail

import (
	"strings"
	"testing"
)

func TestParseURL(t *testing.T) {
	t.Parallel()
	good := []struct {
		url  string
		want endpoint
	}{
		{"smtp://mail.example", endpoint{host: "mail.example", port: 587}},
		{"smtp://mail.example:25", endpoint{host: "mail.example", port: 25}},
		{"smtp://mail.example/", endpoint{host: "mail.example", port: 587}},
		{"smtps://mail.example", endpoint{host: "mail.example", port: 465, security: implicitTLS}},
		{"smtps://mail.example:2465", endpoint{host: "mail.example", port: 2465, security: implicitTLS}},
		{"smtp://mail.example?starttls=required", endpoint{host: "mail.example", port: 587, security: startTLSRequired}},
		{"smtp://mail.example?starttls=opportunistic", endpoint{host: "mail.example", port: 587}},
		{"smtp://user:p%40ss%3Aword@mail.example:587", endpoint{host: "mail.example", port: 587, user: "user", pass: "p@ss:word"}},
		{"smtp://apikey@mail.example", endpoint{host: "mail.example", port: 587, user: "apikey"}},
		{"smtp://127.0.0.1:2525?insecure_skip_verify=true&insecure_auth=1", endpoint{host: "127.0.0.1", port: 2525, skipVerify: true, insecureAuth: true}},
		{"smtp://[::1]:2525", endpoint{host: "::1", port: 2525}},
		{"smtps://u:p@mail.example?insecure_skip_verify=false", endpoint{host: "mail.example", port: 465, security: implicitTLS, user: "u", pass: "p"}},
	}
	for _, tc := range good {
		t.Run(tc.url, func(t *testing.T) {
			t.Parallel()
			got, err := parseURL(tc.url)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
			if _, err := NewSMTP(SMTPConfig{URL: tc.url}, nil); err != nil {
				t.Fatalf("NewSMTP: %v", err)
			}
		})
	}

	bad := []struct{ url, says string }{
		{"", "no scheme"},
		{"mail.example", "no scheme"},
		{"mail.example:25", "scheme"},
		{"http://mail.example", `scheme "http"`},
		{"smtp://", "no host"},
		{"smtp:mail.example", "no host"},
		{"smtp://:25", "no host"},
		{"smtp://mail.example:port", "invalid port"},
		{"smtp://mail.example:0", "port"},
		{"smtp://mail.example:70000", "port"},
		{"smtp://mail.example/relay", "path"},
		{"smtp://mail.example?starttls=yes", "starttls"},
		{"smtps://mail.example?starttls=required", "starttls does not apply"},
		{"smtp://mail.example?insecure_skip_verify=maybe", "insecure_skip_verify"},
		{"smtp://mail.example?startls=required", `unknown option "startls"`},
		{"smtp://user:hunter2@mail.example?tls=1", "unknown option"},
		{"smtp://user:hunter2@mail.example:port", "invalid port"},
		{"smtp://user:hunter2@mail.example\n", "invalid control character"},
	}
	for _, tc := range bad {
		t.Run(tc.url, func(t *testing.T) {
			t.Parallel()
			_, err := parseURL(tc.url)
			if err == nil {
				t.Fatal("no error")
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "LULL_SMTP_URL") || !strings.Contains(msg, tc.says) {
				t.Errorf("error %q, want it to start with LULL_SMTP_URL and say %q", msg, tc.says)
			}
			if strings.Contains(msg, "hunter2") {
				t.Errorf("error %q repeats the password", msg)
			}
		})
	}
}

func TestEndpointString(t *testing.T) {
	t.Parallel()
	e, err := parseURL("smtps://user:hunter2@mail.example")
	if err != nil {
		t.Fatal(err)
	}
	if got := e.String(); got != "smtps://user@mail.example:465" {
		t.Fatalf("String() = %q", got)
	}
}
