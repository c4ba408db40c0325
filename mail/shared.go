package mail

import (
	"errors"

	gomail "github.com/wneessen/go-mail"
)

// IsRecipientRefused reports whether a send failed because the server
// refused one or more envelope recipients (RCPT TO). go-mail then sends
// the message to nobody, so a shared email with one bad address can be
// sent to each of the others alone.
func IsRecipientRefused(err error) bool {
	var me *gomail.SendError
	return errors.As(err, &me) && me.Reason == gomail.ErrSMTPRcptTo
}
