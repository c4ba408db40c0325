package batching

import (
	"context"
	"fmt"
	"time"

	"github.com/lull-dev/lull/db"
)

// A fan-out's transaction runs on one server process, one statement at a
// time, while the machine's other cores wait. Reading the recipients'
// settings and routing them (their mutes, history and visits) only read,
// and need not see the transaction's writes when the event gives no
// recipient inline (none was written by it) and each chunk names other
// recipients. So a second connection reads and routes each chunk while
// the transaction writes the chunk before. The transaction reads
// committed data statement by statement anyway: what another connection
// read a moment earlier is what its own read could have seen.

// prefetchWait bounds how long a fan-out waits for the second connection
// while it holds its transaction's: two fan-outs each holding one of the
// pool's last connections and waiting for another would otherwise wait
// for each other. Past it the fan-out reads in its transaction.
const prefetchWait = 50 * time.Millisecond

// loaded is one chunk's settings and route, or why they could not be
// read. routed is nil when a recipient is unknown: the transaction then
// refuses the event, naming it.
type loaded struct {
	settings map[string]db.RecipientSettings
	routed   *router
	err      error
}

// prefetch reads the settings of chunks and routes them with a copy of
// r, in order, on a connection of its own, at most one chunk ahead of the
// caller. It returns nil when no connection is free. stop ends it early;
// the caller calls it when done.
func (e *Engine) prefetch(ctx context.Context, chunks [][]string, r router) (next <-chan loaded, stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	wait, cancelWait := context.WithTimeout(ctx, prefetchWait)
	conn, err := e.DB.Pool.Acquire(wait)
	cancelWait()
	if err != nil {
		cancel()
		return nil, func() {}
	}
	out := make(chan loaded)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer conn.Release()
		for _, ids := range chunks {
			l := load(ctx, conn, ids, r)
			select {
			case out <- l:
			case <-ctx.Done():
				return
			}
			if l.err != nil {
				return
			}
		}
	}()
	return out, func() { cancel(); <-done }
}

// load reads and routes one chunk. It runs outside the request's
// goroutine, where the server's recovery from a panic does not reach: a
// panic fails the event instead of the process.
func load(ctx context.Context, q db.Querier, ids []string, r router) (l loaded) {
	defer func() {
		if p := recover(); p != nil {
			l = loaded{err: fmt.Errorf("route ahead: %v", p)}
		}
	}()
	s, err := db.LoadRecipientSettings(ctx, q, ids, r.typ.Key)
	if err != nil || len(s) < len(ids) {
		return loaded{settings: s, err: err}
	}
	if err := r.route(ctx, q, ids, s); err != nil {
		return loaded{err: err}
	}
	return loaded{settings: s, routed: &r}
}
