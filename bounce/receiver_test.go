package bounce

import (
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-smtp"
)

// startReceiver runs a Receiver on loopback with a recording Sink.
func startReceiver(t *testing.T) (*recorder, string) {
	t.Helper()
	sink := &recorder{}
	rc := NewReceiver(testVERP, sink, nil)
	rc.now = func() time.Time { return testNow }
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go rc.Serve(ln)
	t.Cleanup(func() { rc.Close() })
	return sink, ln.Addr().String()
}

// send is a bounce from the null sender over a real SMTP conversation.
// Bounce mail travels between MTAs, often without TLS, so none here.
func send(addr, rcpt, msg string) error {
	c, err := smtp.Dial(addr)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.SendMail("", []string{rcpt}, strings.NewReader(msg)); err != nil {
		return err
	}
	return c.Quit()
}

func smtpCode(err error) int {
	var se *smtp.SMTPError
	if errors.As(err, &se) {
		return se.Code
	}
	return 0
}

func TestReceiverRecordsBounces(t *testing.T) {
	t.Parallel()
	sink, addr := startReceiver(t)
	rcpt := testVERP.Address(42)
	// The envelope names batch 42; the returned copy claims batch 7, which
	// must not win.
	if err := send(addr, rcpt, sample(t, "dsn_hard.eml", testVERP.Address(7))); err != nil {
		t.Fatal(err)
	}
	if err := send(addr, rcpt, sample(t, "dsn_delayed.eml", rcpt)); err != nil {
		t.Fatal(err)
	}
	if err := send(addr, rcpt, sample(t, "arf_abuse.eml", rcpt)); err != nil {
		t.Fatal(err)
	}
	got := sink.all()
	if len(got) != 3 {
		t.Fatalf("got %d reports, want 3: %+v", len(got), got)
	}
	for i, want := range []Kind{Hard, Soft, Complaint} {
		if got[i].Kind != want || got[i].BatchID != 42 || got[i].Source != "smtp" {
			t.Errorf("report %d = %+v, want %s for batch 42", i, got[i], want)
		}
	}
}

func TestReceiverRefuses(t *testing.T) {
	t.Parallel()
	sink, addr := startReceiver(t)
	good := testVERP.Address(42)
	for name, c := range map[string]struct {
		rcpt, msg string
		code      int
	}{
		"UnknownRecipient": {"postmaster@bounces.example.com", sample(t, "dsn_hard.eml", good), 550},
		"ForgedReturnPath": {strings.Replace(good, "42-", "43-", 1), sample(t, "dsn_hard.eml", good), 550},
		"OtherDomain":      {"bounces+42-aaaa@example.org", sample(t, "dsn_hard.eml", good), 550},
		"NotAReport":       {good, "Subject: hi\r\n\r\nhello\r\n", 550},
		"TooLarge":         {good, "Subject: big\r\n\r\n" + strings.Repeat(strings.Repeat("x", 998)+"\r\n", maxMessageBytes/1000+10), 552},
	} {
		t.Run(name, func(t *testing.T) {
			if err := send(addr, c.rcpt, c.msg); smtpCode(err) != c.code {
				t.Fatalf("err = %v, want code %d", err, c.code)
			}
		})
	}
	if got := sink.all(); len(got) != 0 {
		t.Fatalf("refused mail recorded %+v", got)
	}
}

func TestReceiverAsksForRetryWhenSinkFails(t *testing.T) {
	t.Parallel()
	sink, addr := startReceiver(t)
	sink.err = errors.New("database down")
	err := send(addr, testVERP.Address(42), sample(t, "dsn_hard.eml", ""))
	if smtpCode(err) != 451 {
		t.Fatalf("err = %v, want 451", err)
	}
}
