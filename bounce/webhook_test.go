package bounce

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	testTopic   = "arn:aws:sns:us-east-1:123456789012:lull-bounces"
	testCertURL = "https://sns.us-east-1.amazonaws.com/SimpleNotificationService-test.pem"
)

// keys are the test's own signing keys, made once: an SNS-like RSA
// certificate, a SendGrid-like P-256 key, and shared secrets.
type keys struct {
	snsKey      *rsa.PrivateKey
	snsCert     *x509.Certificate
	sendgrid    *ecdsa.PrivateKey
	mailgun     string
	resend      []byte
	postmark    string
	certFetches int
	mu          sync.Mutex
}

var (
	testKeysOnce sync.Once
	testKeys     *keys
)

func loadKeys(t testing.TB) *keys {
	testKeysOnce.Do(func() {
		k := &keys{mailgun: "key-3ax6xnjp29jd6fds4gc373sgvjxteol0", resend: []byte("a 24-byte test secret...."), postmark: "s3cret-postmark-token"}
		var err error
		if k.snsKey, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
			panic(err)
		}
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sns.amazonaws.com"},
			NotBefore: testNow.Add(-24 * time.Hour), NotAfter: testNow.Add(365 * 24 * time.Hour)}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.snsKey.PublicKey, k.snsKey)
		if err != nil {
			panic(err)
		}
		if k.snsCert, err = x509.ParseCertificate(der); err != nil {
			panic(err)
		}
		if k.sendgrid, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
			panic(err)
		}
		testKeys = k
	})
	return testKeys
}

// fetch is the SNS certificate fetcher the tests inject: it serves the
// test certificate at the one URL and counts the fetches.
func (k *keys) fetch(_ context.Context, u string) (*x509.Certificate, error) {
	k.mu.Lock()
	k.certFetches++
	k.mu.Unlock()
	if u != testCertURL {
		return nil, errors.New("no such certificate")
	}
	return k.snsCert, nil
}

// webhookBundle is a Webhooks with every service configured.
type webhookBundle struct {
	keys *keys
	sink *recorder
	mux  *http.ServeMux
}

func setupWebhooks(t *testing.T) *webhookBundle {
	t.Helper()
	k := loadKeys(t)
	pub, err := x509.MarshalPKIXPublicKey(&k.sendgrid.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	sink := &recorder{}
	w, err := NewWebhooks(WebhookConfig{
		SESTopics: []string{testTopic}, Certs: k.fetch,
		PostmarkToken: k.postmark, MailgunKey: k.mailgun,
		SendGridKey:  base64.StdEncoding.EncodeToString(pub),
		ResendSecret: "whsec_" + base64.StdEncoding.EncodeToString(k.resend),
	}, testVERP, sink, nil)
	if err != nil {
		t.Fatal(err)
	}
	w.now = func() time.Time { return testNow }
	mux := http.NewServeMux()
	mux.Handle("POST /webhooks/{service}", w)
	return &webhookBundle{keys: k, sink: sink, mux: mux}
}

// signed is a request as its service would send it.
type signed struct {
	body   []byte
	header http.Header
}

func (b *webhookBundle) post(service string, s signed) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, "/webhooks/"+service, bytes.NewReader(s.body))
	for k, v := range s.header {
		req.Header[k] = v
	}
	rec := httptest.NewRecorder()
	b.mux.ServeHTTP(rec, req)
	return rec
}

func testdata(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return strings.ReplaceAll(string(b), "{{RETURN_PATH}}", testVERP.Address(42))
}

