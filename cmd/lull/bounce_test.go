package main

import (
	"context"
	"io"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-smtp"

	"github.com/lull-dev/lull/bounce"
	"github.com/lull-dev/lull/db/dbtest"
	"github.com/lull-dev/lull/mail"
	"github.com/lull-dev/lull/mail/smtptest"
	"github.com/lull-dev/lull/mailtemplates"
)

func TestBounceConfigRefusesHalfSettings(t *testing.T) {
	t.Parallel()
	for name, env := range map[string]map[string]string{
		"ReceiverWithoutDomain": {"LULL_BOUNCE_ADDR": ":2525"},
		"SelectorWithoutKey":    {"LULL_DKIM_SELECTOR": "s1", "LULL_DKIM_DOMAIN": "example.com"},
		"ConfirmNotABool":       {"LULL_WEBHOOK_SES_CONFIRM": "yes"},
		"FeedbackIDWithColon":   {"LULL_FEEDBACK_ID": "acme:prod"},
		"FeedbackIDTooShort":    {"LULL_FEEDBACK_ID": "acme"},
		"BounceDomainAnAddress": {"LULL_BOUNCE_DOMAIN": "bounces@example.com"},
		"BounceDomainSpace":     {"LULL_BOUNCE_DOMAIN": "bounces example.com"},
		"DKIMSelectorTagBreak":  {"LULL_DKIM_KEY": "k.pem", "LULL_DKIM_SELECTOR": "s1; d=evil.example", "LULL_DKIM_DOMAIN": "example.com"},
		"DKIMDomainTrailingDot": {"LULL_DKIM_KEY": "k.pem", "LULL_DKIM_SELECTOR": "s1", "LULL_DKIM_DOMAIN": "example.com."},
	} {
		if _, err := loadConfig(nil, func(k string) string { return env[k] }, io.Discard); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	c, err := loadConfig(nil, func(k string) string {
		return map[string]string{"LULL_WEBHOOK_SES_TOPIC_ARN": "arn:a, arn:b ,", "LULL_BOUNCE_DOMAIN": "bounces.example.com"}[k]
	}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Bounces.Webhooks.SESTopics; len(got) != 2 || got[1] != "arn:b" {
		t.Errorf("SES topics %q", got)
	}
}

type sinkFunc func(bounce.Report)

func (f sinkFunc) Record(_ context.Context, r bounce.Report) error { f(r); return nil }

// TestBounceWiring: batch 42's email goes out over SMTP with a return
// path the receiver started from the same settings accepts, and a hard
// bounce sent to that return path in a real SMTP conversation reaches the
// sink naming batch 42.
func TestBounceWiring(t *testing.T) {
	t.Parallel()
	cfg := &BounceConfig{Domain: "bounces.example.com", Addr: "127.0.0.1:0"}
	secret := []byte(strings.Repeat("k", 32))
	env, err := cfg.envelope(secret)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []bounce.Report
	sink := sinkFunc(func(r bounce.Report) { mu.Lock(); got = append(got, r); mu.Unlock() })
	addr, err := startBounceReceiver(t.Context(), cfg, secret, sink, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	relay := smtptest.Start(t)
	sender, err := mail.NewSMTP(mail.SMTPConfig{URL: relay.URL(), Envelope: env}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sender.Close()
	if err := sender.Send(t.Context(), &mailtemplates.Message{From: "lull@example.com", To: "gone@example.org", Subject: "3 new comments",
		MessageID: "batch-42@example.com", Text: "hi", HTML: "<p>hi</p>", BatchID: 42}); err != nil {
		t.Fatal(err)
	}
	rp := relay.WaitFor(t, 1, 5*time.Second)[0].From
	sendBounce(t, addr, rp, "gone@example.org")
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || got[0].BatchID != 42 || got[0].Kind != bounce.Hard || got[0].Address != "gone@example.org" {
		t.Fatalf("got %+v", got)
	}
}

// sendBounce sends a hard-bounce delivery status notification about
// address to the return path rp, at the bounce receiver at addr.
func sendBounce(t *testing.T, addr, rp, address string) {
	t.Helper()
	sendReport(t, addr, rp, dsn(rp, address, "failed", "5.1.1"))
}

// dsn is a delivery status notification (RFC 3464) to rp about address.
func dsn(rp, address, action, status string) string {
	return `From: MAILER-DAEMON@mx.example.org
To: ` + rp + `
MIME-Version: 1.0
Content-Type: multipart/report; report-type=delivery-status; boundary=b

--b
Content-Type: text/plain

Not delivered.
--b
Content-Type: message/delivery-status

Reporting-MTA: dns; mx.example.org

Final-Recipient: rfc822; ` + address + `
Action: ` + action + `
Status: ` + status + `

--b--
`
}

// arf is a spam complaint (RFC 5965) about the email to address that
// went out with return path rp.
func arf(rp, address string) string {
	return `From: <abusedesk@example.net>
To: ` + rp + `
MIME-Version: 1.0
Content-Type: multipart/report; report-type=feedback-report; boundary=p

--p
Content-Type: text/plain

An abuse report.
--p
Content-Type: message/feedback-report

Feedback-Type: abuse
User-Agent: SomeGenerator/1.0
Version: 1
Original-Mail-From: <` + rp + `>
Original-Rcpt-To: <` + address + `>

--p
Content-Type: message/rfc822

Return-Path: <` + rp + `>
To: <` + address + `>
Subject: An alert

Hello.
--p--
`
}

func sendReport(t *testing.T, addr, rp, report string) {
	t.Helper()
	c, err := smtp.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.SendMail("", []string{rp}, strings.NewReader(strings.ReplaceAll(report, "\n", "\r\n"))); err != nil {
		t.Fatal(err)
	}
}

var bounceListening = regexp.MustCompile(`bounce receiver listening.*addr=(\S+)`)

// TestHardBounceEndToEnd runs lull with a return path per email and its
// bounce receiver: a hard bounce sent to the first email's return path
// suppresses the address within seconds, and the next batch to it is
// skipped as bounced.
func TestHardBounceEndToEnd(t *testing.T) {
	t.Parallel()
	relay := smtptest.Start(t)
	dbURL := dbtest.NewURL(t)
	env := faultEnv(dbURL, relay)
	env["LULL_BOUNCE_DOMAIN"], env["LULL_BOUNCE_ADDR"] = "bounces.example.com", "127.0.0.1:0"
	p := startProcess(t, env)
	m := bounceListening.FindStringSubmatch(p.out.String())
	if m == nil {
		t.Fatalf("no bounce receiver in the log:\n%s", p.out.String())
	}
	p.post(t, "/api/v1/types/alert", faultAPIKey, `{"default_mode":"immediate"}`)
	event := `{"type":"alert","recipients":[{"id":"gone","email":"gone@example.org"}]}`
	p.post(t, "/api/v1/events", faultAPIKey, event)
	rp := relay.WaitFor(t, 1, 20*time.Second)[0].From
	if !strings.HasPrefix(rp, "bounces+") || !strings.HasSuffix(rp, "@bounces.example.com") {
		t.Fatalf("return path %q is not a VERP address", rp)
	}
	sendBounce(t, m[1], rp, "gone@example.org")
	waitUntil(t, 5*time.Second, "the address to be suppressed", func() bool {
		return queryInt(t, dbURL, `SELECT count(*) FROM suppressions WHERE address = 'gone@example.org' AND reason = 'hard_bounce'`) == 1
	})
	p.post(t, "/api/v1/events", faultAPIKey, event)
	waitUntil(t, 20*time.Second, "the next batch to be skipped as bounced", func() bool {
		return queryInt(t, dbURL, `SELECT count(*) FROM batches WHERE recipient_id = 'gone' AND state = 'canceled' AND reason = 'bounced'`) == 1
	})
	if n := len(relay.Messages()); n != 1 {
		t.Fatalf("%d emails, want only the one that bounced", n)
	}
}

// TestSoftBouncesAndComplaintEndToEnd runs lull with its bounce receiver:
// two soft bounces leave an address alone and the third suppresses it,
// so the next batch is skipped as bounced; a spam complaint unsubscribes
// its recipient from everything but required types, which still arrive.
func TestSoftBouncesAndComplaintEndToEnd(t *testing.T) {
	t.Parallel()
	relay := smtptest.Start(t)
	dbURL := dbtest.NewURL(t)
	env := faultEnv(dbURL, relay)
	env["LULL_BOUNCE_DOMAIN"], env["LULL_BOUNCE_ADDR"] = "bounces.example.com", "127.0.0.1:0"
	p := startProcess(t, env)
	m := bounceListening.FindStringSubmatch(p.out.String())
	if m == nil {
		t.Fatalf("no bounce receiver in the log:\n%s", p.out.String())
	}
	p.post(t, "/api/v1/types/alert", faultAPIKey, `{"default_mode":"immediate","burst_limit":0}`)
	p.post(t, "/api/v1/types/security", faultAPIKey, `{"default_mode":"immediate","required":true}`)
	// send posts an event of typ to who and returns the return path of the
	// email it brought.
	send := func(typ, who string) string {
		before := len(relay.Messages())
		p.post(t, "/api/v1/events", faultAPIKey, `{"type":"`+typ+`","recipients":[{"id":"`+who+`","email":"`+who+`@example.org"}]}`)
		return relay.WaitFor(t, before+1, 20*time.Second)[before].From
	}
	count := func(sql string) int { return queryInt(t, dbURL, sql) }
	for i := range 3 {
		if n := count(`SELECT count(*) FROM suppressions WHERE address = 'slow@example.org'`); n != 0 {
			t.Fatalf("suppressed after %d soft bounces", i)
		}
		rp := send("alert", "slow")
		sendReport(t, m[1], rp, dsn(rp, "slow@example.org", "delayed", "4.2.2"))
	}
	waitUntil(t, 5*time.Second, "three soft bounces to suppress the address", func() bool {
		return count(`SELECT count(*) FROM suppressions WHERE address = 'slow@example.org' AND reason = 'soft_bounce'`) == 1
	})
	p.post(t, "/api/v1/events", faultAPIKey, `{"type":"alert","recipients":["slow"]}`)
	waitUntil(t, 20*time.Second, "the next batch to be skipped as bounced", func() bool {
		return count(`SELECT count(*) FROM batches WHERE recipient_id = 'slow' AND state = 'canceled' AND reason = 'bounced'`) == 1
	})

	rp := send("alert", "angry")
	sendReport(t, m[1], rp, arf(rp, "angry@example.org"))
	waitUntil(t, 5*time.Second, "the complaint to unsubscribe", func() bool {
		return count(`SELECT count(*) FROM recipients WHERE id = 'angry' AND unsubscribed`) == 1 &&
			count(`SELECT count(*) FROM suppressions WHERE address = 'angry@example.org' AND reason = 'complaint'`) == 1
	})
	before := len(relay.Messages())
	p.post(t, "/api/v1/events", faultAPIKey, `{"type":"alert","recipients":["angry"]}`)
	send("security", "angry")   // a required type still arrives
	time.Sleep(2 * time.Second) // time for an alert that should not go
	for _, msg := range relay.Messages()[before:] {
		if !strings.Contains(string(msg.Data), "security") {
			t.Errorf("after the complaint an email went to %v:\n%.300s", msg.To, msg.Data)
		}
	}
}
