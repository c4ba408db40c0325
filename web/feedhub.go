package web

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/lull-dev/lull/db"
)

// FeedHub tells open feed streams that a recipient's feed changed. One
// connection per lull process LISTENs on PostgreSQL's "lull_feed" channel,
// whichever process made the change, so there is no polling loop per
// client.
type FeedHub struct {
	DB     *db.DB
	Logger *slog.Logger

	mu   sync.Mutex
	subs map[string]map[chan struct{}]struct{}
}

// Subscribe returns a channel that receives a signal whenever the feed of
// recipientID may have changed, and a function to stop.
func (h *FeedHub) Subscribe(recipientID string) (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	h.mu.Lock()
	if h.subs == nil {
		h.subs = map[string]map[chan struct{}]struct{}{}
	}
	if h.subs[recipientID] == nil {
		h.subs[recipientID] = map[chan struct{}]struct{}{}
	}
	h.subs[recipientID][ch] = struct{}{}
	h.mu.Unlock()
	return ch, func() {
		h.mu.Lock()
		delete(h.subs[recipientID], ch)
		if len(h.subs[recipientID]) == 0 {
			delete(h.subs, recipientID)
		}
		h.mu.Unlock()
	}
}

// signal wakes the subscribers of recipientID, or everyone for "*".
func (h *FeedHub) signal(recipientID string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for rid, chans := range h.subs {
		if recipientID != "*" && rid != recipientID {
			continue
		}
		for ch := range chans {
			select {
			case ch <- struct{}{}:
			default: // a wake-up is already pending
			}
		}
	}
}

// Run listens until ctx ends, reconnecting after a lost connection. After
// a reconnect every subscriber is woken, since notifications sent in
// between were missed.
func (h *FeedHub) Run(ctx context.Context) {
	for ctx.Err() == nil {
		err := h.listen(ctx)
		if ctx.Err() != nil {
			return
		}
		h.Logger.Warn("feed listener lost its connection; reconnecting", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
		h.signal("*")
	}
}

func (h *FeedHub) listen(ctx context.Context) error {
	pooled, err := h.DB.Pool.Acquire(ctx)
	if err != nil {
		return err
	}
	// The connection ends in LISTEN state, so it is taken out of the pool
	// and closed rather than returned.
	conn := pooled.Hijack()
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN lull_feed"); err != nil {
		return err
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		h.signal(n.Payload)
	}
}
