package bounce

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"net/http"
	"time"
)

// postmark reads Postmark's bounce and spam complaint webhooks. Postmark
// signs nothing; the webhook URL carries a secret as basic-auth
// credentials (https://postmark:<token>@lull.example.com/webhooks/postmark)
// or a custom header X-Lull-Token, both configurable in Postmark.
type postmark struct {
	token string
}

// postmarkEvent is the part of a Bounce or SpamComplaint record lull reads.
type postmarkEvent struct {
	RecordType  string
	Type        string
	TypeCode    int
	Email       string
	Description string
	Details     string
	BouncedAt   string
}

// postmarkKinds maps Postmark's bounce types to what they say about the
// address. Types not listed (auto-responders, subscribe and unsubscribe
// requests, challenge verifications, account-level blocks, ...) say
// nothing lull should act on.
var postmarkKinds = map[string]Kind{
	"HardBounce":       Hard,
	"BadEmailAddress":  Hard,
	"Transient":        Soft,
	"SoftBounce":       Soft,
	"DnsError":         Soft,
	"SpamComplaint":    Complaint,
	"SpamNotification": Complaint,
}

func (p postmark) decode(_ context.Context, r *http.Request, body []byte, now time.Time) ([]Report, error) {
	got := r.Header.Get("X-Lull-Token")
	if _, pass, ok := r.BasicAuth(); ok && got == "" {
		got = pass
	}
	if got == "" {
		return nil, &signatureError{"header:Authorization", "missing credentials"}
	}
	if subtle.ConstantTimeCompare([]byte(got), []byte(p.token)) != 1 {
		return nil, &signatureError{"header:Authorization", "wrong credentials"}
	}
	var e postmarkEvent
	if err := json.Unmarshal(body, &e); err != nil {
		return nil, &payloadError{"body", "not a Postmark webhook record"}
	}
	if e.RecordType != "Bounce" && e.RecordType != "SpamComplaint" {
		return nil, nil
	}
	kind, ok := postmarkKinds[e.Type]
	addr := address(e.Email)
	if !ok || addr == "" {
		return nil, nil
	}
	status := statusIn(e.Details)
	if kind == Complaint {
		status = "abuse"
	}
	return []Report{{Address: addr, Kind: kind, Status: status, Detail: clip(e.Description + " " + e.Details), At: eventTime(e.BouncedAt, 0, now)}}, nil
}
