// Package mailtemplates is the one rendering path for email: a batch's view
// model goes in, a Message with subject, HTML and text comes out. Sending
// and the in-browser preview both call it, so what an operator previews is
// what a recipient gets.
package mailtemplates

import "time"

// Message is one rendered email, ready for a sender (SMTP or the outbox).
type Message struct {
	From    string // address from LULL_MAIL_FROM
	To      string // recipient's address
	ToName  string // recipient's display name, may be empty
	Subject string // never contains CR or LF
	// MessageID is derived from the batch (without angle brackets), so a
	// resend after a crash is recognisable as the same email.
	MessageID string
	// ThreadID is the Message-ID (without angle brackets) of the thread
	// this email belongs to, written as References and In-Reply-To so that
	// successive emails about one object thread together; empty for none.
	ThreadID string
	// ListID is the List-Id header (RFC 2919), such as
	// `"Comments" <comment-created.example.com>`; empty for none.
	ListID string
	Date   time.Time
	Text   string
	HTML   string
	// UnsubscribeURL is the RFC 8058 one-click URL for List-Unsubscribe.
	UnsubscribeURL string
	// BatchID is the batch this email flushes; 0 for previews.
	BatchID int64
	// Rcpts are the envelope recipients of a shared email (one message
	// for several batches' recipients); To is then empty and the To
	// header reads "undisclosed-recipients:;", so no member learns the
	// others' addresses.
	Rcpts []string
}
