package bounce

import (
	"context"
	"crypto/ecdsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// sendgrid reads SendGrid's signed Event Webhook: an ECDSA P-256
// signature (base64 ASN.1) over the timestamp header followed by the raw
// body, checked with the public key SendGrid shows for the webhook.
type sendgrid struct {
	key *ecdsa.PublicKey
}

const (
	sendgridSignature = "X-Twilio-Email-Event-Webhook-Signature"
	sendgridTimestamp = "X-Twilio-Email-Event-Webhook-Timestamp"
)

func newSendGrid(key string) (sendgrid, error) {
	der, err := base64.StdEncoding.DecodeString(strings.TrimSpace(key))
	if err != nil {
		return sendgrid{}, errors.New("LULL_WEBHOOK_SENDGRID_KEY: not base64")
	}
	pub, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		return sendgrid{}, errors.New("LULL_WEBHOOK_SENDGRID_KEY: not a public key")
	}
	k, ok := pub.(*ecdsa.PublicKey)
	if !ok {
		return sendgrid{}, errors.New("LULL_WEBHOOK_SENDGRID_KEY: not an ECDSA key")
	}
	return sendgrid{key: k}, nil
}

type sendgridEvent struct {
	Email    string `json:"email"`
	Event    string `json:"event"`
	Type     string `json:"type"`
	Status   string `json:"status"`
	Reason   string `json:"reason"`
	Response string `json:"response"`
	// Timestamp is a number in every sample SendGrid documents; any
	// other JSON in it is read as no time rather than refusing the batch.
	Timestamp json.RawMessage `json:"timestamp"`
}

func (s sendgrid) decode(_ context.Context, r *http.Request, body []byte, now time.Time) ([]Report, error) {
	sigHeader, tsHeader := r.Header.Get(sendgridSignature), r.Header.Get(sendgridTimestamp)
	if sigHeader == "" || tsHeader == "" {
		return nil, &signatureError{"header:" + sendgridSignature, "missing signature or timestamp"}
	}
	sig, err := base64.StdEncoding.DecodeString(sigHeader)
	if err != nil {
		return nil, &signatureError{"header:" + sendgridSignature, "not base64"}
	}
	digest := sha256.Sum256(append([]byte(tsHeader), body...))
	if !ecdsa.VerifyASN1(s.key, digest[:], sig) {
		return nil, &signatureError{"header:" + sendgridSignature, "does not match"}
	}
	ts, err := strconv.ParseInt(tsHeader, 10, 64)
	if err != nil {
		return nil, &signatureError{"header:" + sendgridTimestamp, "not a Unix time"}
	}
	if err := withinSkew("header:"+sendgridTimestamp, ts, now, maxSkew); err != nil {
		return nil, err
	}
	var events []sendgridEvent
	if err := json.Unmarshal(body, &events); err != nil {
		return nil, &payloadError{"body", "not an array of SendGrid events"}
	}
	var out []Report
	for _, e := range events {
		addr := address(e.Email)
		if addr == "" {
			continue
		}
		var ts float64
		json.Unmarshal(e.Timestamp, &ts)
		rep := Report{Address: addr, Status: e.Status, Detail: clip(e.Reason + " " + e.Response), At: eventTime("", ts, now)}
		if !statusCode.MatchString(rep.Status) {
			rep.Status = statusIn(rep.Detail)
		}
		switch {
		case e.Event == "bounce" && e.Type == "blocked":
			// A block is the receiving server refusing the sender for now,
			// not the address being gone.
			rep.Kind = Soft
		case e.Event == "bounce":
			rep.Kind = Hard
		case e.Event == "deferred":
			rep.Kind = Soft
		case e.Event == "spamreport":
			rep.Kind, rep.Status = Complaint, "abuse"
		case e.Event == "dropped" && (e.Reason == "Bounced Address" || e.Reason == "Invalid"):
			// SendGrid dropped it because the address bounced before.
			rep.Kind = Hard
		case e.Event == "dropped" && e.Reason == "Spam Reporting Address":
			rep.Kind, rep.Status = Complaint, "abuse"
		default:
			continue
		}
		out = append(out, rep)
	}
	return out, nil
}
