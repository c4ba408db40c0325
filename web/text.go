package web

import (
	"net/http"
	"slices"
	"strings"
	"unicode/utf8"
)

// checkText refuses a request whose path values, query or form values
// hold a NUL or bytes that are not UTF-8, before its handler reads any.
// PostgreSQL's text can hold neither, so such a value failed deep in a
// handler, as a 500 logged for a client's mistake; and code that reads
// runes turns every invalid byte into U+FFFD, so the ids %fe and %ff
// named one recipient. The API answers 422 naming the field; pages 400.
func (s *Server) checkText(next http.Handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		field := notTextField(r)
		switch {
		case field == "":
			next.ServeHTTP(w, r)
		case strings.HasPrefix(r.URL.Path, "/api/"):
			s.problem(w, r, Invalid(FieldError{Field: field, Message: "must be UTF-8 text without NUL characters"}))
		default:
			s.message(w, r, http.StatusBadRequest, "This address cannot be read",
				"The address or the form sent holds characters that are not text.")
		}
	}
}

// notTextField names the first path value, query or form field of r that
// is not text, or returns "". A page's form is parsed here (ParseForm
// reads a urlencoded body once, for the handler too); a multipart body is
// left to its handler, which limits its size first. An API body is JSON,
// checked as it is decoded.
func notTextField(r *http.Request) string {
	for _, name := range wildcards(r.Pattern) {
		if !isText(r.PathValue(name)) {
			return name
		}
	}
	values := r.URL.Query()
	if !strings.HasPrefix(r.URL.Path, "/api/") {
		r.ParseForm() // a malformed part is skipped, as FormValue would
		values = r.Form
	}
	names := make([]string, 0, len(values))
	for name := range values {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if slices.ContainsFunc(values[name], func(v string) bool { return !isText(v) }) {
			return name
		}
	}
	return ""
}

// wildcards returns the names of the {wildcards} of a ServeMux pattern.
func wildcards(pattern string) []string {
	var names []string
	for _, seg := range strings.Split(pattern, "/") {
		if name, ok := strings.CutPrefix(seg, "{"); ok && name != "$}" {
			names = append(names, strings.TrimSuffix(strings.TrimSuffix(name, "}"), "..."))
		}
	}
	return names
}

// isText reports whether s is UTF-8 without NUL characters.
func isText(s string) bool {
	return utf8.ValidString(s) && strings.IndexByte(s, 0) < 0
}
