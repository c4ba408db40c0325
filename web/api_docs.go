package web

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"net/http"
	"path"
	"slices"
	"strings"

	"github.com/lull-dev/lull/views"
)

// openAPIJSON is the API contract. Tests hold it to the routes and check
// every API test's requests and answers against it, so it cannot drift
// from what is served unnoticed.
//
//go:embed openapi.json
var openAPIJSON []byte

// OpenAPIDocument returns the API contract (OpenAPI 3.1, JSON).
func OpenAPIDocument() []byte { return bytes.Clone(openAPIJSON) }

// openAPIDocument serves the contract.
func (s *Server) openAPIDocument(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Write(openAPIJSON)
}

// apiDocs renders the contract for people, as a plain page.
func (s *Server) apiDocs(w http.ResponseWriter, r *http.Request) {
	v, err := apiDocsView(openAPIJSON)
	if err != nil {
		s.problem(w, r, fmt.Errorf("API reference: %w", err))
		return
	}
	v.Page = s.page(v.Heading)
	v.JSURL = ""
	s.render(w, r, http.StatusOK, views.APIDocs(v))
}

// oaDocument is the part of an OpenAPI document the reference page shows.
type oaDocument struct {
	Info struct {
		Title, Version, Description string
	}
	Tags       []struct{ Name, Description string }
	Paths      ordered[ordered[oaOperation]]
	Components struct {
		Parameters map[string]oaParameter
		Responses  ordered[oaResponse]
		Schemas    map[string]oaSchema
	}
}

type oaOperation struct {
	Tags        []string
	OperationID string `json:"operationId"`
	Summary     string
	Description string
	Security    *[]map[string][]string
	Parameters  []oaParameter
	RequestBody *struct {
		Required bool
		Content  ordered[oaMedia]
	} `json:"requestBody"`
	Responses ordered[oaResponse]
}

type oaParameter struct {
	Ref         string `json:"$ref"`
	Name, In    string
	Description string
	Required    bool
	Schema      oaSchema
}

type oaResponse struct {
	Ref         string `json:"$ref"`
	Description string
	Content     ordered[oaMedia]
}

type oaMedia struct {
	Schema   oaSchema
	Example  json.RawMessage
	Examples ordered[struct {
		Summary string
		Value   json.RawMessage
	}]
}

type oaSchema struct {
	Ref                  string `json:"$ref"`
	Type                 any
	Description          string
	Enum                 []any
	Required             []string
	Properties           ordered[oaSchema]
	Items                *oaSchema
	OneOf                []oaSchema      `json:"oneOf"`
	AdditionalProperties json.RawMessage `json:"additionalProperties"`
}

// ordered is a JSON object read in the order it was written, which the
// page keeps; a Go map would not.
type ordered[T any] []struct {
	Key   string
	Value T
}

func (o *ordered[T]) UnmarshalJSON(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	if _, err := dec.Token(); err != nil {
		return err
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return err
		}
		var v T
		if err := dec.Decode(&v); err != nil {
			return err
		}
		*o = append(*o, struct {
			Key   string
			Value T
		}{key.(string), v})
	}
	return nil
}

// apiDocsView builds the reference page from the document: operations
// grouped by their first tag, in the document's order.
func apiDocsView(raw []byte) (views.APIDocsView, error) {
	var d oaDocument
	if err := json.Unmarshal(raw, &d); err != nil {
		return views.APIDocsView{}, err
	}
	v := views.APIDocsView{Heading: d.Info.Title, Version: d.Info.Version, Intro: prose(d.Info.Description)}
	// The errors every operation shares are shown once, at the top.
	for _, r := range d.Components.Responses {
		if m, ok := problemOf(r.Value); ok {
			var p struct{ Status int }
			json.Unmarshal(m.Example, &p)
			v.Errors = append(v.Errors, views.APIResponse{Status: fmt.Sprint(p.Status), ContentType: problemType,
				About: prose(r.Value.Description), Examples: examples(m)})
		}
	}
	for _, tag := range d.Tags {
		sec := views.APISection{ID: "tag-" + strings.ToLower(tag.Name), Name: tag.Name, About: prose(tag.Description)}
		for _, p := range d.Paths {
			for _, m := range p.Value {
				if len(m.Value.Tags) > 0 && m.Value.Tags[0] == tag.Name {
					sec.Operations = append(sec.Operations, d.operation(strings.ToUpper(m.Key), p.Key, m.Value))
				}
			}
		}
		v.Sections = append(v.Sections, sec)
	}
	return v, nil
}

func (d *oaDocument) operation(method, path string, o oaOperation) views.APIOperation {
	op := views.APIOperation{ID: o.OperationID, Method: method, Path: path, Summary: o.Summary,
		About: prose(o.Description), Public: o.Security != nil && len(*o.Security) == 0}
	for _, p := range o.Parameters {
		if p.Ref != "" {
			p = d.Components.Parameters[refName(p.Ref)]
		}
		op.Params = append(op.Params, views.APIField{Name: p.Name, In: p.In, Type: d.typeName(p.Schema), Required: p.Required, About: prose(p.Description)})
	}
	if b := o.RequestBody; b != nil && len(b.Content) > 0 {
		media := b.Content[0].Value
		op.Body = &views.APIBody{Required: b.Required, Fields: d.fields("", media.Schema, 0), Examples: examples(media)}
	}
	for _, r := range o.Responses {
		resp, shared := r.Value, r.Value.Ref != ""
		for _, c := range d.Components.Responses {
			if shared && c.Key == refName(resp.Ref) {
				resp = c.Value
			}
		}
		out := views.APIResponse{Status: r.Key, About: prose(resp.Description)}
		if len(resp.Content) > 0 {
			out.ContentType = resp.Content[0].Key
			if _, isProblem := problemOf(resp); !shared || !isProblem {
				out.Examples = examples(resp.Content[0].Value)
			}
		}
		op.Responses = append(op.Responses, out)
	}
	return op
}

