package web

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/i18n"
	"github.com/lull-dev/lull/mailtemplates"
	"github.com/lull-dev/lull/preferences"
	"github.com/lull-dev/lull/preferences/batching"
)

// FeedGroup is a run of notifications of one type and batch key, shown
// with the heading an email would give them.
type FeedGroup struct {
	Type          string      `json:"type"`
	BatchKey      string      `json:"batch_key,omitempty"`
	Text          string      `json:"text"`
	Count         int         `json:"count"`
	Unread        int         `json:"unread"`
	LatestAt      time.Time   `json:"latest_at"`
	Notifications []FeedEntry `json:"notifications"`
	// MuteURL is a signed link to the page that mutes this conversation
	// for the recipient, for the host's feed to offer; only for a group
	// with a batch key of a type that is not required.
	MuteURL string    `json:"mute_url,omitempty"`
	items   []db.Item // newest first, as the feed reads them
}

// FeedEntry is one notification in the feed.
type FeedEntry struct {
	ID         int64           `json:"id"`
	Actor      json.RawMessage `json:"actor"`
	Object     json.RawMessage `json:"object"`
	Data       json.RawMessage `json:"data"`
	OccurredAt time.Time       `json:"occurred_at"`
	ReadAt     *time.Time      `json:"read_at"`
	SeenAt     *time.Time      `json:"seen_at"`
}

// getFeed returns a page of the recipient's feed, newest first. A page
// holds up to limit notifications, grouped where neighbours share a type
// and batch key; a group may continue on the next page. A page also ends
// early, with a next cursor, once its notifications carry feedPageBytes
// of actor, object and data.
func (s *Server) getFeed(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	rec, err := db.GetRecipient(ctx, s.DB.Bun, r.PathValue("id"))
	if err != nil {
		s.problem(w, r, err)
		return
	}
	q := r.URL.Query()
	limit := 50
	if v := q.Get("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 1 || limit > 200 {
			s.problem(w, r, Invalid(FieldError{"limit", "must be a number from 1 to 200"}))
			return
		}
	}
	var before int64
	if v := q.Get("cursor"); v != "" {
		// A cursor this API did not give (a typo, a cut-off link) must not
		// quietly restart the feed at its first page.
		if before, err = strconv.ParseInt(v, 10, 64); err != nil || before < 1 {
			s.problem(w, r, Invalid(FieldError{"cursor", "is not a cursor this API returned: use next_cursor from the previous page"}))
			return
		}
	}
	items, cut, err := db.Feed(ctx, s.DB.Pool, rec.ID, before, limit+groupSlack, q.Get("unread") == "true", feedPageBytes)
	if err != nil {
		s.problem(w, r, err)
		return
	}
	more := cut || len(items) == limit+groupSlack
	if end := pageEnd(items, limit); end < len(items) {
		items, more = items[:end], true
	}
	counts, err := db.CountFeed(ctx, s.DB.Pool, rec.ID)
	if err == nil {
		// Listing the feed is a visit (catch-up); the badge count is not.
		err = db.TouchSeen(ctx, s.DB.Pool, rec.ID, s.now())
	}
	if err != nil {
		s.problem(w, r, err)
		return
	}
	groups, err := s.groupFeed(r, items, rec)
	if err != nil {
		s.problem(w, r, err)
		return
	}
	out := map[string]any{"groups": groups, "unread": counts.Unread, "unseen": counts.Unseen, "unread_by_type": counts.ByType, "next_cursor": nil}
	if more {
		out["next_cursor"] = strconv.FormatInt(items[len(items)-1].NotificationID, 10)
	}
	writeJSON(w, http.StatusOK, out)
}

// feedPageBytes bounds the event content (actor, object and data, as
// stored) of one feed page, and so the page's size and the memory it
// takes: 300 notifications whose events carry 64 KiB of data each would
// otherwise make a 20 MB answer. A page always holds at least one
// notification.
const feedPageBytes = 1 << 20

// groupSlack is how many notifications past the limit a feed page may
// take to finish the group the limit falls in, so that a group ("Alice and
// 4 others commented") is not cut in two across pages.
const groupSlack = 100

// pageEnd is where a page of items ends: after limit of them, or later at
// the end of the group the limit falls in.
func pageEnd(items []db.FeedItem, limit int) int {
	n := min(limit, len(items))
	for n > 0 && n < len(items) && items[n].TypeKey == items[n-1].TypeKey && items[n].BatchKey == items[n-1].BatchKey {
		n++
	}
	return n
}

func (s *Server) groupFeed(r *http.Request, items []db.FeedItem, rec *db.Recipient) ([]*FeedGroup, error) {
	types := map[string]*db.Type{}
	groups := []*FeedGroup{}
	var cur *FeedGroup
	for _, it := range items {
		if cur == nil || cur.Type != it.TypeKey || cur.BatchKey != it.BatchKey {
			t, ok := types[it.TypeKey]
			if !ok {
				var err error
				if t, err = db.GetType(r.Context(), s.DB.Pool, it.TypeKey); err != nil {
					return nil, err
				}
				types[it.TypeKey] = t
			}
			cur = &FeedGroup{Type: it.TypeKey, BatchKey: it.BatchKey, LatestAt: it.OccurredAt}
			groups = append(groups, cur)
		}
		cur.Count++
		if it.ReadAt == nil {
			cur.Unread++
		}
		cur.Notifications = append(cur.Notifications, FeedEntry{ID: it.NotificationID, Actor: it.Actor, Object: it.Object, Data: it.Data,
			OccurredAt: it.OccurredAt, ReadAt: it.ReadAt, SeenAt: it.SeenAt})
		cur.items = append(cur.items, it.Item)
	}
	loc := preferences.Location(rec.Timezone)
	lang := i18n.Resolve(rec.Locale, "", s.DefaultLocale)
	for _, g := range groups {
		// The heading counts and names every notification of the group,
		// and takes its item fields from the newest, as an email's
		// heading does, in the recipient's language as their email is.
		t := batching.TemplateTypeIn(types[g.Type], lang.TextChain())
		t.DisplayLimit, t.ItemOrder = len(g.items), "latest"
		slices.Reverse(g.items) // Group takes them in arrival order
		g.Text = mailtemplates.HeadingIn(batching.Group(t, g.items), loc, lang)
		if g.BatchKey != "" && !types[g.Type].Required {
			g.MuteURL = s.Links.MuteURL(rec.ID, g.Type+"+"+g.BatchKey, s.now())
		}
	}
	return groups, nil
}

