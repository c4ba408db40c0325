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
	PurposeMute        = "mute"
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

// UnsubscribeURL returns the one-click unsubscribe link for recipientID
// that stops the notification types in types: the ones the email showed,
// so that a recipient tired of comments keeps getting security alerts.
// With no types, the link unsubscribes from everything; so does the link
// of an email with so many types that naming them all would make the
// List-Unsubscribe header longer than a mail line may be (998 bytes).
func (l Links) UnsubscribeURL(recipientID string, types []string, now time.Time) string {
	exp := now.Add(orDefault(l.UnsubscribeTTL, 90*24*time.Hour)).Truncate(time.Second)
	scope := strings.Join(types, ",")
	if len(scope) > maxScope {
		scope = ""
	}
	link := l.url("/unsubscribe", l.SignedToken(PurposeUnsubscribe, recipientID, scope, exp))
	if len(link) > maxLink {
		// An odd recipient id, escaped, leaves no room for types.
		link = l.url("/unsubscribe", l.SignedToken(PurposeUnsubscribe, recipientID, "", exp))
	}
	return link
}

// maxLink bounds an unsubscribe link in bytes, so that List-Unsubscribe
// with it stays within a mail line (998 bytes): a longer line may be
// refused or broken by a mail server, and the token with it. Escaping
// makes an odd batch key or recipient id up to three times as long.
const maxLink = 900

// maxScope bounds the types an unsubscribe link names, in bytes: with
// the rest of the token, base64 and the address, the link stays well
// under a mail line.
const maxScope = 300

// SettingsDeadline is when the settings link of an unsubscribe token's
// email (the token already verified) stops working; the zero time for a
// token it cannot read. Only until then may the page after an
// unsubscribe, or its undo, link to the settings with a fresh token: an
// unsubscribe link lives 90 days, and must not become a way into the
// settings long after the email's own settings link expired.
func (l Links) SettingsDeadline(token string) time.Time {
	p, _, _ := strings.Cut(token, ".")
	payload, err := base64.RawURLEncoding.DecodeString(p)
	parts := strings.Split(string(payload), "\n")
	if err != nil || len(parts) < 3 {
		return time.Time{}
	}
	exp, err := strconv.ParseInt(parts[2], 10, 64)
	if err != nil {
		return time.Time{}
	}
	made := time.Unix(exp, 0).Add(-orDefault(l.UnsubscribeTTL, 90*24*time.Hour))
	return made.Add(orDefault(l.SettingsTTL, 7*24*time.Hour))
}

// UnsubscribeThreadURL returns the one-click unsubscribe link that stops
// one thread: the batch key of an email whose type unsubscribes by
// thread, such as the comments on one document; thread is false when the
// key is too long for a link (see maxLink), and the link stops the
// thread's type instead.
func (l Links) UnsubscribeThreadURL(recipientID, batchKey string, now time.Time) (link string, thread bool) {
	exp := now.Add(orDefault(l.UnsubscribeTTL, 90*24*time.Hour)).Truncate(time.Second)
	link = l.url("/unsubscribe", l.SignedToken(PurposeUnsubscribe, recipientID, threadMark+batchKey, exp))
	if len(link) > maxLink {
		typ, _, _ := strings.Cut(batchKey, "+")
		return l.UnsubscribeURL(recipientID, []string{typ}, now), false
	}
	return link, true
}

// MuteURL returns the link that mutes one conversation (a batch key
// "type+event key") for recipientID: a page that asks for how long, then
// mutes it. It lives as long as an unsubscribe link, so an old email
// still quiets its thread. The token carries the key, so a link names
// exactly the conversation of its email and no other.
func (l Links) MuteURL(recipientID, batchKey string, now time.Time) string {
	exp := now.Add(orDefault(l.UnsubscribeTTL, 90*24*time.Hour)).Truncate(time.Second)
	return l.url("/mute", l.SignedToken(PurposeMute, recipientID, batchKey, exp))
}

// threadMark starts the data of a thread's link; type keys cannot hold it.
const threadMark = "="

// UnsubscribeTypes splits the data of an unsubscribe token (see
// VerifyData) into its type keys; none means everything, as links made
// before types were named meant. A thread's link has no types.
func UnsubscribeTypes(data string) []string {
	if data == "" || strings.HasPrefix(data, threadMark) {
		return nil
	}
	return strings.Split(data, ",")
}

// UnsubscribeThread returns the batch key a thread's link stops, or "".
func UnsubscribeThread(data string) string {
	key, _ := strings.CutPrefix(data, threadMark)
	if key == data {
		return ""
	}
	return key
}

func (l Links) url(path, token string) string {
	return strings.TrimRight(l.BaseURL, "/") + path + "?token=" + url.QueryEscape(token)
}

// Token signs (purpose, recipient, expiry).
func (l Links) Token(purpose, recipientID string, exp time.Time) string {
	return l.SignedToken(purpose, recipientID, "", exp)
}

// SignedToken signs (purpose, recipient, expiry, data). data says what
// the link does (the types an unsubscribe link stops). Without data the
// token is exactly the three-line form links had before data existed,
// so every link already sent keeps verifying: RFC 8058 expects an
// email's one-click link to work long after it was sent. With data the
// first line is marked and the free-text fields are escaped, so no
// recipient id, however odd, can make one form read as the other.
func (l Links) SignedToken(purpose, recipientID, data string, exp time.Time) string {
	when := strconv.FormatInt(exp.Unix(), 10)
	payload := purpose + "\n" + recipientID + "\n" + when
	if data != "" {
		payload = purpose + withData + "\n" + url.QueryEscape(recipientID) + "\n" + when + "\n" + url.QueryEscape(data)
	}
	enc := base64.RawURLEncoding
	return enc.EncodeToString([]byte(payload)) + "." + enc.EncodeToString(l.mac(payload))
}

// withData marks the purpose line of a token that carries data.
const withData = ";data"

// Verify checks a token for purpose and returns its recipient.
func (l Links) Verify(token, purpose string, now time.Time) (string, error) {
	id, _, err := l.VerifyData(token, purpose, now)
	return id, err
}

// VerifyData checks a token for purpose and returns its recipient and
// data ("" for a token made without).
func (l Links) VerifyData(token, purpose string, now time.Time) (recipientID, data string, err error) {
	enc := base64.RawURLEncoding
	p, sig, ok := strings.Cut(token, ".")
	if !ok {
		return "", "", ErrBadLink
	}
	payload, err1 := enc.DecodeString(p)
	mac, err2 := enc.DecodeString(sig)
	if err1 != nil || err2 != nil || !hmac.Equal(mac, l.mac(string(payload))) {
		return "", "", ErrBadLink
	}
	parts := strings.Split(string(payload), "\n")
	switch {
	case len(parts) == 3 && parts[0] == purpose:
	case len(parts) == 4 && parts[0] == purpose+withData:
		var err1, err2 error
		parts[1], err1 = url.QueryUnescape(parts[1])
		data, err2 = url.QueryUnescape(parts[3])
		if err1 != nil || err2 != nil {
			return "", "", ErrBadLink
		}
	default:
		return "", "", ErrBadLink
	}
	exp, err := strconv.ParseInt(parts[2], 10, 64)
	if err != nil {
		return "", "", ErrBadLink
	}
	if now.Unix() > exp {
		return "", "", ErrExpiredLink
	}
	return parts[1], data, nil
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
