package bounce

import (
	"bufio"
	"context"
	"crypto/x509"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-smtp"
)

// TestSESRefusesCertificatesOffSNS: the SNS host check let through
// sns.s3.amazonaws.com and sns.s3-<region>.amazonaws.com, which are an
// S3 bucket named "sns" that anyone owning it can fill with a
// certificate of their own; and any path or query on an SNS host, so
// that every forged request made lull fetch a fresh URL. A message signed
// with a key the bucket serves must be refused before anything is
// fetched.
func TestSESRefusesCertificatesOffSNS(t *testing.T) {
	t.Parallel()
	k := loadKeys(t)
	for _, u := range []string{
		"https://sns.s3.amazonaws.com/SimpleNotificationService-test.pem",
		"https://sns.s3-us-west-2.amazonaws.com/SimpleNotificationService-test.pem",
		"https://sns.us-east-1.amazonaws.com/cert.pem",
		"https://sns.us-east-1.amazonaws.com/SimpleNotificationService-test.pem?x=1",
		"https://sns.us-east-1.amazonaws.com/a/../SimpleNotificationService-test.pem",
	} {
		t.Run(u, func(t *testing.T) {
			fetches := 0
			anyURL := func(context.Context, string) (*x509.Certificate, error) { fetches++; return k.snsCert, nil }
			sink := &recorder{}
			w, err := NewWebhooks(WebhookConfig{SESTopics: []string{testTopic}, Certs: anyURL}, testVERP, sink, nil)
			if err != nil {
				t.Fatal(err)
			}
			w.now = func() time.Time { return testNow }
			mux := http.NewServeMux()
			mux.Handle("POST /webhooks/{service}", w)
			b := &webhookBundle{keys: k, sink: sink, mux: mux}
			req := k.snsSign(t, snsMessage{Type: "Notification", Message: testdata(t, "ses_bounce.json"), SigningCertURL: u}, "2")
			if rec := b.post("ses", req); rec.Code != http.StatusUnauthorized {
				t.Fatalf("status %d, want 401: %s", rec.Code, rec.Body)
			}
			if fetches != 0 || len(sink.all()) != 0 {
				t.Fatalf("fetched %d times, recorded %+v", fetches, sink.all())
			}
		})
	}
}

// TestReceiverCapsConnectionsPerClient: one host could open all of the
// receiver's connections and idle in them, and bounces from every other
// server waited until it let go. A host over its share is now told 421
// at once, and the others are still served.
func TestReceiverCapsConnectionsPerClient(t *testing.T) {
	t.Parallel()
	_, addr := startReceiver(t)
	greet := func(local string) string {
		t.Helper()
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
		c, err := d.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil {
			t.Fatalf("%s: %v", local, err)
		}
		return line
	}
	for i := range maxPerClient {
		if got := greet("127.0.0.1"); !strings.HasPrefix(got, "220") {
			t.Fatalf("connection %d: %q, want the greeting", i+1, got)
		}
	}
	if got := greet("127.0.0.1"); !strings.HasPrefix(got, "421") {
		t.Fatalf("one connection over the share: %q, want 421", got)
	}
	if got := greet("127.0.0.2"); !strings.HasPrefix(got, "220") {
		t.Fatalf("another host: %q, want the greeting", got)
	}
}

// TestReceiverCutsOffRecipientGuessing: a conversation could name
// recipients that are no return path without end, each refused and
// logged, so one client could fill the log at line speed. After
// maxRefused it is told 421 and closed.
func TestReceiverCutsOffRecipientGuessing(t *testing.T) {
	t.Parallel()
	_, addr := startReceiver(t)
	c, err := smtp.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Mail("", nil); err != nil {
		t.Fatal(err)
	}
	for i := range maxRefused {
		if err := c.Rcpt("bounces+"+strconv.Itoa(i)+"-guess@bounces.example.com", nil); smtpCode(err) != 550 {
			t.Fatalf("guess %d: %v, want 550", i+1, err)
		}
	}
	if err := c.Rcpt("bounces+99-guess@bounces.example.com", nil); smtpCode(err) != 421 {
		t.Fatalf("one guess too many: %v, want 421", err)
	}
	if err := c.Noop(); err == nil {
		t.Fatal("the conversation is still open")
	}
}
