package bounce

import (
	"context"
	"crypto/x509"
	"net/http"
	"testing"
	"time"
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
