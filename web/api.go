package web

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"runtime/debug"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/preferences/batching"
)

// MaxBodyBytes limits API request bodies other than events.
const MaxBodyBytes = 4 << 20

// MaxEventBodyBytes limits a POST /api/v1/events body. It is larger than
// MaxBodyBytes so that an event with the most recipients allowed
// (batching.MaxRecipients, 100,000) fits even when every recipient is
// given as an object with an email, a name and a time zone (about 130
// bytes each, 13 MB in all).
const MaxEventBodyBytes = 32 << 20

type ctxKey int

const apiKeyIDKey ctxKey = iota

// apiAuth lets a request through only with a live API key, and records
// the key's id for idempotency keys and retractions.
func (s *Server) apiAuth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok {
			s.problem(w, r, errUnauthorized)
			return
		}
		token = strings.TrimSpace(token)
		// A live key is remembered by its digest, not its text, for
		// db.MemoTTL: a key revoked is refused within that time.
		id, err := s.apiKeys.Get(sha256.Sum256([]byte(token)), func() (int64, error) {
			return db.APIKeyID(r.Context(), s.DB.Pool, token)
		})
		if errors.Is(err, db.ErrNotFound) {
			s.problem(w, r, errUnauthorized)
			return
		}
		if err != nil {
			s.problem(w, r, err)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), apiKeyIDKey, id)))
	})
}

func apiKeyID(r *http.Request) int64 {
	id, _ := r.Context().Value(apiKeyIDKey).(int64)
	return id
}

// recoverPanics turns a panic in a handler into a logged 500, so no stack
// trace reaches a user and the process keeps serving.
func (s *Server) recoverPanics(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.problem(w, r, fmt.Errorf("panic: %v\n%s", v, debug.Stack()))
			}
		}()
		next.ServeHTTP(w, r)
	})
}

// decodeJSON reads a JSON body of at most MaxBodyBytes into v. Unknown
// fields are refused, so a misspelt field ("recipient" for "recipients")
// is an error rather than silently ignored. Errors come back as problems
// naming the field.
func decodeJSON(w http.ResponseWriter, r *http.Request, v any) error {
	return decodeJSONLimit(w, r, v, MaxBodyBytes, errTooLarge)
}

// decodeJSONLimit is decodeJSON with a body limit of its own, and the
// problem to answer when a body is over it. A body that is not UTF-8 is
// refused rather than decoded with replacement characters, so what is
// stored is what the client sent.
func decodeJSONLimit(w http.ResponseWriter, r *http.Request, v any, limit int64, tooLarge *Problem) error {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return tooLarge
		}
		return newProblem(http.StatusBadRequest, "bad-body", "Unreadable body", err.Error())
	}
	if !utf8.Valid(body) {
		return newProblem(http.StatusBadRequest, "bad-json", "Malformed JSON",
			fmt.Sprintf("the body is not valid UTF-8 (at byte %d)", invalidUTF8At(body)))
	}
	// PostgreSQL text cannot hold NUL characters; refuse them up front
	// rather than fail deep in a transaction.
	if hasEscapedNUL(body) {
		return Invalid(FieldError{Field: "body", Message: "NUL characters (\\u0000) are not allowed"})
	}
	if q, ok := v.(quickDecoder); ok && q.DecodeQuick(body) {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if isTimeError(err) {
			return Invalid(FieldError{Field: timeField(v), Message: "must be a time in RFC 3339 form, such as \"2026-11-22T10:00:00Z\""})
		}
		return jsonProblem(err)
	}
	// Only white space may follow the value. (dec.More alone misses a
	// stray "}" or "]", which it reads as the end of an enclosing value.)
	if _, err := dec.Token(); err != io.EOF {
		return newProblem(http.StatusBadRequest, "bad-json", "Malformed JSON", "the body holds more than one JSON value, or text after it")
	}
	return nil
}

// quickDecoder is a body that can decode itself faster than json.Decoder
// when it is in its common form (batching.Event.DecodeQuick), and answers
// false, itself left zero, when it is not: decodeJSONLimit then decodes it
// as usual, and any error is named as usual.
type quickDecoder interface {
	DecodeQuick(body []byte) bool
}

// isTimeError reports whether err is time.Time refusing a JSON value: a
// string that is not RFC 3339, or not a string at all.
func isTimeError(err error) bool {
	var pe *time.ParseError
	return errors.As(err, &pe) || strings.HasPrefix(err.Error(), "Time.UnmarshalJSON")
}

// timeField names the time field of the body struct v points to, for
// error messages; the API's bodies have at most one.
func timeField(v any) string {
	t := reflect.TypeOf(v)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() == reflect.Struct {
		for i := range t.NumField() {
			f := t.Field(i)
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft == reflect.TypeFor[time.Time]() {
				name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
				return name
			}
		}
	}
	return "body"
}

// hasEscapedNUL reports whether body holds the JSON escape \u0000. A raw
// NUL byte needs no check: JSON refuses control characters in strings. An
// escaped backslash followed by "u0000" is text, not a NUL, so the
// backslashes before the match are counted.
func hasEscapedNUL(body []byte) bool {
	for i := 0; ; {
		j := bytes.Index(body[i:], []byte(`\u0000`))
		if j < 0 {
			return false
		}
		at := i + j
		n := 0
		for k := at - 1; k >= 0 && body[k] == '\\'; k-- {
			n++
		}
		if n%2 == 0 {
			return true
		}
		i = at + 1
	}
}

// invalidUTF8At is the offset of the first byte that is not UTF-8.
func invalidUTF8At(b []byte) int {
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size <= 1 {
			return i
		}
		i += size
	}
	return len(b)
}

func jsonProblem(err error) error {
	var syntax *json.SyntaxError
	var invalid *batching.ValidationError
	switch {
	case errors.As(err, &invalid):
		// A type that checks itself while decoding (an event's recipient
		// list) says which field is wrong; problem maps it.
		return err
	case errors.As(err, &syntax):
		return newProblem(http.StatusBadRequest, "bad-json", "Malformed JSON", fmt.Sprintf("%s (at byte %d)", syntax.Error(), syntax.Offset))
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return newProblem(http.StatusBadRequest, "bad-json", "Malformed JSON", "the body is empty or cut short")
	}
	if fe, ok := decodeFieldError(err); ok {
		if fe.Field == "" {
			fe.Field = "body"
		}
		return Invalid(fe)
	}
	return newProblem(http.StatusBadRequest, "bad-json", "Malformed JSON", err.Error())
}

// decodeFieldError names the field of a decoding error that is about one
// field: a value of the wrong JSON type, or a field that is not known.
func decodeFieldError(err error) (FieldError, bool) {
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &typ):
		return FieldError{Field: typ.Field, Message: fmt.Sprintf("must be %s, not %s", jsonKind(typ.Type.Kind().String()), typ.Value)}, true
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return FieldError{Field: name, Message: "is not a known field"}, true
	}
	return FieldError{}, false
}

func jsonKind(k string) string {
	switch k {
	case "string":
		return "a string"
	case "bool":
		return "true or false"
	case "slice", "array":
		return "an array"
	case "map", "struct":
		return "an object"
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64":
		// 4.0 and 1e1 are numbers too; say which kind is wanted.
		return "a whole number"
	}
	return "a number"
}
