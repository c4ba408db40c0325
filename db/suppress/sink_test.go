package suppress_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/lull-dev/lull/bounce"
	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/db/dbtest"
	"github.com/lull-dev/lull/db/suppress"
)

// TestRedeliveredWebhookCountsOnce: a service that gets no answer, or a
// 5xx, sends the same events again (SendGrid for up to 72 hours). A soft
// bounce from a service that names no batch is known again only by its
// time; that time was when lull heard it, so each redelivery counted as a
// new soft bounce, and three deliveries of one deferral suppressed the
// address. The event's own time makes the redelivery the same report.
func TestRedeliveredWebhookCountsOnce(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := x509.MarshalPKIXPublicKey(&key.PublicKey)
	w, err := bounce.NewWebhooks(bounce.WebhookConfig{SendGridKey: base64.StdEncoding.EncodeToString(pub)},
		bounce.VERP{}, &suppress.Sink{DB: d}, nil)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("POST /webhooks/{service}", w)
	sent := time.Now().Add(-time.Minute).Unix()
	body := `[{"email":"later@example.com","timestamp":` + strconv.FormatInt(sent, 10) +
		`,"event":"deferred","sg_event_id":"t7LEShmowp86DTdUW8M-GQ==","response":"400 try again later"}]`
	for i := range 3 {
		ts := strconv.FormatInt(time.Now().Unix(), 10)
		digest := sha256.Sum256([]byte(ts + body))
		sig, err := ecdsa.SignASN1(rand.Reader, key, digest[:])
		if err != nil {
			t.Fatal(err)
		}
		req := httptest.NewRequest(http.MethodPost, "/webhooks/sendgrid", bytes.NewReader([]byte(body)))
		req.Header.Set("X-Twilio-Email-Event-Webhook-Signature", base64.StdEncoding.EncodeToString(sig))
		req.Header.Set("X-Twilio-Email-Event-Webhook-Timestamp", ts)
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		if rec.Code != http.StatusNoContent {
			t.Fatalf("delivery %d: %d %s", i+1, rec.Code, rec.Body)
		}
	}
	var n int
	if err := d.Pool.QueryRow(t.Context(), `SELECT count(*) FROM bounce_reports`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d reports stored (%v), want 1", n, err)
	}
	if s, err := db.GetSuppression(t.Context(), d.Pool, "later@example.com"); !errors.Is(err, db.ErrNotFound) {
		t.Fatalf("one deferral heard three times suppressed the address: %+v %v", s, err)
	}
}

// TestReportFromAFastClockCountsOnce: a service whose clock runs a few
// seconds ahead reports an event "in the future". Its time was replaced
// by the time heard, so the same event heard again minutes later (a
// redelivery) carried another time and counted as a second soft bounce.
func TestReportFromAFastClockCountsOnce(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	sink := &suppress.Sink{DB: d, Now: func() time.Time { return now }}
	r := bounce.Report{Address: "fast@example.com", Kind: bounce.Soft, Status: "4.2.2", Source: "sendgrid", At: now.Add(3 * time.Second)}
	for range 3 {
		if err := sink.Record(t.Context(), r); err != nil {
			t.Fatal(err)
		}
		now = now.Add(5 * time.Minute)
	}
	var n int
	if err := d.Pool.QueryRow(t.Context(), `SELECT count(*) FROM bounce_reports`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d reports stored (%v), want 1", n, err)
	}
	if _, err := db.GetSuppression(t.Context(), d.Pool, r.Address); !errors.Is(err, db.ErrNotFound) {
		t.Fatalf("one soft bounce heard three times suppressed the address: %v", err)
	}
}
