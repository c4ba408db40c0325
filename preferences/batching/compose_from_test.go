package batching

import (
	"strings"
	"testing"

	"github.com/lull-dev/lull/mail"
)

// TestOddFromAddressesStillSend: the Message-ID, thread and List-Id take
// their domain from LULL_MAIL_FROM. A display name holding "@" used to
// put the name's tail into the Message-ID, and an internationalised
// domain put non-ASCII into it; mail.Build refused both, so no email went
// out at all. The domain is now the address's, in its ASCII form.
func TestOddFromAddressesStillSend(t *testing.T) {
	t.Parallel()
	for from, domain := range map[string]string{
		`"Acme @ Home" <notify@acme.example>`: "@acme.example",
		"notify@bücher.example":               "@xn--bcher-kva.example",
		"Acme <notify@Acme.example>":          "@Acme.example",
	} {
		e := envelope("0123456789abcdef0123456789abcdef")
		e.From = from
		m := compose(t, e, flushContent("comment.created+doc:7", "7", 2))
		if _, err := mail.Build(m); err != nil {
			t.Errorf("%s: %v", from, err)
		}
		if !strings.HasSuffix(m.MessageID, domain) || !strings.HasSuffix(m.ThreadID, domain) ||
			!strings.HasSuffix(m.ListID, strings.ToLower(domain[1:])+">") {
			t.Errorf("%s: Message-ID %q, thread %q, List-Id %q", from, m.MessageID, m.ThreadID, m.ListID)
		}
	}
}
