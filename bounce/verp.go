package bounce

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base32"
	"strconv"
	"strings"
)

// verpPrefix starts every return path's local part. The "+" is the
// subaddress separator most mail servers understand, so a deployment that
// forwards the bounce domain to a mailbox can still route on "bounces".
const verpPrefix = "bounces+"

// macLen is how many bytes of the HMAC a token keeps: 80 bits cannot be
// guessed by a sender of forged bounces, and keep the local part short.
const macLen = 10

// lowerBase32 spells the MAC in lower-case letters and digits, because
// some mail servers fold the case of local parts.
var lowerBase32 = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// VERP makes and reads the variable envelope return path of each email:
// bounces+<batch>-<mac>@<domain>. The batch ID says which email bounced;
// the MAC, keyed with the installation secret, says lull made the
// address, so a forged bounce cannot name an arbitrary batch. The longest
// local part (a 19-digit batch ID) is 44 characters, under RFC 5321's 64.
type VERP struct {
	Domain string // LULL_BOUNCE_DOMAIN, such as bounces.example.com
	Secret []byte // LULL_SECRET
}

// Address is the return path for batchID's email.
func (v VERP) Address(batchID int64) string {
	id := strconv.FormatInt(batchID, 10)
	return verpPrefix + id + "-" + v.mac(id) + "@" + v.Domain
}

// Batch reads the batch ID from a return path made by Address; ok is
// false for any other address, another domain or a wrong MAC. Angle
// brackets around the address are allowed, as in a Return-Path header.
func (v VERP) Batch(addr string) (batchID int64, ok bool) {
	addr = strings.TrimSpace(addr)
	addr = strings.TrimSuffix(strings.TrimPrefix(addr, "<"), ">")
	at := strings.LastIndexByte(addr, '@')
	if at < 0 || !strings.EqualFold(addr[at+1:], v.Domain) || v.Domain == "" {
		return 0, false
	}
	local := strings.ToLower(addr[:at])
	token, found := strings.CutPrefix(local, verpPrefix)
	if !found {
		return 0, false
	}
	id, mac, found := strings.Cut(token, "-")
	if !found || len(id) > 19 {
		return 0, false
	}
	n, err := strconv.ParseInt(id, 10, 64)
	// Only the canonical spelling is accepted ("007" would carry the MAC
	// of "7" otherwise), so one batch has one address.
	if err != nil || n <= 0 || strconv.FormatInt(n, 10) != id {
		return 0, false
	}
	if !hmac.Equal([]byte(mac), []byte(v.mac(id))) {
		return 0, false
	}
	return n, true
}

func (v VERP) mac(id string) string {
	h := hmac.New(sha256.New, v.Secret)
	// The purpose keeps a return-path MAC from serving as any other
	// signature made with the same secret.
	h.Write([]byte("verp\n" + id))
	return lowerBase32.EncodeToString(h.Sum(nil)[:macLen])
}
