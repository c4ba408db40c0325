package web_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/PuerkitoBio/goquery"
	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/lull-dev/lull/web"
)

// contract is the API document, loaded once for every test of the
// package, with the router that finds a request's operation in it.
var contract = sync.OnceValues(func() (routers.Router, error) {
	doc, err := openapi3.NewLoader().LoadFromData(web.OpenAPIDocument())
	if err != nil {
		return nil, err
	}
	for _, s := range doc.Components.Schemas {
		closeObjects(s, map[*openapi3.Schema]bool{})
	}
	for _, item := range doc.Paths.Map() {
		for _, op := range item.Operations() {
			for _, r := range op.Responses.Map() {
				for _, m := range r.Value.Content {
					closeObjects(m.Schema, map[*openapi3.Schema]bool{})
				}
			}
		}
	}
	// Examples are checked by TestOpenAPIDocumentIsValid, against the
	// document as published.
	return legacy.NewRouter(doc, openapi3.DisableExamplesValidation())
})

// closeObjects refuses, in the tests only, fields an answer has and the
// document does not list, so a field added to an answer without being
// documented fails the test that sees it. The published document leaves
// answers open, so that clients keep working when a field is added.
func closeObjects(ref *openapi3.SchemaRef, seen map[*openapi3.Schema]bool) {
	s := ref.Value
	if s == nil || seen[s] {
		return
	}
	seen[s] = true
	if len(s.Properties) > 0 && s.AdditionalProperties.Has == nil && s.AdditionalProperties.Schema == nil {
		no := false
		s.AdditionalProperties.Has = &no
	}
	var inner []*openapi3.SchemaRef
	for _, p := range s.Properties {
		inner = append(inner, p)
	}
	inner = append(inner, s.OneOf...)
	inner = append(inner, s.Items, s.AdditionalProperties.Schema)
	for _, r := range inner {
		if r != nil {
			closeObjects(r, seen)
		}
	}
}

// contractCheck is an http.RoundTripper that checks each API call
// against the document. Every answer must be one the document lists for
// that operation, status and body. A request the server accepted (2xx)
// must be one the document allows: a request it refused is often wrong
// on purpose. A path the document does not know may only be answered
// 404. A failed check is the error of the call, so the test making it
// fails there.
type contractCheck struct{ next http.RoundTripper }

func (c contractCheck) RoundTrip(req *http.Request) (*http.Response, error) {
	router, err := contract()
	if err != nil {
		return nil, fmt.Errorf("openapi.json: %w", err)
	}
	var sent []byte
	if req.Body != nil {
		if sent, err = io.ReadAll(req.Body); err != nil {
			return nil, err
		}
		req = req.Clone(req.Context())
		req.Body, req.ContentLength = http.NoBody, int64(len(sent))
		if len(sent) > 0 {
			req.Body = io.NopCloser(bytes.NewReader(sent))
		}
	}
	resp, err := c.next.RoundTrip(req)
	if err != nil || !strings.HasPrefix(req.URL.Path, "/api/v1/") {
		return resp, err
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		// A stream never ends by itself: its status is checked, its
		// body is left to the test.
		if err := checkCall(router, req, sent, resp, nil); err != nil {
			resp.Body.Close()
			return nil, fmt.Errorf("%s %s answered %d: %w", req.Method, req.URL.RequestURI(), resp.StatusCode, err)
		}
		return resp, nil
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(got))
	if err := checkCall(router, req, sent, resp, got); err != nil {
		return nil, fmt.Errorf("%s %s answered %d %s: %w", req.Method, req.URL.RequestURI(), resp.StatusCode, got, err)
	}
	return resp, nil
}

func checkCall(router routers.Router, req *http.Request, sent []byte, resp *http.Response, got []byte) error {
	route, params, err := router.FindRoute(req)
	if err != nil && req.URL.RawPath != "" {
		// A path parameter holding an escaped "/" is one segment to
		// the server; route it the same way.
		escaped := req.Clone(req.Context())
		escaped.URL.Path, escaped.URL.RawPath = req.URL.EscapedPath(), ""
		route, params, err = router.FindRoute(escaped)
	}
	if err != nil {
		if resp.StatusCode == http.StatusNotFound {
			return nil
		}
		return fmt.Errorf("not in openapi.json: %w", err)
	}
	ctx := context.Background()
	copyReq := req.Clone(ctx)
	copyReq.Body = io.NopCloser(bytes.NewReader(sent))
	in := &openapi3filter.RequestValidationInput{Request: copyReq, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
	if resp.StatusCode < 300 {
		if err := openapi3filter.ValidateRequest(ctx, in); err != nil {
			return fmt.Errorf("accepted a request openapi.json does not allow: %w", err)
		}
	}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: resp.StatusCode, Header: resp.Header,
		Body: io.NopCloser(bytes.NewReader(got)), Options: &openapi3filter.Options{IncludeResponseStatus: true, ExcludeResponseBody: got == nil}}
	if err := openapi3filter.ValidateResponse(ctx, out); err != nil {
		return fmt.Errorf("answer not as openapi.json says: %w", err)
	}
	return nil
}

// TestOpenAPIDocumentIsValid loads the document as OpenAPI 3.1 and
// validates it, each example against its schema included.
func TestOpenAPIDocumentIsValid(t *testing.T) {
	t.Parallel()
	doc, err := openapi3.NewLoader().LoadFromData(web.OpenAPIDocument())
	if err != nil {
		t.Fatal(err)
	}
	if !doc.IsOpenAPI31OrLater() {
		t.Fatalf("openapi %q, want 3.1", doc.OpenAPI)
	}
	if err := doc.Validate(context.Background(), openapi3.EnableExamplesValidation()); err != nil {
		t.Fatal(err)
	}
}

