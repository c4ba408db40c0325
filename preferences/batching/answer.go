package batching

import (
	"encoding/json"
	"strconv"
	"time"
)

// appendBatchRefs appends refs to buf as json.Marshal encodes them. A
// fan-out's answer lists 100,000 of them (9 MB): through reflection, into
// a buffer that grew as it went, they took a tenth of a second of lull's
// CPU and allocated the answer twice over again. What is not plain (a
// string with a byte json escapes, a time json refuses or writes
// otherwise) is left to encoding/json.
func appendBatchRefs(buf []byte, refs []BatchRef) ([]byte, error) {
	if refs == nil {
		return append(buf, "null"...), nil
	}
	buf = append(buf, '[')
	for i, r := range refs {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, `{"id":`...)
		buf = strconv.AppendInt(buf, r.ID, 10)
		buf = append(buf, `,"recipient":`...)
		buf = appendJSONString(buf, r.Recipient)
		buf = append(buf, `,"batch_key":`...)
		buf = appendJSONString(buf, r.BatchKey)
		buf = append(buf, `,"closes_at":`...)
		var err error
		if buf, err = appendJSONTime(buf, r.ClosesAt); err != nil {
			return nil, err
		}
		buf = append(buf, '}')
	}
	return append(buf, ']'), nil
}

// appendJSONString appends s quoted as json.Marshal quotes it: as it is
// when every byte is printable ASCII that needs no escape (json also
// escapes <, > and &), else by json.Marshal.
func appendJSONString(buf []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			quoted, _ := json.Marshal(s) // a string always encodes
			return append(buf, quoted...)
		}
	}
	buf = append(buf, '"')
	buf = append(buf, s...)
	return append(buf, '"')
}

// appendJSONTime appends t as time.Time's MarshalJSON writes it: RFC 3339
// with nanoseconds, which it refuses for a year outside 0–9999 or an
// offset of a day or more.
func appendJSONTime(buf []byte, t time.Time) ([]byte, error) {
	if _, offset := t.Zone(); t.Year() < 0 || t.Year() > 9999 || offset <= -24*3600 || offset >= 24*3600 {
		b, err := t.MarshalJSON()
		return append(buf, b...), err
	}
	buf = append(buf, '"')
	buf = t.AppendFormat(buf, time.RFC3339Nano)
	return append(buf, '"'), nil
}
