package bounce

import (
	"errors"
	"strings"
	"testing"
)

func TestParseDSN(t *testing.T) {
	t.Parallel()
	rcpt := testVERP.Address(42)
	t.Run("HardBounce", func(t *testing.T) {
		got, err := Parse(strings.NewReader(sample(t, "dsn_hard.eml", rcpt)), testVERP, testNow)
		if err != nil {
			t.Fatal(err)
		}
		want := Report{Address: "gone@example.org", Kind: Hard, Status: "5.1.1", BatchID: 42, Source: "smtp",
			Detail: "smtp; 550 5.1.1 <gone@example.org>... User unknown", At: testNow}
		if len(got) != 1 || got[0] != want {
			t.Fatalf("got %+v\nwant %+v", got, want)
		}
	})
	t.Run("DelayedIsSoftAndDeliveredIsNothing", func(t *testing.T) {
		got, err := Parse(strings.NewReader(sample(t, "dsn_delayed.eml", rcpt)), testVERP, testNow)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || got[0].Kind != Soft || got[0].Status != "4.2.2" || got[0].Address != "full@example.org" {
			t.Fatalf("got %+v, want one soft bounce for full@example.org", got)
		}
		// No Return-Path in the returned headers: the batch is unknown here
		// (the receiver fills it from the envelope).
		if got[0].BatchID != 0 {
			t.Errorf("BatchID = %d, want 0", got[0].BatchID)
		}
	})
	t.Run("UnknownCharsetInTheHumanPart", func(t *testing.T) {
		s := strings.Replace(sample(t, "dsn_hard.eml", rcpt), "charset=us-ascii", "charset=x-klingon", 1)
		got, err := Parse(strings.NewReader(s), testVERP, testNow)
		if err != nil || len(got) != 1 || got[0].Kind != Hard {
			t.Fatalf("got %+v, %v; want the hard bounce", got, err)
		}
	})
	t.Run("ForgedReturnPathNamesNoBatch", func(t *testing.T) {
		forged := strings.Replace(rcpt, "42-", "43-", 1)
		got, err := Parse(strings.NewReader(sample(t, "dsn_hard.eml", forged)), testVERP, testNow)
		if err != nil || len(got) != 1 || got[0].BatchID != 0 {
			t.Fatalf("got %+v, %v; want one report without a batch", got, err)
		}
	})
}