// TestOpenAPICoversEveryRoute holds the document to the router: every
// pattern registered under /api/v1 is an operation of the document, and
// every operation is registered. Each operation has examples of its
// request body and of each answer with a body.
func TestOpenAPICoversEveryRoute(t *testing.T) {
	t.Parallel()
	doc, err := openapi3.NewLoader().LoadFromData(web.OpenAPIDocument())
	if err != nil {
		t.Fatal(err)
	}
	var documented []string
	for p, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			documented = append(documented, method+" "+p)
			if b := op.RequestBody; b != nil {
				for ct, m := range b.Value.Content {
					if m.Example == nil && len(m.Examples) == 0 {
						t.Errorf("%s %s: request body %s has no example", method, p, ct)
					}
				}
			}
			for status, r := range op.Responses.Map() {
				for ct, m := range r.Value.Content {
					if m.Example == nil && len(m.Examples) == 0 {
						t.Errorf("%s %s: answer %s %s has no example", method, p, status, ct)
					}
				}
			}
		}
	}
	var served []string
	for _, p := range (&web.Server{}).Patterns() {
		if _, path, _ := strings.Cut(p, " "); strings.HasPrefix(path, "/api/v1/") {
			served = append(served, p)
		}
	}
	slices.Sort(documented)
	slices.Sort(served)
	if len(served) < 20 {
		t.Fatalf("found only %d API routes: %v", len(served), served)
	}
	for _, p := range served {
		if !slices.Contains(documented, p) {
			t.Errorf("%s is served but not in openapi.json", p)
		}
	}
	for _, p := range documented {
		if !slices.Contains(served, p) {
			t.Errorf("%s is in openapi.json but not served", p)
		}
	}
}

// TestOpenAPIServedToMachinesAndPeople: the document is served as it is
// embedded, without an API key, and /api/docs shows every operation of
// it with its path, its fields by their paths and an example of each
// request body and answer, on a page that loads nothing from elsewhere.
func TestOpenAPIServedToMachinesAndPeople(t *testing.T) {
	t.Parallel()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv := httptest.NewServer((&web.Server{Logger: logger, BaseURL: "http://lull.test"}).Handler())
	t.Cleanup(srv.Close)

	resp, err := http.Get(srv.URL + "/api/v1/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" || !bytes.Equal(body, web.OpenAPIDocument()) {
		t.Fatalf("openapi.json: %d %s, %d bytes; want 200, the embedded document", resp.StatusCode, resp.Header.Get("Content-Type"), len(body))
	}

	resp, err = http.Get(srv.URL + "/api/docs")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	doc, err := goquery.NewDocumentFromReader(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("/api/docs: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	spec, err := openapi3.NewLoader().LoadFromData(web.OpenAPIDocument())
	if err != nil {
		t.Fatal(err)
	}
	ops := 0
	for p, item := range spec.Paths.Map() {
		for method, op := range item.Operations() {
			ops++
			sel := doc.Find(`[data-testid="op-` + op.OperationID + `"]`)
			if sel.Length() != 1 || sel.Find(`[data-testid=path]`).Text() != p || !strings.Contains(sel.Text(), method) {
				t.Errorf("%s %s (%s) is not shown with its method and path", method, p, op.OperationID)
				continue
			}
			want := 0 // an example of each answer but the shared errors, shown once
			for _, r := range op.Responses.Map() {
				if r.Ref == "" || r.Value.Content.Get("application/problem+json") == nil {
					want++
				}
			}
			if op.RequestBody != nil {
				want += max(1, len(op.RequestBody.Value.Content.Get("application/json").Examples))
			}
			if got := sel.Find(`pre[data-testid=example]`).Length(); got != want {
				t.Errorf("%s shows %d examples, want %d", op.OperationID, got, want)
			}
		}
	}
	if ops < 21 {
		t.Fatalf("only %d operations in the document", ops)
	}
	problems := 0
	for _, r := range spec.Components.Responses {
		if r.Value.Content.Get("application/problem+json") != nil {
			problems++
		}
	}
	if got := doc.Find(`[data-testid=errors] pre[data-testid=example]`).Length(); got != problems || problems < 7 {
		t.Errorf("the errors section shows %d examples, want one of each of the %d shared errors", got, problems)
	}
	event := doc.Find(`[data-testid=op-createEvent]`).Text()
	for _, field := range []string{"recipients[].email", "actor.name", "occurred_at"} {
		if !strings.Contains(event, field) {
			t.Errorf("POST /api/v1/events does not list the field %s", field)
		}
	}
	if !strings.Contains(doc.Find(`[data-testid=op-putPreferences]`).Text(), "types.{key}.window") {
		t.Error("PUT preferences does not list types.{key}.window")
	}
	doc.Find("[src], link[href]").Each(func(_ int, s *goquery.Selection) {
		for _, attr := range []string{"src", "href"} {
			if v, ok := s.Attr(attr); ok && !strings.HasPrefix(v, "/") {
				t.Errorf("the page loads %s from elsewhere", v)
			}
		}
	})
	if doc.Find(`link[rel=stylesheet]`).Length() != 1 || doc.Find("script").Length() != 0 {
		t.Error("the page should use the app's stylesheet and no script")
	}
}
