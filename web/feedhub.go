package web

import (
	"context"
	"crypto/rand"
	"log/slog"
	"sync"
	"time"

	"github.com/lull-dev/lull/db"
)

// FeedHub tells open feed streams that a recipient's feed changed. One
// connection per lull process LISTENs on PostgreSQL's "lull_feed" channel,
// whichever process made the change, so there is no polling loop per
// client. The hub lists the recipients it has streams for in the
// feed_watchers table, renewed every watchRenew, so that changes to
// anyone else's feed cost no NOTIFY at all.
type FeedHub struct {
	DB     *db.DB
	Logger *slog.Logger

	mu   sync.Mutex
	id   string
	subs map[string]map[chan struct{}]struct{}
}

const (
	watchRenew = time.Minute
	watchTTL   = 3 * watchRenew
)

// Subscribe returns a channel that receives a signal whenever the feed of
// recipientID may have changed, and a function to stop. It fails only
// when the watch cannot be recorded.
func (h *FeedHub) Subscribe(ctx context.Context, recipientID string) (<-chan struct{}, func(), error) {
	ch := make(chan struct{}, 1)
	if err := db.WatchFeed(ctx, h.DB.Pool, h.hubID(), []string{recipientID}, time.Now().Add(watchTTL)); err != nil {
		return nil, nil, err
	}
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
		last := len(h.subs[recipientID]) == 0
		if last {
			delete(h.subs, recipientID)
		}
		h.mu.Unlock()
		if last {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			db.UnwatchFeed(ctx, h.DB.Pool, h.hubID(), recipientID)
		}
	}, nil
}

// hubID names this process's hub in feed_watchers.
func (h *FeedHub) hubID() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.id == "" {
		h.id = rand.Text()
	}
	return h.id
}

// renew extends the watches of every recipient with an open stream.
func (h *FeedHub) renew(ctx context.Context) {
	h.mu.Lock()
	ids := make([]string, 0, len(h.subs))
	for id := range h.subs {
		ids = append(ids, id)
	}
	h.mu.Unlock()
	if len(ids) == 0 {
		return
	}
	if err := db.WatchFeed(ctx, h.DB.Pool, h.hubID(), ids, time.Now().Add(watchTTL)); err != nil {
		h.Logger.Warn("renewing feed watches", "err", err)
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

// Run listens until ctx ends, reconnecting after a lost connection.
func (h *FeedHub) Run(ctx context.Context) {
	go func() {
		t := time.NewTicker(watchRenew)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				h.renew(ctx)
			}
		}
	}()
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
	// A change made before now was not heard: a stream opened while the
	// process started, or while the connection was lost, would miss it
	// until the next. So every subscriber counts again once the hub hears.
	h.signal("*")
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		h.signal(n.Payload)
	}
}
