package batching

import (
	"bytes"
	"encoding/json"
	"io"
)

// DecodeQuick decodes an event body the way json.Decoder (unknown fields
// refused, one value only) would, without scanning its recipient list
// first: json.Decoder reads a value to its end before decoding it, and
// steps over the list once more to hand it to Recipients.UnmarshalJSON,
// which decodes it in halves, one a core. For a fan-out of 100,000
// inline recipients, a 12 MB body, those two scans took a tenth of a
// second on one core while the other waited.
//
// The list is cut out of the body by a byte scan (recipientsValue); the
// rest, with a placeholder list in its place, is decoded as usual, and
// the list by Recipients.UnmarshalJSON, whose halves check that they read
// one valid list to its end (listEnds). It returns false, ev left zero,
// for any body that is not in that plain form or that either decoding
// refuses: the caller then decodes it as usual, which also gives the
// error the API answers with.
func (ev *Event) DecodeQuick(body []byte) bool {
	start, end, ok := recipientsValue(body)
	if !ok {
		return false
	}
	rest := make([]byte, 0, len(body)-(end-start)+len(listPlaceholder))
	rest = append(append(append(rest, body[:start]...), listPlaceholder...), body[end:]...)
	dec := json.NewDecoder(bytes.NewReader(rest))
	dec.DisallowUnknownFields()
	var e Event
	if err := dec.Decode(&e); err != nil {
		return false
	}
	if _, err := dec.Token(); err != io.EOF {
		return false
	}
	// The placeholder must be what the decoding took for recipients, or
	// some other key stood for them.
	if len(e.Recipients) != 1 || e.Recipients[0] != (RecipientRef{ID: "\x00"}) {
		return false
	}
	if err := e.Recipients.UnmarshalJSON(body[start:end]); err != nil {
		return false
	}
	*ev = e
	return true
}

// listPlaceholder stands for the recipient list in what DecodeQuick
// decodes as usual: a list no body can hold, since bodies with NUL
// characters are refused before decoding.
const listPlaceholder = `["\u0000"]`

// recipientsValue finds the value of the "recipients" member of the JSON
// object body by stepping over the others without decoding them: its
// start and end offsets. ok is false unless body is an object whose
// members it can follow, with one member spelled "recipients" and no
// other key that json.Decoder could take for it (it matches keys without
// regard to case, after decoding escapes): a key with an escape or a
// byte outside ASCII, or another spelling of recipients, sends the body
// the usual way. What it steps over is checked by the decoding that
// follows, not here.
func recipientsValue(body []byte) (start, end int, ok bool) {
	i := skipSpace(body, 0)
	if i == len(body) || body[i] != '{' {
		return 0, 0, false
	}
	for i = skipSpace(body, i+1); i < len(body) && body[i] == '"'; {
		keyEnd := stringEnd(body, i)
		if keyEnd < 0 {
			return 0, 0, false
		}
		key := body[i+1 : keyEnd-1]
		if !plainKey(key) {
			return 0, 0, false
		}
		i = skipSpace(body, keyEnd)
		if i == len(body) || body[i] != ':' {
			return 0, 0, false
		}
		i = skipSpace(body, i+1)
		e := valueEnd(body, i)
		if e < 0 {
			return 0, 0, false
		}
		if bytes.EqualFold(key, []byte("recipients")) {
			if ok || string(key) != "recipients" {
				return 0, 0, false
			}
			start, end, ok = i, e, true
		}
		i = skipSpace(body, e)
		if i < len(body) && body[i] == ',' {
			i = skipSpace(body, i+1)
			continue
		}
		return start, end, ok && i < len(body) && body[i] == '}'
	}
	return 0, 0, false
}

// plainKey says whether key, as written in JSON, is itself: no escapes,
// nothing outside ASCII (which case folding could match to an ASCII key).
func plainKey(key []byte) bool {
	for _, c := range key {
		if c == '\\' || c >= 0x80 {
			return false
		}
	}
	return true
}
