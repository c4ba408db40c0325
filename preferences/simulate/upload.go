package simulate

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/lull-dev/lull/preferences"
	"io"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"
)

// Upload is a set of events given directly rather than read from storage,
// for teams that are not live yet: each is an event as POST /api/v1/events
// takes it, with occurred_at required, since it is the time replayed.
type Upload struct {
	// Events are sorted by time; events at the same time keep their order.
	Events []Event
	// Recipients given as objects, by id, with what an ingest would store.
	Recipients map[string]UploadRecipient
}

// UploadRecipient is a recipient given as an object in an uploaded event.
type UploadRecipient struct {
	ID       string
	Email    string
	Location *time.Location // nil when no time zone was given
}

// MaxUploadErrors bounds how many problems one upload reports.
const MaxUploadErrors = 20

// uploadEvent is the part of an event the simulator reads; the rest
// (actor, object, data, key) is accepted and ignored.
type uploadEvent struct {
	Type       string            `json:"type"`
	BatchKey   string            `json:"batch_key"`
	Recipients []json.RawMessage `json:"recipients"`
	OccurredAt *time.Time        `json:"occurred_at"`
}

// ReadEventLines reads a JSON-lines file, one event per line; blank lines
// are skipped. Problems name the line ("line 3: occurred_at: is
// required"), under field.
func ReadEventLines(r io.Reader, field string, maxEvents int) (*Upload, []preferences.FieldError) {
	u := newUpload()
	var errs []preferences.FieldError
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	line := 0
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		if len(u.Events) >= maxEvents {
			errs = append(errs, preferences.FieldError{Field: field, Message: fmt.Sprintf("has more than %d events", maxEvents)})
			break
		}
		for _, e := range u.add(b) {
			errs = append(errs, preferences.FieldError{Field: field, Message: fmt.Sprintf("line %d: %s: %s", line, e.Field, e.Message)})
		}
		if len(errs) >= MaxUploadErrors {
			break
		}
	}
	if err := sc.Err(); err != nil {
		errs = append(errs, preferences.FieldError{Field: field, Message: fmt.Sprintf("line %d: %v", line+1, err)})
	}
	if len(errs) == 0 && len(u.Events) == 0 {
		errs = append(errs, preferences.FieldError{Field: field, Message: "holds no events: give one JSON event per line"})
	}
	u.sort()
	return u, errs
}

// DecodeEvents reads events given as a JSON array; problems name the
// element ("events[3].occurred_at").
func DecodeEvents(raw []json.RawMessage, field string) (*Upload, []preferences.FieldError) {
	u := newUpload()
	var errs []preferences.FieldError
	for i, b := range raw {
		for _, e := range u.add(b) {
			errs = append(errs, preferences.FieldError{Field: fmt.Sprintf("%s[%d].%s", field, i, e.Field), Message: e.Message})
		}
		if len(errs) >= MaxUploadErrors {
			break
		}
	}
	u.sort()
	return u, errs
}

func newUpload() *Upload { return &Upload{Recipients: map[string]UploadRecipient{}} }

func (u *Upload) sort() {
	sort.SliceStable(u.Events, func(i, j int) bool { return u.Events[i].At.Before(u.Events[j].At) })
}