func TestParseARF(t *testing.T) {
	t.Parallel()
	got, err := Parse(strings.NewReader(sample(t, "arf_abuse.eml", testVERP.Address(7))), testVERP, testNow)
	if err != nil {
		t.Fatal(err)
	}
	want := Report{Address: "reader@example.org", Kind: Complaint, Status: "abuse", BatchID: 7, Source: "smtp",
		Detail: "SomeGenerator/1.0", At: testNow}
	if len(got) != 1 || got[0] != want {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	t.Run("NotSpamIsNoComplaint", func(t *testing.T) {
		s := strings.Replace(sample(t, "arf_abuse.eml", testVERP.Address(7)), "Feedback-Type: abuse", "Feedback-Type: not-spam", 1)
		if got, err := Parse(strings.NewReader(s), testVERP, testNow); err != nil || len(got) != 0 {
			t.Fatalf("got %+v, %v; want nothing", got, err)
		}
	})
	t.Run("RedactedRecipientFallsBackToTo", func(t *testing.T) {
		s := strings.Replace(sample(t, "arf_abuse.eml", testVERP.Address(7)), "Original-Rcpt-To: <reader@example.org>\r\n", "", 1)
		got, err := Parse(strings.NewReader(s), testVERP, testNow)
		if err != nil || len(got) != 1 || got[0].Address != "reader@example.org" {
			t.Fatalf("got %+v, %v", got, err)
		}
	})
}

// TestParseRefusesBadInput holds Parse to refusing, without a report,
// what is no notification, and to never panicking on it.
func TestParseRefusesBadInput(t *testing.T) {
	t.Parallel()
	hard := sample(t, "dsn_hard.eml", testVERP.Address(42))
	for name, in := range map[string]string{
		"Empty":           "",
		"PlainText":       "Subject: hello\r\n\r\nYour mail bounced.\r\n",
		"NoReportPart":    strings.Replace(hard, "message/delivery-status", "text/plain", 1),
		"WrongReportType": strings.Replace(hard, "report-type=delivery-status", "report-type=disposition-notification", 1),
		"Truncated":       hard[:len(hard)/2],
		"GarbageInReport": strings.Replace(hard, "Reporting-MTA: dns; mx.example.net", "\x00\xff no colon here", 1),
		"HugeReport":      strings.Replace(hard, "Arrival-Date:", "X-Pad: "+strings.Repeat("a", maxStatusBytes)+"\r\nArrival-Date:", 1),
		"TooManyRecipients": strings.Replace(hard, "Original-Recipient:",
			strings.Repeat("Final-Recipient: rfc822; x@example.org\r\nAction: failed\r\nStatus: 5.1.1\r\n\r\n", maxRecipients+1)+"Original-Recipient:", 1),
		"ComplaintWithoutAnyone": strings.NewReplacer("Original-Rcpt-To: <reader@example.org>\r\n", "",
			"To: Reader <reader@example.org>\r\n", "", "Return-Path: <"+testVERP.Address(7)+">\r\n", "").
			Replace(sample(t, "arf_abuse.eml", testVERP.Address(7))),
	} {
		t.Run(name, func(t *testing.T) {
			got, err := Parse(strings.NewReader(in), testVERP, testNow)
			if !errors.Is(err, ErrNotReport) || len(got) != 0 {
				t.Fatalf("got %+v, %v; want ErrNotReport and nothing", got, err)
			}
		})
	}
	// A notification whose recipient block is unreadable reports nothing.
	for name, in := range map[string]string{
		"BadStatus":       strings.Replace(hard, "Status: 5.1.1", "Status: 5.1", 1),
		"NoRecipient":     strings.NewReplacer("Original-Recipient: rfc822;gone@example.org\r\n", "", "Final-Recipient: RFC822; gone@example.org\r\n", "").Replace(hard),
		"X400Recipient":   strings.NewReplacer("rfc822;gone@example.org", "x400; /G=gone/", "RFC822; gone@example.org", "x400; /G=gone/").Replace(hard),
		"DeliveredAction": strings.Replace(hard, "Action: failed", "Action: delivered", 1),
	} {
		t.Run(name, func(t *testing.T) {
			if got, err := Parse(strings.NewReader(in), testVERP, testNow); len(got) != 0 {
				t.Fatalf("got %+v, %v; want nothing", got, err)
			}
		})
	}
}

// FuzzParse feeds Parse mangled notifications and complaints: it must not
// panic, and whatever it reports must be well formed.
func FuzzParse(f *testing.F) {
	for _, name := range []string{"dsn_hard.eml", "dsn_delayed.eml", "arf_abuse.eml"} {
		f.Add(sample(f, name, testVERP.Address(42)))
	}
	f.Add("Content-Type: multipart/report; report-type=delivery-status; boundary=x\r\n\r\n--x\r\nContent-Type: message/delivery-status\r\n\r\n:\r\n\r\n --x--")
	f.Fuzz(func(t *testing.T, in string) {
		reports, err := Parse(strings.NewReader(in), testVERP, testNow)
		if err != nil && len(reports) > 0 {
			t.Fatalf("reports with an error: %+v", reports)
		}
		for _, r := range reports {
			if r.Address == "" && r.BatchID == 0 {
				t.Fatalf("a report about nobody: %+v", r)
			}
			if len(r.Detail) > maxDetailLength || r.Kind == "" {
				t.Fatalf("malformed report: %+v", r)
			}
		}
	})
}