const problemType = "application/problem+json"

// problemOf is a response's problem+json body, if that is what it has.
func problemOf(r oaResponse) (oaMedia, bool) {
	if len(r.Content) == 1 && r.Content[0].Key == problemType {
		return r.Content[0].Value, true
	}
	return oaMedia{}, false
}

// fields lists the properties of an object schema (of each object of a
// oneOf), and those of the objects inside them by their paths
// ("actor.name", "recipients[].email", "types.{key}.mode").
func (d *oaDocument) fields(prefix string, s oaSchema, depth int) []views.APIField {
	if depth > 3 {
		return nil
	}
	var out []views.APIField
	for _, alt := range d.alternatives(s) {
		for _, p := range alt.Properties {
			name := prefix + p.Key
			out = append(out, views.APIField{Name: name, Type: d.typeName(p.Value),
				Required: slices.Contains(alt.Required, p.Key), About: prose(d.resolve(p.Value).Description)})
			out = append(out, d.inner(name, p.Value, depth+1)...)
		}
	}
	return out
}

// inner lists the fields inside a field's value: an object's, or those
// of an array's items or a map's values.
func (d *oaDocument) inner(name string, s oaSchema, depth int) []views.APIField {
	var out []views.APIField
	for _, alt := range d.alternatives(s) {
		if ap, isMap := schemaOf(alt.AdditionalProperties); isMap {
			out = append(out, d.inner(name+".{key}", ap, depth+1)...)
		}
		switch {
		case len(alt.Properties) > 0:
			out = append(out, d.fields(name+".", alt, depth)...)
		case alt.Items != nil:
			out = append(out, d.inner(name+"[]", *alt.Items, depth+1)...)
		}
	}
	return out
}

// alternatives is a schema resolved, or each object of its oneOf.
func (d *oaDocument) alternatives(s oaSchema) []oaSchema {
	s = d.resolve(s)
	if len(s.OneOf) == 0 {
		return []oaSchema{s}
	}
	var out []oaSchema
	for _, o := range s.OneOf {
		out = append(out, d.resolve(o))
	}
	return out
}

func (d *oaDocument) resolve(s oaSchema) oaSchema {
	if s.Ref == "" {
		return s
	}
	r := d.Components.Schemas[refName(s.Ref)]
	if s.Description != "" {
		r.Description = s.Description
	}
	return r
}

// typeName says what a schema is in a few words: "string or null",
// "array of integer", "one of never, immediate, ...".
func (d *oaDocument) typeName(s oaSchema) string {
	// A referenced object is "object": its fields are listed by their
	// paths, so the component's name would tell the reader nothing.
	s = d.resolve(s)
	if len(s.Enum) > 0 {
		vals := make([]string, 0, len(s.Enum))
		for _, e := range s.Enum {
			if e != "" {
				vals = append(vals, fmt.Sprint(e))
			}
		}
		return "one of " + strings.Join(vals, ", ")
	}
	var names []string
	for _, o := range s.OneOf {
		names = append(names, d.typeName(o))
	}
	var types []string
	switch t := s.Type.(type) {
	case string:
		types = []string{t}
	case []any:
		for _, x := range t {
			types = append(types, fmt.Sprint(x))
		}
	}
	for _, t := range types {
		switch ap, isMap := schemaOf(s.AdditionalProperties); {
		case t == "array" && s.Items != nil:
			t = "array of " + grouped(d.typeName(*s.Items))
		case t == "object" && isMap:
			t = "map of " + grouped(d.typeName(ap))
		}
		names = append(names, t)
	}
	return strings.Join(names, " or ")
}

// grouped puts a type of several words in parentheses: "array of
// (string or object)".
func grouped(t string) string {
	if strings.Contains(t, " or ") {
		return "(" + t + ")"
	}
	return t
}

// schemaOf reads additionalProperties when it is a schema, not a bool.
func schemaOf(raw json.RawMessage) (oaSchema, bool) {
	var s oaSchema
	return s, bytes.HasPrefix(raw, []byte("{")) && json.Unmarshal(raw, &s) == nil
}

func refName(ref string) string { return path.Base(ref) }

// examples are a media type's examples, indented; a string example (an
// event stream) is shown as its text.
func examples(m oaMedia) []views.APIExample {
	var out []views.APIExample
	show := func(title string, raw json.RawMessage) {
		var text string
		if json.Unmarshal(raw, &text) != nil {
			var b bytes.Buffer
			json.Indent(&b, raw, "", "  ")
			text = b.String()
		}
		out = append(out, views.APIExample{Title: title, Body: text})
	}
	if len(m.Example) > 0 {
		show("", m.Example)
	}
	for _, e := range m.Examples {
		show(e.Value.Summary, e.Value.Value)
	}
	return out
}

// prose splits a description into text and `code`.
func prose(s string) []views.Prose {
	var out []views.Prose
	for i, part := range strings.Split(s, "`") {
		if part != "" {
			out = append(out, views.Prose{Text: part, Code: i%2 == 1})
		}
	}
	return out
}
