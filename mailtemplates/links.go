package mailtemplates

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Link purposes: a token made for one cannot be used for the other.
const (
	PurposeSettings    = "settings"
	PurposeUnsubscribe = "unsubscribe"
)

// ErrBadLink is returned for a tampered or malformed link, or one made for
// another purpose.
var ErrBadLink = errors.New("this link is not valid")

// ErrExpiredLink is returned for a genuine link past its expiry. It is
// told apart from ErrBadLink only once the signature holds, so it reveals
// nothing to someone forging links.
var ErrExpiredLink = errors.New("this link has expired")

// Links makes and checks the signed, expiring links of every email: one to
// the settings page and one for RFC 8058 one-click unsubscribe. A token
// names one recipient and one purpose and carries its expiry; an HMAC with
// the server's secret makes it unforgeable without any stored state.
type Links struct {
	BaseURL string
	Secret  []byte
	// SettingsTTL and UnsubscribeTTL default to 7 and 90 days: an email's
	// unsubscribe link must keep working long after it arrives.
	SettingsTTL    time.Duration
	UnsubscribeTTL time.Duration
}

// SettingsURL returns the settings link for recipientID and its expiry.
func (l Links) SettingsURL(recipientID string, now time.Time) (string, time.Time) {
	exp := now.Add(orDefault(l.SettingsTTL, 7*24*time.Hour)).Truncate(time.Second)
	return l.url("/settings/enter", l.Token(PurposeSettings, recipientID, exp)), exp
}

// UnsubscribeURL returns the one-click unsubscribe link for recipientID.
func (l Links) UnsubscribeURL(recipientID string, now time.Time) string {
	exp := now.Add(orDefault(l.UnsubscribeTTL, 90*24*time.Hour)).Truncate(time.Second)
	return l.url("/unsubscribe", l.Token(PurposeUnsubscribe, recipientID, exp))
}

func (l Links) url(path, token string) string {
	return strings.TrimRight(l.BaseURL, "/") + path + "?token=" + url.QueryEscape(token)
}

// Token signs (purpose, recipient, expiry).
func (l Links) Token(purpose, recipientID string, exp time.Time) string {
	payload := purpose + "\n" + recipientID + "\n" + strconv.FormatInt(exp.Unix(), 10)
	enc := base64.RawURLEncoding
	return enc.EncodeToString([]byte(payload)) + "." + enc.EncodeToString(l.mac(payload))
}

// Verify checks a token for purpose and returns its recipient.
func (l Links) Verify(token, purpose string, now time.Time) (string, error) {
	enc := base64.RawURLEncoding
	p, sig, ok := strings.Cut(token, ".")
	if !ok {
		return "", ErrBadLink
	}
	payload, err1 := enc.DecodeString(p)
	mac, err2 := enc.DecodeString(sig)
	if err1 != nil || err2 != nil || !hmac.Equal(mac, l.mac(string(payload))) {
		return "", ErrBadLink
	}
	parts := strings.SplitN(string(payload), "\n", 3)
	if len(parts) != 3 || parts[0] != purpose {
		return "", ErrBadLink
	}
	exp, err := strconv.ParseInt(parts[2], 10, 64)
	if err != nil {
		return "", ErrBadLink
	}
	if now.Unix() > exp {
		return "", ErrExpiredLink
	}
	return parts[1], nil
}

func (l Links) mac(payload string) []byte {
	h := hmac.New(sha256.New, l.Secret)
	h.Write([]byte(payload))
	return h.Sum(nil)
}

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}