// maxMarkIDs bounds the ids one call to feed/read or feed/seen names: a
// page of the feed holds at most 200 notifications and a group's slack,
// and more than a few pages is what before and all are for. Unbounded,
// a 4 MiB body named hundreds of thousands, each looked up while the
// recipient's open batches stay locked.
const maxMarkIDs = 1000

// readBody is what feed/read and feed/seen accept: ids, or (read only)
// everything before a time, or all.
type readBody struct {
	IDs    []int64    `json:"ids"`
	Before *time.Time `json:"before"`
	All    bool       `json:"all"`
}

// checkIDs refuses more ids than maxMarkIDs.
func (b readBody) checkIDs() error {
	if len(b.IDs) > maxMarkIDs {
		return Invalid(FieldError{"ids", fmt.Sprintf("at most %d ids at a time (%d given); mark older ones with before or all", maxMarkIDs, len(b.IDs))})
	}
	return nil
}

// markRead marks notifications read; those still waiting in an open batch
// leave it, and a batch left with nothing unread is canceled.
func (s *Server) markRead(w http.ResponseWriter, r *http.Request) {
	var b readBody
	if err := decodeJSON(w, r, &b); err != nil {
		s.problem(w, r, err)
		return
	}
	if len(b.IDs) == 0 && b.Before == nil && !b.All {
		s.problem(w, r, Invalid(FieldError{"ids", "give ids, before (a time) or all: true"}))
		return
	}
	if err := b.checkIDs(); err != nil {
		s.problem(w, r, err)
		return
	}
	res, err := s.Engine.MarkRead(r.Context(), r.PathValue("id"), b.IDs, b.Before)
	if err == nil {
		err = db.TouchSeen(r.Context(), s.DB.Pool, r.PathValue("id"), s.now())
	}
	if err != nil {
		s.problem(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// markSeen marks notifications seen: the bell was opened.
func (s *Server) markSeen(w http.ResponseWriter, r *http.Request) {
	var b readBody
	if r.ContentLength != 0 {
		if err := decodeJSON(w, r, &b); err != nil {
			s.problem(w, r, err)
			return
		}
	}
	if err := b.checkIDs(); err != nil {
		s.problem(w, r, err)
		return
	}
	rid := r.PathValue("id")
	var n int
	err := s.DB.InTx(r.Context(), func(tx pgxTx) error {
		var err error
		if n, err = db.MarkSeen(r.Context(), tx, rid, b.IDs, s.now()); err != nil {
			return err
		}
		if err := db.TouchSeen(r.Context(), tx, rid, s.now()); err != nil {
			return err
		}
		return db.NotifyFeed(r.Context(), tx, []string{rid})
	})
	if err != nil {
		s.problem(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"seen": n})
}

// feedCount answers the numbers for a badge.
func (s *Server) feedCount(w http.ResponseWriter, r *http.Request) {
	c, err := db.CountFeed(r.Context(), s.DB.Pool, r.PathValue("id"))
	if err != nil {
		s.problem(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, c)
}

// streamWriteTimeout bounds one write to a feed stream.
const streamWriteTimeout = 15 * time.Second

// feedStream is a Server-Sent Events stream of the recipient's counts: one
// event at once, then one each time they change. Changes arrive through
// FeedHub (PostgreSQL LISTEN/NOTIFY), not by polling.
func (s *Server) feedStream(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	rid := r.PathValue("id")
	if _, err := db.GetRecipient(ctx, s.DB.Bun, rid); err != nil {
		s.problem(w, r, err)
		return
	}
	if s.Feed == nil {
		s.problem(w, r, newProblem(http.StatusNotImplemented, "no-stream", "Streaming unavailable", "this server runs without a feed listener"))
		return
	}
	wake, stop, err := s.Feed.Subscribe(ctx, rid)
	if err != nil {
		s.problem(w, r, err)
		return
	}
	defer stop()
	rc := http.NewResponseController(w)
	// A stream outlives the server's write timeout, so each write gets a
	// deadline of its own instead: a client that stops reading is still
	// cut off, one write later.
	flush := func() error {
		rc.SetWriteDeadline(time.Now().Add(streamWriteTimeout))
		return rc.Flush()
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	var last string
	send := func() bool {
		c, err := db.CountFeed(ctx, s.DB.Pool, rid)
		if err != nil {
			return ctx.Err() == nil
		}
		b, _ := json.Marshal(c)
		if string(b) != last {
			last = string(b)
			fmt.Fprintf(w, "event: counts\ndata: %s\n\n", b)
		}
		return flush() == nil
	}
	if !send() {
		return
	}
	ping := time.NewTicker(25 * time.Second)
	defer ping.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.draining:
			return
		case <-wake:
			if !send() {
				return
			}
		case <-ping.C:
			fmt.Fprint(w, ": ping\n\n")
			if flush() != nil {
				return
			}
		}
	}
}
