package batching

import (
	"strings"

	"github.com/lull-dev/lull/preferences"
)

// ValidationError is a request refused for its content; the API turns it
// into a 422 problem listing every field.
type ValidationError struct {
	Errors []preferences.FieldError
}

func (v *ValidationError) Error() string {
	msgs := make([]string, len(v.Errors))
	for i, e := range v.Errors {
		msgs[i] = e.Field + ": " + e.Message
	}
	return "invalid: " + strings.Join(msgs, "; ")
}

// Add records one field error.
func (v *ValidationError) Add(field, msg string) {
	v.Errors = append(v.Errors, preferences.FieldError{Field: field, Message: msg})
}

// Err returns v when it holds errors and nil otherwise.
func (v *ValidationError) Err() error {
	if len(v.Errors) == 0 {
		return nil
	}
	return v
}
