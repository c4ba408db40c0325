package bounce

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// resend reads Resend's webhooks, which Svix signs: svix-signature holds
// one or more "v1,<base64 HMAC-SHA256>" of svix-id.svix-timestamp.body,
// keyed with the base64 secret after "whsec_".
type resend struct {
	key []byte
}

func newResend(secret string) (resend, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(strings.TrimSpace(secret), "whsec_"))
	if err != nil || len(key) == 0 {
		return resend{}, errors.New("LULL_WEBHOOK_RESEND_SECRET: not a whsec_ secret")
	}
	return resend{key: key}, nil
}

type resendEvent struct {
	Type      string `json:"type"`
	CreatedAt string `json:"created_at"`
	Data      struct {
		To     []string `json:"to"`
		Bounce struct {
			Type    string `json:"type"`
			SubType string `json:"subType"`
			Message string `json:"message"`
		} `json:"bounce"`
	} `json:"data"`
}

func (s resend) decode(_ context.Context, r *http.Request, body []byte, now time.Time) ([]Report, error) {
	id, ts, sigs := r.Header.Get("svix-id"), r.Header.Get("svix-timestamp"), r.Header.Get("svix-signature")
	if id == "" || ts == "" || sigs == "" {
		return nil, &signatureError{"header:svix-signature", "missing svix-id, svix-timestamp or svix-signature"}
	}
	mac := hmac.New(sha256.New, s.key)
	mac.Write([]byte(id + "." + ts + "."))
	mac.Write(body)
	want := mac.Sum(nil)
	ok := false
	// Several signatures are sent while a secret is being rotated.
	for _, f := range strings.Fields(sigs) {
		v, sig, found := strings.Cut(f, ",")
		if b, err := base64.StdEncoding.DecodeString(sig); found && v == "v1" && err == nil && hmac.Equal(b, want) {
			ok = true
		}
	}
	if !ok {
		return nil, &signatureError{"header:svix-signature", "does not match"}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return nil, &signatureError{"header:svix-timestamp", "not a Unix time"}
	}
	if err := withinSkew("header:svix-timestamp", sec, now, maxSkew); err != nil {
		return nil, err
	}
	var e resendEvent
	if err := json.Unmarshal(body, &e); err != nil {
		return nil, &payloadError{"body", "not a Resend event"}
	}
	var kind Kind
	status := ""
	switch {
	case e.Type == "email.bounced" && e.Data.Bounce.Type == "Permanent":
		kind, status = Hard, statusIn(e.Data.Bounce.Message)
	case e.Type == "email.bounced":
		kind, status = Soft, statusIn(e.Data.Bounce.Message)
	case e.Type == "email.complained":
		kind, status = Complaint, "abuse"
	default:
		return nil, nil
	}
	var out []Report
	for _, to := range e.Data.To {
		if a := address(to); a != "" {
			out = append(out, Report{Address: a, Kind: kind, Status: status,
				Detail: clip(e.Data.Bounce.SubType + " " + e.Data.Bounce.Message), At: eventTime(e.CreatedAt, 0, now)})
		}
	}
	return out, nil
}
