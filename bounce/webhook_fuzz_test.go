package bounce

import (
	"net/http"
	"testing"
)

// fuzzWebhook posts a correctly signed body (so the fuzzer reaches the
// decoding behind the signature check) and the same body unsigned, and
// holds both to an answer without a panic, and any report to being well
// formed. An unsigned request must never record anything.
func fuzzWebhook(t *testing.T, service string, sign func(*webhookBundle, string) signed, body string) {
	b := setupWebhooks(t)
	rec := b.post(service, sign(b, body))
	switch rec.Code {
	case http.StatusNoContent, http.StatusBadRequest, http.StatusUnauthorized:
	default:
		t.Fatalf("status %d: %s", rec.Code, rec.Body)
	}
	for _, r := range b.sink.all() {
		if r.Address == "" || r.Kind == "" || r.Source != service || len(r.Detail) > maxDetailLength {
			t.Fatalf("malformed report %+v", r)
		}
	}
	u := setupWebhooks(t)
	if rec := u.post(service, signed{body: []byte(body)}); rec.Code == http.StatusNoContent || len(u.sink.all()) > 0 {
		t.Fatalf("an unsigned request was taken: %d", rec.Code)
	}
}

func FuzzSES(f *testing.F) {
	f.Add(testdata(f, "ses_bounce.json"))
	f.Add(testdata(f, "ses_complaint.json"))
	f.Add(`{"eventType":"Bounce","bounce":{"bouncedRecipients":[{"emailAddress":"a@b"}]}}`)
	f.Fuzz(func(t *testing.T, msg string) {
		fuzzWebhook(t, "ses", func(b *webhookBundle, s string) signed {
			return b.keys.snsSign(t, snsMessage{Type: "Notification", Message: s}, "2")
		}, msg)
	})
}

func FuzzPostmark(f *testing.F) {
	f.Add(testdata(f, "postmark_bounce.json"))
	f.Add(testdata(f, "postmark_spam.json"))
	f.Fuzz(func(t *testing.T, body string) {
		fuzzWebhook(t, "postmark", func(b *webhookBundle, s string) signed { return b.keys.postmarkAuth(s) }, body)
	})
}

func FuzzMailgun(f *testing.F) {
	f.Add(testdata(f, "mailgun_failed.json"))
	f.Add(testdata(f, "mailgun_complained.json"))
	f.Fuzz(func(t *testing.T, eventData string) {
		fuzzWebhook(t, "mailgun", func(b *webhookBundle, s string) signed { return b.keys.mailgunSign(t, s, testNow) }, eventData)
	})
}

func FuzzSendGrid(f *testing.F) {
	f.Add(testdata(f, "sendgrid_events.json"))
	f.Add(`[{"email":"a@b","event":"dropped","reason":"Invalid"}]`)
	f.Fuzz(func(t *testing.T, body string) {
		fuzzWebhook(t, "sendgrid", func(b *webhookBundle, s string) signed { return b.keys.sendgridSign(t, s, testNow) }, body)
	})
}

func FuzzResend(f *testing.F) {
	f.Add(testdata(f, "resend_bounced.json"))
	f.Add(testdata(f, "resend_complained.json"))
	f.Fuzz(func(t *testing.T, body string) {
		fuzzWebhook(t, "resend", func(b *webhookBundle, s string) signed { return b.keys.resendSign(t, s, testNow) }, body)
	})
}