// snsSign wraps an SES notification in an SNS message signed with the
// given SignatureVersion.
func (k *keys) snsSign(t testing.TB, m snsMessage, version string) signed {
	t.Helper()
	m.SignatureVersion, m.SigningCertURL = version, cmpOr(m.SigningCertURL, testCertURL)
	m.MessageId = cmpOr(m.MessageId, "22b80b92-fdea-4c2c-8f9d-bdfb0c7bf324")
	m.TopicArn = cmpOr(m.TopicArn, testTopic)
	m.Timestamp = cmpOr(m.Timestamp, testNow.Add(-time.Minute).Format(time.RFC3339Nano))
	toSign, err := m.canonical()
	if err != nil {
		t.Fatal(err)
	}
	var sig []byte
	if version == "1" {
		d := sha1.Sum(toSign)
		sig, err = rsa.SignPKCS1v15(rand.Reader, k.snsKey, crypto.SHA1, d[:])
	} else {
		d := sha256.Sum256(toSign)
		sig, err = rsa.SignPKCS1v15(rand.Reader, k.snsKey, crypto.SHA256, d[:])
	}
	if err != nil {
		t.Fatal(err)
	}
	m.Signature = base64.StdEncoding.EncodeToString(sig)
	body, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return signed{body: body, header: http.Header{"X-Amz-Sns-Message-Type": {m.Type}}}
}

func (k *keys) mailgunSign(t testing.TB, eventData string, at time.Time) signed {
	t.Helper()
	ts, token := strconv.FormatInt(at.Unix(), 10), "a8ce0edb2dd8301dee6c2405235584e45aa91d1e9f979f3de0"
	mac := hmac.New(sha256.New, []byte(k.mailgun))
	mac.Write([]byte(ts + token))
	body := `{"signature":{"timestamp":"` + ts + `","token":"` + token + `","signature":"` + hex.EncodeToString(mac.Sum(nil)) + `"},"event-data":` + eventData + `}`
	return signed{body: []byte(body), header: http.Header{"Content-Type": {"application/json"}}}
}

func (k *keys) sendgridSign(t testing.TB, body string, at time.Time) signed {
	t.Helper()
	ts := strconv.FormatInt(at.Unix(), 10)
	d := sha256.Sum256([]byte(ts + body))
	sig, err := ecdsa.SignASN1(rand.Reader, k.sendgrid, d[:])
	if err != nil {
		t.Fatal(err)
	}
	return signed{body: []byte(body), header: http.Header{
		sendgridSignature: {base64.StdEncoding.EncodeToString(sig)}, sendgridTimestamp: {ts}}}
}

