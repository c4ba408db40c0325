package mail

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	gomail "github.com/wneessen/go-mail"
)

// SendError is a failed send, classified. Temporary failures (4xx
// answers, refused connections, timeouts, a dropped connection) are worth
// retrying with the same Message-ID; permanent ones (5xx answers, a
// message that cannot be built) are not, and the delivery is marked
// failed. Answer keeps what the server said ("550 5.1.1 no such user"),
// because that is what an operator needs to read on the failed batch.
type SendError struct {
	// Temporary says a later attempt may succeed.
	Temporary bool
	// Code is the SMTP reply code (451, 550, ...), 0 when the server gave
	// none (a network error, say).
	Code int
	// Answer is the server's reply with its code, empty when there was
	// none.
	Answer string
	// Err is the underlying error.
	Err error
	// Unanswered says the server had the whole message, up to its final
	// dot, and gave no answer: it may have accepted it, so a retry may
	// send it twice.
	Unanswered bool
}

// MayHaveArrived reports whether err left the message possibly accepted
// (SendError.Unanswered), which at-most-once delivery must not retry.
func MayHaveArrived(err error) bool {
	var se *SendError
	return errors.As(err, &se) && se.Unanswered
}

// Error returns the server's answer when there is one, since that is the
// most useful line to store and show; otherwise the underlying error.
func (e *SendError) Error() string {
	switch {
	case e.Answer != "":
		return e.Answer
	case e.Err != nil:
		return "smtp: " + e.Err.Error()
	}
	return "smtp: send failed"
}

// Unwrap returns the underlying error, so errors.Is finds context.Canceled
// or a *net.OpError inside.
func (e *SendError) Unwrap() error { return e.Err }

// IsTemporary reports whether err is worth retrying. A *SendError says so
// itself; any other non-nil error (a context deadline, a bug in a test
// double) counts as temporary, because retrying a send that might have
// worked costs at most a recognisable duplicate, while giving up on one
// loses an email.
func IsTemporary(err error) bool {
	var se *SendError
	if errors.As(err, &se) {
		return se.Temporary
	}
	return err != nil
}

// classifyDial turns a failure to connect, say hello, start TLS or log in
// into a SendError. These are always temporary, even a 5xx: the message
// never reached a server that judged it, and a wrong password or a
// certificate problem is fixed in the configuration, after which the same
// email can go out. (The flush job still gives up after its last
// attempt, so a misconfiguration ends in visibly failed deliveries.)
func classifyDial(err error) *SendError {
	se := &SendError{Temporary: true, Err: err}
	if code, answer, ok := replyIn(err.Error()); ok {
		se.Code, se.Answer = code, answer
	}
	return se
}

// replyIn finds the first SMTP reply in text: a three-digit code from 200
// to 599 at the start of a word and followed by a space, a hyphen or the
// end (so addresses and ports such as "127.0.0.1:465" do not match), and
// the text after it. net/textproto prints a reply as 451 "4.3.0 try again
// later", with the text quoted; the quotes are removed, so the answer
// reads as the server sent it: 451 4.3.0 try again later.
func replyIn(text string) (code int, answer string, ok bool) {
	for i := 0; i+3 <= len(text); i++ {
		if i > 0 && text[i-1] != ' ' {
			continue
		}
		c, err := strconv.Atoi(text[i : i+3])
		if err != nil || c < 200 || c > 599 || (i+3 < len(text) && text[i+3] != ' ' && text[i+3] != '-') {
			continue
		}
		rest := strings.TrimSpace(text[i+3:])
		if q, err := strconv.QuotedPrefix(rest); err == nil {
			if u, err := strconv.Unquote(q); err == nil {
				rest = u
			}
		}
		return c, strings.TrimSpace(text[i:i+3] + " " + rest), true
	}
	return 0, "", false
}

// stepError classifies a failed step of transmit's conversation by the
// server's reply code when there is one (5xx permanent, 4xx temporary),
// else as temporary: a dropped connection may work next time.
func stepError(step gomail.SendErrReason, err error) *SendError {
	se := &SendError{Temporary: true, Err: fmt.Errorf("%s: %w", step, err)}
	text := err.Error()
	if text == "" || (text[0] != '4' && text[0] != '5') {
		return se
	}
	code, cerr := strconv.Atoi(text[:min(3, len(text))])
	if cerr != nil {
		return se
	}
	se.Code = code
	if _, answer, ok := replyIn(text); ok {
		se.Answer = answer
	} else {
		se.Answer = strconv.Itoa(code) + " " + strings.TrimSpace(text)
	}
	se.Temporary = code < 500
	return se
}
