package web

import (
	"bytes"
	"encoding/json"
)

// Optional is a field of a body that is merged onto what is stored. It
// tells apart a field left out (keep the stored value), null (clear it)
// and a value, which a pointer cannot: it reads both of the first two
// as nil.
type Optional[T any] struct {
	Set   bool // the field was in the body, as null or a value
	Null  bool
	Value T
}

// UnmarshalJSON is called only for a field that is in the body, null
// included. The value is decoded as strictly as the body around it, so
// a misspelt field inside it is still refused. It starts afresh each
// time, so a field sent twice counts as its last value, not as a mix of
// the two (a null first, then quiet hours, cleared them).
func (o *Optional[T]) UnmarshalJSON(b []byte) error {
	*o = Optional[T]{Set: true}
	if string(b) == "null" {
		o.Null = true
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(&o.Value)
}

const nullRefused = "cannot be null: leave it out to keep the stored value"

// mergeValue copies a sent value over dst. A null is refused: the field
// has no empty state to go back to.
func mergeValue[T any](errs *[]FieldError, field string, o Optional[T], dst *T) {
	switch {
	case o.Null:
		*errs = append(*errs, FieldError{field, nullRefused})
	case o.Set:
		*dst = o.Value
	}
}

// mergeClearable copies a sent value over dst; a null sets dst to its
// zero value, which for these fields means "follow the default".
func mergeClearable[T any](o Optional[T], dst *T) {
	if o.Set {
		*dst = o.Value
	}
}
