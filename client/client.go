// Package client is a Go client for lull's HTTP API. It follows the API's
// OpenAPI document (GET /api/v1/openapi.json, shown at /api/docs): one
// method per operation, named after its operationId.
//
//	c := client.New("http://localhost:8080", apiKey)
//	res, err := c.CreateEvent(ctx, client.Event{Type: "comment.created",
//		Recipients: []client.RecipientRef{{ID: "u_bob"}}})
//
// An error answer is returned as *Error, which names each invalid field.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
)

// Client calls one lull server with one API key. It is safe for use by
// several goroutines at once.
type Client struct {
	base string
	key  string
	http *http.Client
}

// Option changes how a Client is built.
type Option func(*Client)

// WithHTTPClient makes the Client send its requests with h (for its
// timeouts or transport) instead of http.DefaultClient.
func WithHTTPClient(h *http.Client) Option { return func(c *Client) { c.http = h } }

// New returns a client for the server at baseURL ("http://localhost:8080")
// that authenticates with apiKey.
func New(baseURL, apiKey string, opts ...Option) *Client {
	c := &Client{base: strings.TrimRight(baseURL, "/"), key: apiKey, http: http.DefaultClient}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Error is an error answer: an RFC 9457 problem. A validation problem
// (status 422) lists each invalid field in Errors.
type Error struct {
	Type   string       `json:"type"`
	Title  string       `json:"title"`
	Status int          `json:"status"`
	Detail string       `json:"detail"`
	Errors []FieldError `json:"errors"`
}

// FieldError names one invalid field by its path in the request
// ("recipients[2].email").
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

func (e *Error) Error() string {
	if e.Detail == "" {
		return fmt.Sprintf("lull: %d %s", e.Status, e.Title)
	}
	return fmt.Sprintf("lull: %d %s: %s", e.Status, e.Title, e.Detail)
}

// CreateEvent posts an event (POST /api/v1/events).
func (c *Client) CreateEvent(ctx context.Context, ev Event) (*IngestResult, error) {
	return call[IngestResult](ctx, c, "POST", "/api/v1/events", ev)
}

// RetractEvent takes an event's notifications out of unsent batches, by
// the id CreateEvent answered (DELETE /api/v1/events/{id}).
func (c *Client) RetractEvent(ctx context.Context, id int64) (*RetractResult, error) {
	return call[RetractResult](ctx, c, "DELETE", "/api/v1/events/"+itoa(id), nil)
}

// RetractEventByKey retracts the event posted with an idempotency key
// (DELETE /api/v1/events?key=K).
func (c *Client) RetractEventByKey(ctx context.Context, key string) (*RetractResult, error) {
	return call[RetractResult](ctx, c, "DELETE", "/api/v1/events?"+url.Values{"key": {key}}.Encode(), nil)
}

// PutRecipient creates a recipient or merges p onto the stored one
// (PUT /api/v1/recipients/{id}).
func (c *Client) PutRecipient(ctx context.Context, id string, p RecipientPatch) (*Recipient, error) {
	return call[Recipient](ctx, c, "PUT", "/api/v1/recipients/"+url.PathEscape(id), p)
}

// GetPreferences reads a recipient's preferences
// (GET /api/v1/recipients/{id}/preferences).
func (c *Client) GetPreferences(ctx context.Context, id string) (*Preferences, error) {
	return call[Preferences](ctx, c, "GET", "/api/v1/recipients/"+url.PathEscape(id)+"/preferences", nil)
}

// PutPreferences merges p onto a recipient's preferences and answers them
// as stored (PUT /api/v1/recipients/{id}/preferences).
func (c *Client) PutPreferences(ctx context.Context, id string, p PreferencesPatch) (*Preferences, error) {
	return call[Preferences](ctx, c, "PUT", "/api/v1/recipients/"+url.PathEscape(id)+"/preferences", p)
}

// CreatePreferencesLink makes a signed link to the recipient's settings
// page (POST /api/v1/recipients/{id}/preferences-link).
func (c *Client) CreatePreferencesLink(ctx context.Context, id string) (*PreferencesLink, error) {
	return call[PreferencesLink](ctx, c, "POST", "/api/v1/recipients/"+url.PathEscape(id)+"/preferences-link", nil)
}

// GetFeed reads a page of a recipient's feed
// (GET /api/v1/recipients/{id}/feed).
func (c *Client) GetFeed(ctx context.Context, id string, q FeedQuery) (*Feed, error) {
	v := url.Values{}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	if q.Cursor != "" {
		v.Set("cursor", q.Cursor)
	}
	if q.Unread {
		v.Set("unread", "true")
	}
	return call[Feed](ctx, c, "GET", "/api/v1/recipients/"+url.PathEscape(id)+"/feed"+query(v), nil)
}

// GetFeedCount counts a recipient's unread and unseen notifications
// (GET /api/v1/recipients/{id}/feed/count).
func (c *Client) GetFeedCount(ctx context.Context, id string) (*FeedCounts, error) {
	return call[FeedCounts](ctx, c, "GET", "/api/v1/recipients/"+url.PathEscape(id)+"/feed/count", nil)
}

// MarkFeedRead marks notifications read; those read before their batch is
// sent are not emailed (POST /api/v1/recipients/{id}/feed/read).
func (c *Client) MarkFeedRead(ctx context.Context, id string, r FeedRead) (*FeedReadResult, error) {
	return call[FeedReadResult](ctx, c, "POST", "/api/v1/recipients/"+url.PathEscape(id)+"/feed/read", r)
}

// MarkFeedSeen marks the notifications with ids seen, or every one when
// ids is empty, and answers how many (POST .../feed/seen).
func (c *Client) MarkFeedSeen(ctx context.Context, id string, ids ...int64) (int, error) {
	var body any
	if len(ids) > 0 {
		body = map[string][]int64{"ids": ids}
	}
	out, err := call[struct{ Seen int }](ctx, c, "POST", "/api/v1/recipients/"+url.PathEscape(id)+"/feed/seen", body)
	if err != nil {
		return 0, err
	}
	return out.Seen, nil
}

// ListTypes lists the notification types (GET /api/v1/types).
func (c *Client) ListTypes(ctx context.Context) ([]Type, error) {
	out, err := call[struct{ Types []Type }](ctx, c, "GET", "/api/v1/types", nil)
	if err != nil {
		return nil, err
	}
	return out.Types, nil
}

// GetType reads a notification type (GET /api/v1/types/{key}).
func (c *Client) GetType(ctx context.Context, key string) (*Type, error) {
	return call[Type](ctx, c, "GET", "/api/v1/types/"+url.PathEscape(key), nil)
}

// PutType creates or replaces a notification type; empty fields get their
// defaults (PUT /api/v1/types/{key}).
func (c *Client) PutType(ctx context.Context, key string, t Type) (*Type, error) {
	return call[Type](ctx, c, "PUT", "/api/v1/types/"+url.PathEscape(key), t)
}

// ListBatches lists batches, newest first (GET /api/v1/batches).
func (c *Client) ListBatches(ctx context.Context, q BatchQuery) (*BatchList, error) {
	v := url.Values{}
	for name, value := range map[string]string{"state": q.State, "recipient": q.Recipient, "type": q.Type, "batch_key": q.BatchKey, "cursor": q.Cursor} {
		if value != "" {
			v.Set(name, value)
		}
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	return call[BatchList](ctx, c, "GET", "/api/v1/batches"+query(v), nil)
}

// GetBatch reads a batch in full (GET /api/v1/batches/{id}).
func (c *Client) GetBatch(ctx context.Context, id int64) (*BatchDetail, error) {
	return call[BatchDetail](ctx, c, "GET", "/api/v1/batches/"+itoa(id), nil)
}

// FlushBatch makes an open batch due now (POST /api/v1/batches/{id}/flush).
func (c *Client) FlushBatch(ctx context.Context, id int64) (*Batch, error) {
	return call[Batch](ctx, c, "POST", "/api/v1/batches/"+itoa(id)+"/flush", nil)
}

// CancelBatch cancels an open batch (POST /api/v1/batches/{id}/cancel).
func (c *Client) CancelBatch(ctx context.Context, id int64) (*Batch, error) {
	return call[Batch](ctx, c, "POST", "/api/v1/batches/"+itoa(id)+"/cancel", nil)
}

// ListSuppressions reads a page of the suppression list, in address
// order (GET /api/v1/suppressions).
func (c *Client) ListSuppressions(ctx context.Context, q SuppressionQuery) (*SuppressionList, error) {
	v := url.Values{}
	for name, value := range map[string]string{"prefix": q.Prefix, "cursor": q.Cursor} {
		if value != "" {
			v.Set(name, value)
		}
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	return call[SuppressionList](ctx, c, "GET", "/api/v1/suppressions"+query(v), nil)
}

// Suppress adds an address to the suppression list, or merges onto its
// entry (POST /api/v1/suppressions).
func (c *Client) Suppress(ctx context.Context, s SuppressionRequest) (*Suppression, error) {
	return call[Suppression](ctx, c, "POST", "/api/v1/suppressions", s)
}

// Unsuppress removes an address from the suppression list and answers
// the entry removed (DELETE /api/v1/suppressions/{address}).
func (c *Client) Unsuppress(ctx context.Context, address string) (*Suppression, error) {
	return call[Suppression](ctx, c, "DELETE", "/api/v1/suppressions/"+url.PathEscape(address), nil)
}

// CreateSimulation replays events under proposed policies; nothing is sent
// or stored (POST /api/v1/simulations).
func (c *Client) CreateSimulation(ctx context.Context, s Simulation) (*SimulationReport, error) {
	if s.Policies == nil {
		s.Policies = []Policy{}
	}
	return call[SimulationReport](ctx, c, "POST", "/api/v1/simulations", s)
}

// call sends body (unless nil) as JSON and decodes a 2xx answer into a
// new Out, or returns the problem answered as *Error.
func call[Out any](ctx context.Context, c *Client, method, path string, body any) (*Out, error) {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, r)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode >= 300 {
		e := &Error{Status: resp.StatusCode, Title: http.StatusText(resp.StatusCode)}
		if err := json.Unmarshal(raw, e); err != nil {
			e.Detail = strings.TrimSpace(string(raw))
		}
		return nil, e
	}
	out := new(Out)
	if err := json.Unmarshal(raw, out); err != nil {
		return nil, fmt.Errorf("lull: %s %s: decode the answer: %w", method, path, err)
	}
	return out, nil
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func query(v url.Values) string {
	if len(v) == 0 {
		return ""
	}
	return "?" + v.Encode()
}