// add decodes one event; its problems name fields inside the event.
func (u *Upload) add(b []byte) []preferences.FieldError {
	var ev uploadEvent
	var errs []preferences.FieldError
	add := func(field, msg string) { errs = append(errs, preferences.FieldError{Field: field, Message: msg}) }
	// As for the API's bodies: JSON would read bytes that are not UTF-8
	// as U+FFFD, so two ids would name one recipient.
	if !utf8.Valid(b) {
		add("body", "is not valid UTF-8")
		return errs
	}
	if err := json.Unmarshal(b, &ev); err != nil {
		var typ *json.UnmarshalTypeError
		if errors.As(err, &typ) && typ.Field != "" {
			add(typ.Field, "has the wrong type")
		} else {
			add("body", "is not a JSON object: "+err.Error())
		}
		return errs
	}
	if ev.Type == "" {
		add("type", "is required")
	}
	if ev.OccurredAt == nil {
		add("occurred_at", "is required: it is the time the event is replayed at")
	}
	if len(ev.Recipients) == 0 {
		add("recipients", "needs at least one recipient")
	}
	ids := make([]string, 0, len(ev.Recipients))
	for i, raw := range ev.Recipients {
		field := fmt.Sprintf("recipients[%d]", i)
		if len(raw) > 0 && raw[0] == '"' {
			var id string
			if err := json.Unmarshal(raw, &id); err != nil || strings.TrimSpace(id) == "" {
				add(field, "must be a recipient id or an object with an id")
				continue
			}
			ids = append(ids, id)
			continue
		}
		var obj struct {
			ID       string `json:"id"`
			Email    string `json:"email"`
			Timezone string `json:"timezone"`
		}
		if err := json.Unmarshal(raw, &obj); err != nil {
			add(field, "must be a recipient id or an object with an id")
			continue
		}
		if strings.TrimSpace(obj.ID) == "" {
			add(field+".id", "is required")
			continue
		}
		rec := u.Recipients[obj.ID]
		rec.ID = obj.ID
		if obj.Email != "" {
			rec.Email = obj.Email
		}
		if obj.Timezone != "" {
			loc, err := time.LoadLocation(obj.Timezone)
			if err != nil || obj.Timezone == "Local" {
				add(field+".timezone", fmt.Sprintf("unknown time zone %q: use an IANA name such as Europe/Berlin", obj.Timezone))
				continue
			}
			rec.Location = loc
		}
		u.Recipients[obj.ID] = rec
		ids = append(ids, obj.ID)
	}
	// PostgreSQL text cannot hold a NUL, and these are looked up there.
	hasNUL := func(s string) bool { return strings.IndexByte(s, 0) >= 0 }
	if hasNUL(ev.Type) || hasNUL(ev.BatchKey) || slices.ContainsFunc(ids, hasNUL) {
		add("body", "NUL characters (\\u0000) are not allowed")
	}
	if len(errs) > 0 {
		return errs
	}
	u.Events = append(u.Events, Event{At: *ev.OccurredAt, Type: ev.Type, BatchKey: ev.BatchKey, Recipients: ids})
	return nil
}

// Apply adds what the upload says about recipients to s, as an ingest
// would: a stored recipient takes a given time zone and address, and one
// lull does not know starts from DefaultRecipient. Recipients of an upload
// are assumed reachable, since a team trying lull out may leave addresses
// out of the file.
func (u *Upload) Apply(s *Settings) {
	if s.Recipients == nil {
		s.Recipients = map[string]*Recipient{}
	}
	for id, ur := range u.Recipients {
		rc, ok := s.Recipients[id]
		if ok {
			c := *rc
			rc = &c
		} else {
			rc = DefaultRecipient(id)
		}
		if ur.Email != "" {
			rc.HasEmail = true
		}
		if ur.Location != nil {
			rc.Schedule.Location = ur.Location
		}
		s.Recipients[id] = rc
	}
}

// TypeKeys lists the distinct types the upload's events name.
func (u *Upload) TypeKeys() []string {
	seen := map[string]bool{}
	var keys []string
	for _, e := range u.Events {
		if !seen[e.Type] {
			seen[e.Type] = true
			keys = append(keys, e.Type)
		}
	}
	sort.Strings(keys)
	return keys
}

// RecipientIDs lists the distinct recipients the upload's events name.
func (u *Upload) RecipientIDs() []string {
	seen := map[string]bool{}
	var ids []string
	for _, e := range u.Events {
		for _, id := range e.Recipients {
			if !seen[id] {
				seen[id] = true
				ids = append(ids, id)
			}
		}
	}
	sort.Strings(ids)
	return ids
}
