package bounce

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// mailgun reads Mailgun's JSON webhooks: the body carries a signature
// object, the hex HMAC-SHA256 of timestamp+token keyed with the domain's
// HTTP webhook signing key. The signature does not cover the event, so a
// token is accepted once: a captured request cannot carry another event.
type mailgun struct {
	key    []byte
	verp   VERP
	tokens *seenTokens
}

// seenTokens remembers the tokens of signed requests until their
// timestamps fall out of maxSkew, after which the timestamp check refuses
// them anyway. Only correctly signed tokens get in, so its size is
// Mailgun's request rate times the window.
type seenTokens struct {
	mu   sync.Mutex
	seen map[string]time.Time
}

// first records token and reports whether it is new.
func (s *seenTokens) first(token string, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seen == nil {
		s.seen = map[string]time.Time{}
	}
	if _, ok := s.seen[token]; ok {
		return false
	}
	if len(s.seen) > 1000 {
		for t, at := range s.seen {
			if now.Sub(at) > 2*maxSkew {
				delete(s.seen, t)
			}
		}
	}
	s.seen[token] = now
	return true
}

type mailgunWebhook struct {
	Signature struct {
		Timestamp string `json:"timestamp"`
		Token     string `json:"token"`
		Signature string `json:"signature"`
	} `json:"signature"`
	EventData struct {
		Event          string  `json:"event"`
		Timestamp      float64 `json:"timestamp"`
		Severity       string  `json:"severity"`
		Recipient      string  `json:"recipient"`
		Reason         string  `json:"reason"`
		DeliveryStatus struct {
			Code        int    `json:"code"`
			Message     string `json:"message"`
			Description string `json:"description"`
		} `json:"delivery-status"`
		Envelope struct {
			Sender string `json:"sender"`
		} `json:"envelope"`
	} `json:"event-data"`
}

func (m mailgun) decode(_ context.Context, _ *http.Request, body []byte, now time.Time) ([]Report, error) {
	var w mailgunWebhook
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, &signatureError{"signature", "body is not a Mailgun webhook"}
	}
	s := w.Signature
	if s.Timestamp == "" || s.Token == "" || s.Signature == "" {
		return nil, &signatureError{"signature", "missing timestamp, token or signature"}
	}
	mac := hmac.New(sha256.New, m.key)
	mac.Write([]byte(s.Timestamp + s.Token))
	sig, err := hex.DecodeString(s.Signature)
	if err != nil || !hmac.Equal(sig, mac.Sum(nil)) {
		return nil, &signatureError{"signature.signature", "does not match"}
	}
	ts, err := strconv.ParseInt(s.Timestamp, 10, 64)
	if err != nil {
		return nil, &signatureError{"signature.timestamp", "not a Unix time"}
	}
	if err := withinSkew("signature.timestamp", ts, now, maxSkew); err != nil {
		return nil, err
	}
	if !m.tokens.first(s.Token, now) {
		return nil, &signatureError{"signature.token", "already used"}
	}
	e := w.EventData
	addr := address(e.Recipient)
	if addr == "" {
		return nil, nil
	}
	batch, _ := m.verp.Batch(e.Envelope.Sender)
	now = eventTime("", e.Timestamp, now)
	detail := e.DeliveryStatus.Message + " " + e.DeliveryStatus.Description
	switch {
	case e.Event == "complained":
		return []Report{{Address: addr, Kind: Complaint, Status: "abuse", BatchID: batch, At: now}}, nil
	case e.Event != "failed":
		return nil, nil
	case e.Severity == "permanent":
		// Mailgun also fails, permanently, mail to addresses it suppressed
		// itself or that it never tried; those are bounces too.
		return []Report{{Address: addr, Kind: Hard, Status: statusIn(detail), BatchID: batch, Detail: clip(e.Reason + " " + detail), At: now}}, nil
	case e.Severity == "temporary":
		return []Report{{Address: addr, Kind: Soft, Status: statusIn(detail), BatchID: batch, Detail: clip(e.Reason + " " + detail), At: now}}, nil
	}
	return nil, nil
}