func (k *keys) resendSign(t testing.TB, body string, at time.Time) signed {
	t.Helper()
	id, ts := "msg_p5jXN8AQM9LWM0D4loKWxJek", strconv.FormatInt(at.Unix(), 10)
	mac := hmac.New(sha256.New, k.resend)
	mac.Write([]byte(id + "." + ts + "." + body))
	return signed{body: []byte(body), header: http.Header{"Svix-Id": {id}, "Svix-Timestamp": {ts},
		"Svix-Signature": {"v1,bm90IHRoaXMgb25l v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))}}}
}

func (k *keys) postmarkAuth(body string) signed {
	h := http.Header{}
	req, _ := http.NewRequest(http.MethodPost, "/", nil)
	req.SetBasicAuth("postmark", k.postmark)
	h.Set("Authorization", req.Header.Get("Authorization"))
	return signed{body: []byte(body), header: h}
}

// TestWebhooksAcceptSignedSamples posts each service's documented sample
// payloads, signed as the service signs them, and checks the reports.
func TestWebhooksAcceptSignedSamples(t *testing.T) {
	t.Parallel()
	b := setupWebhooks(t)
	k := b.keys
	now := testNow.Add(-30 * time.Second)
	cases := []struct {
		name, service string
		req           signed
		want          []Report
	}{
		{"SESBounceV1", "ses", k.snsSign(t, snsMessage{Type: "Notification", Message: testdata(t, "ses_bounce.json")}, "1"),
			[]Report{{Address: "jane@example.com", Kind: Hard, Status: "5.1.1", BatchID: 42, Source: "ses", Detail: "smtp; 550 5.1.1 <jane@example.com>... User", At: time.Date(2026, 11, 24, 11, 59, 38, 237e6, time.UTC)}}},
		{"SESComplaintV2", "ses", k.snsSign(t, snsMessage{Type: "Notification", Subject: new(string), Message: testdata(t, "ses_complaint.json")}, "2"),
			[]Report{{Address: "richard@example.com", Kind: Complaint, Status: "abuse", BatchID: 42, Source: "ses", Detail: "AnyCompany Feedback Loop (V0.01)", At: time.Date(2026, 11, 24, 11, 59, 38, 237e6, time.UTC)}}},
		{"SESSubscriptionConfirmation", "ses", k.snsSign(t, snsMessage{Type: "SubscriptionConfirmation", Token: "2336412f37",
			Message: "You have chosen to subscribe to the topic.", SubscribeURL: "https://sns.us-east-1.amazonaws.com/?Action=ConfirmSubscription&Token=2336412f37"}, "1"), nil},
		{"PostmarkBounce", "postmark", k.postmarkAuth(testdata(t, "postmark_bounce.json")),
			[]Report{{Address: "john@example.com", Kind: Hard, Status: "5.1.1", Source: "postmark",
				Detail: "The server was unable to deliver your message (ex: unknown user, mailbox not found). smtp;550 5.1.1 The email account that you tried to reach does not exist.", At: time.Date(2026, 11, 24, 11, 59, 54, 907025900, time.UTC)}}},
		{"PostmarkSpamComplaint", "postmark", signed{body: []byte(testdata(t, "postmark_spam.json")), header: http.Header{"X-Lull-Token": {k.postmark}}},
			[]Report{{Address: "john@example.com", Kind: Complaint, Status: "abuse", Source: "postmark", Detail: "Test spam complaint details", At: time.Date(2026, 11, 24, 11, 59, 54, 0, time.UTC)}}},
		{"MailgunFailed", "mailgun", k.mailgunSign(t, testdata(t, "mailgun_failed.json"), now),
			[]Report{{Address: "alice@example.com", Kind: Hard, Status: "5.1.1", BatchID: 42, Source: "mailgun",
				Detail: "bounce 550 5.1.1 The email account that you tried to reach does not exist Not delivered", At: time.Date(2026, 11, 24, 12, 0, 0, 375624e3, time.UTC)}}},
		{"MailgunComplained", "mailgun", k.mailgunSign(t, testdata(t, "mailgun_complained.json"), now),
			[]Report{{Address: "alice@example.com", Kind: Complaint, Status: "abuse", Source: "mailgun", At: time.Date(2026, 11, 24, 12, 0, 0, 433159e3, time.UTC)}}},
		{"SendGridEvents", "sendgrid", k.sendgridSign(t, testdata(t, "sendgrid_events.json"), now), []Report{
			{Address: "gone@example.com", Kind: Hard, Status: "5.0.0", Source: "sendgrid", Detail: "500 unknown recipient", At: testNow},
			{Address: "busy@example.com", Kind: Soft, Status: "4.7.0", Source: "sendgrid", Detail: "421 4.7.0 try again later", At: testNow},
			{Address: "later@example.com", Kind: Soft, Source: "sendgrid", Detail: "400 try again later", At: testNow},
			{Address: "angry@example.com", Kind: Complaint, Status: "abuse", Source: "sendgrid", At: testNow},
		}},
		{"ResendBounced", "resend", k.resendSign(t, testdata(t, "resend_bounced.json"), now),
			[]Report{{Address: "bounced@example.com", Kind: Hard, Status: "5.1.1", Source: "resend",
				Detail: "General The recipient's email provider sent a hard bounce message: 550 5.1.1 user unknown", At: time.Date(2026, 11, 24, 11, 59, 12, 126e6, time.UTC)}}},
		{"ResendComplained", "resend", k.resendSign(t, testdata(t, "resend_complained.json"), now),
			[]Report{{Address: "complained@example.com", Kind: Complaint, Status: "abuse", Source: "resend", At: time.Date(2026, 11, 24, 11, 59, 12, 126e6, time.UTC)}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := setupWebhooks(t)
			rec := b.post(c.service, c.req)
			if rec.Code != http.StatusNoContent {
				t.Fatalf("status %d: %s", rec.Code, rec.Body)
			}
			got := b.sink.all()
			if len(got) != len(c.want) {
				t.Fatalf("got %d reports, want %d:\n%+v", len(got), len(c.want), got)
			}
			for i := range got {
				if got[i] != c.want[i] {
					t.Errorf("report %d:\n got %+v\nwant %+v", i, got[i], c.want[i])
				}
			}
		})
	}
}

// TestWebhooksRefuseForgeries holds every adapter to refusing, with a
// problem naming the field and without a report, a request whose body was
// changed after signing, one without a signature, one signed with
// another key, and one signed too long ago.
func TestWebhooksRefuseForgeries(t *testing.T) {
	t.Parallel()
	k := loadKeys(t)
	now := testNow.Add(-30 * time.Second)
	stale := testNow.Add(-maxSkew - time.Minute)
	other := &keys{mailgun: "another-key", resend: []byte("another secret"), postmark: "guess"}
	other.snsKey, _ = rsa.GenerateKey(rand.Reader, 2048)
	other.sendgrid, _ = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	bounce := testdata(t, "ses_bounce.json")
	note := snsMessage{Type: "Notification", Message: bounce}
	tamper := func(s signed) signed {
		s.body = bytes.Replace(s.body, []byte("example.com"), []byte("example.net"), 1)
		return s
	}
	strip := func(s signed) signed { return signed{body: s.body} }
	cases := map[string]struct {
		service string
		req     signed
	}{
		"SESTampered":        {"ses", tamper(k.snsSign(t, note, "2"))},
		"SESUnsigned":        {"ses", signed{body: []byte(`{"Type":"Notification","TopicArn":"` + testTopic + `","Message":"{}"}`)}},
		"SESOtherKey":        {"ses", other.snsSign(t, note, "2")},
		"SESStale":           {"ses", k.snsSign(t, snsMessage{Type: "Notification", Message: bounce, Timestamp: testNow.Add(-snsSkew - time.Minute).Format(time.RFC3339)}, "2")},
		"SESOtherTopic":      {"ses", k.snsSign(t, snsMessage{Type: "Notification", Message: bounce, TopicArn: "arn:aws:sns:us-east-1:666666666666:evil"}, "1")},
		"SESCertOffAWS":      {"ses", k.snsSign(t, snsMessage{Type: "Notification", Message: bounce, SigningCertURL: "https://sns.us-east-1.amazonaws.com.evil.example/cert.pem"}, "1")},
		"SESCertOverHTTP":    {"ses", k.snsSign(t, snsMessage{Type: "Notification", Message: bounce, SigningCertURL: "http://sns.us-east-1.amazonaws.com/cert.pem"}, "1")},
		"SESVersion3":        {"ses", k.snsSign(t, note, "3")},
		"PostmarkWrongToken": {"postmark", other.postmarkAuth(testdata(t, "postmark_bounce.json"))},
		"PostmarkNoToken":    {"postmark", signed{body: []byte(testdata(t, "postmark_bounce.json"))}},
		"MailgunTampered": {"mailgun", signed{body: bytes.Replace(k.mailgunSign(t, testdata(t, "mailgun_failed.json"), now).body,
			[]byte(`"signature":"`), []byte(`"signature":"00`), 1)}},
		"MailgunOtherKey":  {"mailgun", other.mailgunSign(t, testdata(t, "mailgun_failed.json"), now)},
		"MailgunUnsigned":  {"mailgun", signed{body: []byte(`{"event-data":` + testdata(t, "mailgun_failed.json") + `}`)}},
		"MailgunStale":     {"mailgun", k.mailgunSign(t, testdata(t, "mailgun_failed.json"), stale)},
		"SendGridTampered": {"sendgrid", tamper(k.sendgridSign(t, testdata(t, "sendgrid_events.json"), now))},
		"SendGridOtherKey": {"sendgrid", other.sendgridSign(t, testdata(t, "sendgrid_events.json"), now)},
		"SendGridUnsigned": {"sendgrid", strip(k.sendgridSign(t, testdata(t, "sendgrid_events.json"), now))},
		"SendGridStale":    {"sendgrid", k.sendgridSign(t, testdata(t, "sendgrid_events.json"), stale)},
		"ResendTampered":   {"resend", tamper(k.resendSign(t, testdata(t, "resend_bounced.json"), now))},
		"ResendOtherKey":   {"resend", other.resendSign(t, testdata(t, "resend_bounced.json"), now)},
		"ResendUnsigned":   {"resend", strip(k.resendSign(t, testdata(t, "resend_bounced.json"), now))},
		"ResendStale":      {"resend", k.resendSign(t, testdata(t, "resend_bounced.json"), stale)},
		"ResendFuture":     {"resend", k.resendSign(t, testdata(t, "resend_bounced.json"), testNow.Add(maxSkew+time.Minute))},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setupWebhooks(t)
			rec := b.post(c.service, c.req)
			if rec.Code != http.StatusUnauthorized {
				t.Fatalf("status %d, want 401: %s", rec.Code, rec.Body)
			}
			var p struct {
				Status int
				Errors []struct{ Field string }
			}
			if rec.Header().Get("Content-Type") != "application/problem+json" || json.Unmarshal(rec.Body.Bytes(), &p) != nil ||
				p.Status != 401 || len(p.Errors) != 1 || p.Errors[0].Field == "" {
				t.Errorf("not a problem naming a field: %s %s", rec.Header().Get("Content-Type"), rec.Body)
			}
			if got := b.sink.all(); len(got) != 0 {
				t.Fatalf("a refused request recorded %+v", got)
			}
		})
	}
}

// TestMailgunTokenOnce: Mailgun signs the timestamp and token, not the
// event, so a captured request replayed with another event inside must
// be refused by its token.
func TestMailgunTokenOnce(t *testing.T) {
	t.Parallel()
	b := setupWebhooks(t)
	first := b.keys.mailgunSign(t, testdata(t, "mailgun_failed.json"), testNow)
	if rec := b.post("mailgun", first); rec.Code != http.StatusNoContent {
		t.Fatalf("first: %d %s", rec.Code, rec.Body)
	}
	forged := signed{body: bytes.Replace(first.body, []byte("alice@example.com"), []byte("victim@example.org"), -1)}
	if rec := b.post("mailgun", forged); rec.Code != http.StatusUnauthorized {
		t.Fatalf("replayed token: %d %s", rec.Code, rec.Body)
	}
	if got := b.sink.all(); len(got) != 1 || got[0].Address != "alice@example.com" {
		t.Fatalf("recorded %+v", got)
	}
}

func TestWebhooksOtherAnswers(t *testing.T) {
	t.Parallel()
	b := setupWebhooks(t)
	k := b.keys
	if rec := b.post("sparkpost", signed{body: []byte("{}")}); rec.Code != http.StatusNotFound {
		t.Errorf("an unconfigured service: %d", rec.Code)
	}
	big := signed{body: bytes.Repeat([]byte("x"), maxWebhookBytes+1)}
	if rec := b.post("mailgun", big); rec.Code != http.StatusRequestEntityTooLarge {
		t.Errorf("a huge body: %d", rec.Code)
	}
	// Signed, but not a payload the service sends.
	if rec := b.post("sendgrid", k.sendgridSign(t, `{"not":"an array"}`, testNow)); rec.Code != http.StatusBadRequest {
		t.Errorf("a signed non-array: %d %s", rec.Code, rec.Body)
	}
	b.sink.err = errors.New("database down")
	rec := b.post("resend", k.resendSign(t, testdata(t, "resend_bounced.json"), testNow))
	if rec.Code != http.StatusServiceUnavailable {
		t.Errorf("a failing sink: %d, want 503 so the service retries", rec.Code)
	}
	if len(b.sink.all()) != 0 {
		t.Error("recorded with a failing sink")
	}
}

func TestWebhooksSESCertificatesAreCached(t *testing.T) {
	t.Parallel()
	k := &keys{}
	*k = keys{snsKey: loadKeys(t).snsKey, snsCert: loadKeys(t).snsCert}
	fetch := newCertCache(k.fetch)
	for range 3 {
		if _, err := fetch(t.Context(), testCertURL); err != nil {
			t.Fatal(err)
		}
	}
	if k.certFetches != 1 {
		t.Fatalf("%d fetches, want 1", k.certFetches)
	}
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
