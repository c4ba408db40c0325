package mail

import (
	"fmt"

	gomail "github.com/wneessen/go-mail"

	"github.com/lull-dev/lull/mailtemplates"
)

// Envelope is what the SMTP sender adds to every email on its way out,
// beyond what Build writes: the return path, the Feedback-ID and the DKIM
// signature. The zero Envelope adds nothing.
type Envelope struct {
	// ReturnPath gives the envelope sender (SMTP MAIL FROM, which the
	// receiving server records as Return-Path) for a batch's email, so a
	// bounce names the batch (bounce.VERP.Address). Nil, or an email
	// without a batch, keeps the From address.
	ReturnPath func(batchID int64) string
	// FeedbackID is the Feedback-ID header, for Gmail's feedback loop
	// (see docs/deliverability.md); empty sends none.
	FeedbackID string
	// DKIM signs every email when set.
	DKIM *DKIM
}

// stamp adds the return path and the Feedback-ID to msg; encode signs
// the email once it is written, so the signature covers them.
func (e Envelope) stamp(msg *gomail.Msg, m *mailtemplates.Message) error {
	// A shared email's bounce could name only one of its batches, so it
	// keeps the From address as its return path.
	if e.ReturnPath != nil && m.BatchID != 0 && len(m.Rcpts) == 0 {
		if err := msg.EnvelopeFrom(e.ReturnPath(m.BatchID)); err != nil {
			return fmt.Errorf("%w: return path: %v", ErrBadMessage, err)
		}
	}
	if e.FeedbackID != "" {
		msg.SetGenHeader("Feedback-ID", e.FeedbackID)
	}
	return nil
}

// FeedbackID is the Feedback-ID lull sends: "notifications:<senderID>". Google
// reads up to four colon-separated fields, the last naming the sender
// and the others grouping mail into streams whose complaint rates Postmaster
// Tools shows apart; each must stay the same across many emails, so no
// batch or recipient goes in. "notifications" marks this stream apart
// from whatever else the sender ID mails, in words that name the host
// product's mail, not lull (anyone can read the header).
func FeedbackID(senderID string) string {
	if senderID == "" {
		return ""
	}
	return "notifications:" + oneLine(senderID)
}
