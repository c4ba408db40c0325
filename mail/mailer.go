// Package mailer hands rendered emails to a mail server. Build turns a
// mailtemplates.Message into a MIME message; SMTP delivers it through
// go-mail over a small pool of reused connections, with a rate limit and a
// cap on open connections, and classifies failures so the flush job knows
// whether to retry. The built-in outbox (package jobs) implements the same
// Sender interface without any server.
package mail

import (
	"context"

	"github.com/lull-dev/lull/mailtemplates"
)

// Sender sends one rendered email. It is the narrow interface the flush
// worker depends on, so SMTP, the outbox and test doubles are
// interchangeable. An implementation returns a *SendError (or an error
// wrapping one) to say whether a failure is worth retrying; any other
// error counts as temporary (see IsTemporary).
type Sender interface {
	Send(ctx context.Context, m *mailtemplates.Message) error
}
