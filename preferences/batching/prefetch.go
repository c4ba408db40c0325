package batching

import (
	"context"
	"time"

	"github.com/lull-dev/lull/db"
)

// A fan-out's transaction runs on one server process, one statement at a
// time, while the machine's other cores wait. Reading the recipients'
// settings does not need the transaction when the event gives no
// recipient inline (none was written by it), so a second connection reads
// each chunk's settings while the transaction writes the chunk before.
// The transaction reads committed data statement by statement anyway:
// settings read a moment earlier on another connection are what its own
// read could have seen.

// prefetchWait bounds how long a fan-out waits for the second connection
// while it holds its transaction's: two fan-outs each holding one of the
// pool's last connections and waiting for another would otherwise wait
// for each other. Past it the fan-out reads in its transaction.
const prefetchWait = 50 * time.Millisecond

// loaded is one chunk's settings, or why they could not be read.
type loaded struct {
	settings map[string]db.RecipientSettings
	err      error
}

// prefetch reads the settings of chunks, in order, on a connection of its
// own, at most one chunk ahead of the caller. It returns nil when no
// connection is free. stop ends it early; the caller calls it when done.
func (e *Engine) prefetch(ctx context.Context, chunks [][]string, typeKey string) (next <-chan loaded, stop func()) {
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
			s, err := db.LoadRecipientSettings(ctx, conn, ids, typeKey)
			select {
			case out <- loaded{s, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	return out, func() { cancel(); <-done }
}
