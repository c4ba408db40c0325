package bounce

import (
	"errors"
	"fmt"
	"io"
	"net/mail"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/emersion/go-message"
)

// ErrNotReport is wrapped by Parse's errors: the email is no delivery
// status notification or feedback report lull can read, so it says
// nothing about any address and must not suppress one.
var ErrNotReport = errors.New("not a delivery status notification or feedback report")

// Limits on what one report may hold. A genuine notification names a few
// recipients in a few kilobytes; anything far larger is refused rather
// than parsed at length.
const (
	maxStatusBytes  = 64 << 10 // the message/delivery-status part
	maxHeaderBytes  = 64 << 10 // the original message's header
	maxRecipients   = 100      // per-recipient blocks in one notification
	maxDetailLength = 500      // Report.Detail, in bytes
	maxParts        = 10       // parts of the multipart/report
)

var statusCode = regexp.MustCompile(`^[245]\.[0-9]{1,3}\.[0-9]{1,3}$`)

// Parse reads one bounce email: an RFC 3464 delivery status notification
// (multipart/report; report-type=delivery-status) or an RFC 5965 ARF
// feedback report (report-type=feedback-report). It returns a Report for
// every recipient the email says failed (5.x.x: Hard; 4.x.x delayed or
// failed: Soft) or complained about (Complaint), with BatchID read from
// the original message's Return-Path when v made it. A notification that
// only reports success yields no reports and no error; anything else that
// cannot be read wraps ErrNotReport.
func Parse(r io.Reader, v VERP, now time.Time) ([]Report, error) {
	e, err := message.ReadWithOptions(r, &message.ReadOptions{MaxHeaderBytes: maxHeaderBytes})
	if err != nil {
		return nil, fmt.Errorf("%w: header: %v", ErrNotReport, err)
	}
	t, params, err := e.Header.ContentType()
	if err != nil || t != "multipart/report" {
		return nil, fmt.Errorf("%w: content type %q", ErrNotReport, t)
	}
	mr := e.MultipartReader()
	var status, feedback map[string]string
	var recipients []map[string]string
	var original *mail.Header
	for i := 0; i < maxParts; i++ {
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		// A human-readable part in a charset lull does not know is still
		// a notification; the parts lull reads are ASCII.
		if p != nil && (message.IsUnknownCharset(err) || message.IsUnknownEncoding(err)) {
			err = nil
		}
		if err != nil {
			return nil, fmt.Errorf("%w: part %d: %v", ErrNotReport, i+1, err)
		}
		pt, _, _ := p.Header.ContentType()
		switch pt {
		case "message/delivery-status", "message/global-delivery-status":
			blocks, err := readBlocks(p.Body, maxRecipients+1)
			if err != nil {
				return nil, err
			}
			status, recipients = blocks[0], blocks[1:]
		case "message/feedback-report":
			blocks, err := readBlocks(p.Body, 0)
			if err != nil {
				return nil, err
			}
			feedback = blocks[0]
		case "message/rfc822", "text/rfc822-headers", "message/global", "message/global-headers":
			original = readOriginal(p.Body)
		}
	}
	var batchID int64
	if original != nil {
		batchID, _ = v.Batch(original.Get("Return-Path"))
	}
	switch {
	case params["report-type"] == "delivery-status" && status != nil:
		return deliveryReports(recipients, batchID, now), nil
	case params["report-type"] == "feedback-report" && feedback != nil:
		return complaint(feedback, original, batchID, now)
	}
	return nil, fmt.Errorf("%w: report-type %q without its report part", ErrNotReport, params["report-type"])
}

// deliveryReports turns per-recipient blocks into reports: failed with a
// 5.x.x status is Hard, failed or delayed with a 4.x.x status is Soft.
// Delivered, relayed and expanded recipients, and blocks without a valid
// recipient or status, say nothing to act on.
func deliveryReports(recipients []map[string]string, batchID int64, now time.Time) []Report {
	var out []Report
	for _, f := range recipients {
		addr := recipientAddress(f["original-recipient"])
		if addr == "" {
			addr = recipientAddress(f["final-recipient"])
		}
		code := strings.TrimSpace(f["status"])
		// A status may carry a comment: "5.1.1 (bad destination mailbox)".
		code, _, _ = strings.Cut(code, " ")
		if addr == "" || !statusCode.MatchString(code) {
			continue
		}
		action := strings.ToLower(strings.TrimSpace(f["action"]))
		var kind Kind
		switch {
		case code[0] == '5' && action == "failed":
			kind = Hard
		case (code[0] == '4' || code[0] == '5') && (action == "failed" || action == "delayed"):
			// A 5.x.x that is only "delayed" contradicts itself; the
			// server is still trying, so it counts no more than a 4.x.x.
			kind = Soft
		default:
			continue
		}
		out = append(out, Report{Address: addr, Kind: kind, Status: code, BatchID: batchID,
			Source: "smtp", Detail: clip(f["diagnostic-code"]), At: now})
	}
	return out
}

