package batching

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// DefaultMaxData is the largest data of one event when LULL_MAX_DATA is
// not set: 64 KiB, like the payload caps of hosted notification services.
// An event's data is read into memory for every email and feed page that
// shows it, so without a cap one event of 31 MB to 100 recipients took
// gigabytes to flush.
const DefaultMaxData = 64 << 10

// maxRecipientName and maxZoneName cap a recipient given inline; the
// longest IANA zone name has 32 characters.
const (
	maxRecipientName = 1000
	maxZoneName      = 100
)

// checkSizes refuses text fields and data over their limits, so that no
// field can carry what the data limit refuses. Ids and keys fit a
// database key; names and titles are far longer than an email line
// shows (500 characters); a URL fits what browsers and servers accept.
// Data is measured as compact JSON against maxData (DefaultMaxData when
// 0), and that JSON is kept in ev.encodedData, which is what is stored.
func (ev *Event) checkSizes(v *ValidationError, maxData int) {
	for _, f := range []struct {
		field, value string
		max          int
	}{
		{"type", ev.Type, 100}, {"key", ev.Key, 255}, {"batch_key", ev.BatchKey, 255},
		{"actor.id", ev.Actor.ID, 255}, {"actor.name", ev.Actor.Name, 1000},
		{"object.type", ev.Object.Type, 255}, {"object.id", ev.Object.ID, 255},
		{"object.title", ev.Object.Title, 2000}, {"object.url", ev.Object.URL, 4096},
	} {
		if len(f.value) > f.max {
			v.Add(f.field, fmt.Sprintf("is longer than %d bytes", f.max))
		}
	}
	if maxData <= 0 {
		maxData = DefaultMaxData
	}
	ev.encodedData = nil
	tooLarge := func(size string) {
		v.Add("data", fmt.Sprintf("is %s bytes as compact JSON; at most %d bytes are allowed (LULL_MAX_DATA): keep large content in the host application and link to it", size, maxData))
	}
	// Data far over the limit is refused without encoding it again.
	if textBytes(ev.Data, maxData) > maxData {
		tooLarge(fmt.Sprintf("over %d", maxData))
		return
	}
	data, err := compactJSON(ev.Data) // null when there is none
	switch {
	case err != nil:
		v.Add("data", "cannot be stored as JSON: "+err.Error())
	case ev.Data != nil && len(data) > maxData:
		tooLarge(fmt.Sprint(len(data)))
	default:
		ev.encodedData = data
	}
}

// textBytes counts the bytes of the strings and keys in v, which its JSON
// holds at least, without allocating; it stops once past limit.
func textBytes(v any, limit int) int {
	n := 0
	switch x := v.(type) {
	case string:
		return len(x)
	case map[string]any:
		for k, e := range x {
			if n += len(k) + textBytes(e, limit-n); n > limit {
				return n
			}
		}
	case []any:
		for _, e := range x {
			if n += textBytes(e, limit-n); n > limit {
				return n
			}
		}
	}
	return n
}

// compactJSON encodes v without white space and without escaping <, >
// and &, so its length is that of the JSON a client would call compact.
func compactJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}