// complaint turns a feedback report into one Complaint. Only abuse and
// fraud reports are complaints: "not-spam" is the opposite, and
// "auth-failure" or "virus" say nothing about the recipient's wishes.
// Feedback loops often redact the recipient; the original message's To
// is used then, and with neither the report names only its batch.
func complaint(f map[string]string, original *mail.Header, batchID int64, now time.Time) ([]Report, error) {
	ft := strings.ToLower(strings.TrimSpace(f["feedback-type"]))
	if ft != "abuse" && ft != "fraud" {
		return nil, nil
	}
	addr := recipientAddress(f["original-rcpt-to"])
	if addr == "" && original != nil {
		if a, err := mail.ParseAddress(original.Get("To")); err == nil {
			addr = a.Address
		}
	}
	if addr == "" && batchID == 0 {
		return nil, fmt.Errorf("%w: a complaint that names neither a recipient nor a batch", ErrNotReport)
	}
	return []Report{{Address: addr, Kind: Complaint, Status: ft, BatchID: batchID, Source: "smtp",
		Detail: clip(f["user-agent"]), At: now}}, nil
}

// recipientAddress reads "rfc822; user@example.com" (or "utf-8; ...",
// RFC 6533) and a bare address; it returns "" for anything else.
func recipientAddress(s string) string {
	if typ, rest, ok := strings.Cut(s, ";"); ok {
		typ = strings.ToLower(strings.TrimSpace(typ))
		if typ != "rfc822" && typ != "utf-8" {
			return ""
		}
		s = rest
	}
	a, err := mail.ParseAddress(strings.TrimSpace(s))
	if err != nil {
		return ""
	}
	return a.Address
}

// readBlocks reads header-like field blocks separated by blank lines, as
// message/delivery-status and message/feedback-report are written. Field
// names are lower-cased; a repeated field keeps its first value. More
// than max blocks (when max > 0) or more than maxStatusBytes is refused.
func readBlocks(r io.Reader, max int) ([]map[string]string, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxStatusBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%w: read report part: %v", ErrNotReport, err)
	}
	if len(b) > maxStatusBytes {
		return nil, fmt.Errorf("%w: report part over %d bytes", ErrNotReport, maxStatusBytes)
	}
	var blocks []map[string]string
	var cur map[string]string
	var last string
	for line := range strings.Lines(strings.ReplaceAll(string(b), "\r\n", "\n")) {
		line = strings.TrimRight(line, "\n")
		switch {
		case strings.TrimSpace(line) == "":
			cur, last = nil, ""
			continue
		case line[0] == ' ' || line[0] == '\t':
			if cur != nil && last != "" {
				cur[last] += " " + strings.TrimSpace(line)
			}
			continue
		}
		name, value, ok := strings.Cut(line, ":")
		if !ok {
			return nil, fmt.Errorf("%w: report line without a field name", ErrNotReport)
		}
		if cur == nil {
			if max > 0 && len(blocks) == max {
				return nil, fmt.Errorf("%w: more than %d recipients", ErrNotReport, max-1)
			}
			cur = map[string]string{}
			blocks = append(blocks, cur)
		}
		last = strings.ToLower(strings.TrimSpace(name))
		if _, seen := cur[last]; seen {
			last = ""
			continue
		}
		cur[last] = strings.TrimSpace(value)
	}
	if len(blocks) == 0 {
		return nil, fmt.Errorf("%w: empty report part", ErrNotReport)
	}
	return blocks, nil
}

// readOriginal reads the header of the returned message, if it can. A
// text/rfc822-headers part may end without the blank line that ends a
// header, so one is added.
func readOriginal(r io.Reader) *mail.Header {
	m, err := mail.ReadMessage(io.MultiReader(io.LimitReader(r, maxHeaderBytes), strings.NewReader("\r\n\r\n")))
	if err != nil {
		return nil
	}
	return &m.Header
}

// clip keeps Detail to one line of valid UTF-8 of a sane length.
func clip(s string) string {
	s = strings.ToValidUTF8(strings.Join(strings.Fields(s), " "), "")
	if len(s) <= maxDetailLength {
		return s
	}
	cut := maxDetailLength
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}
