package batching

import (
	"cmp"
	"context"
	"errors"
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
// read a moment earlier is what its own read could have seen, provided
// the read starts after every lock the transaction waited for before it.
// A chunk's read therefore starts once the chunk before has joined its
// batches (where the transaction waits for other events writing to the
// same batches): read while it waited, it would miss what the event it
// waited for committed, such as an open batch for a recipient of the
// next chunk, which the transaction reading for itself always sees.

// prefetchWait bounds how long a fan-out waits for the second connection
// while it holds its transaction's: two fan-outs each holding one of the
// pool's last connections and waiting for another would otherwise wait
// for each other. Past it the fan-out reads in its transaction.
const prefetchWait = 50 * time.Millisecond

// aheadLockWait bounds how long a read ahead waits for a table lock. Its
// reads wait for none but a schema change's (ALTER TABLE, LOCK TABLE),
// which itself waits for the fan-out's transaction to end: the read
// queues behind it, the transaction waits for the read, and the database
// sees no deadlock. Past the bound the transaction reads for itself,
// which it may do at once, as it holds the tables already.
const aheadLockWait = 100 * time.Millisecond

// loaded is one chunk's settings and route, or why they could not be
// read. routed is nil when a recipient is unknown: the transaction then
// refuses the event, naming it.
type loaded struct {
	settings map[string]db.RecipientSettings
	routed   *router
	err      error
	// fresh says every join was found to open a new batch (MarkFresh).
	fresh bool
}

// readAhead reads and routes the chunks of a fan-out on a connection of
// its own, one chunk ahead of the transaction.
type readAhead struct {
	next   chan loaded   // each chunk's settings and route, in order
	joined chan struct{} // the transaction joined a chunk's batches
	stop   func()
}

// prefetch starts reading chunks, in order, with a copy of r each. It
// reads the first at once and each later one once joined says the chunk
// before joined its batches. When saved is not nil, a chunk is read once
// saveAhead saved it, and settings its save knows (db.Saved) are not read
// again. It returns nil when no connection is free. The caller calls stop
// when done.
func (e *Engine) prefetch(ctx context.Context, chunks [][]string, r router, saved *savedAhead) *readAhead {
	ctx, cancel := context.WithCancel(ctx)
	wait, cancelWait := context.WithTimeout(ctx, prefetchWait)
	conn, err := e.DB.Pool.Acquire(wait)
	cancelWait()
	if err == nil {
		err = waitAtMost(ctx, conn, aheadLockWait)
	}
	if err != nil {
		if conn != nil {
			conn.Release()
		}
		cancel()
		return nil
	}
	ra := &readAhead{next: make(chan loaded), joined: make(chan struct{}, len(chunks))}
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Closed, next tells a transaction waiting for a chunk that the
		// request ended: it must not wait forever.
		defer close(ra.next)
		defer releaseWaiting(ctx, conn)
		// Whether a chunk's recipients have batches open is asked from
		// the second chunk on (the first is read while the transaction
		// waits), and only while every chunk asked had none: a fan-out
		// to an audience whose batches are open stops asking at once.
		fresh := true
		for i, ids := range chunks {
			if i > 0 {
				select {
				case <-ra.joined:
				case <-ctx.Done():
					return
				}
			}
			probe := i > 0 && fresh
			l := load(ctx, conn, ids, r, probe, saved, i)
			if probe {
				fresh = l.fresh
			}
			select {
			case ra.next <- l:
			case <-ctx.Done():
				return
			}
			if l.err != nil {
				return
			}
		}
	}()
	ra.stop = func() { cancel(); <-done }
	return ra
}

// settle lets the first chunk's read end before the event is refused:
// canceled mid-query, its connection would be closed instead of going
// back to the pool, and a client sending many refused fan-outs would make
// the pool open a connection for every few of them. The read is bounded
// by aheadLockWait, and ends at once when the request does. A nil
// readAhead has nothing to settle.
func (ra *readAhead) settle() {
	if ra != nil {
		<-ra.next
	}
}

// take returns the next chunk's settings and route, or why there are
// none: the request ended, or the read failed. It returns nil and no
// error when the read waited too long for a table lock: the caller then
// reads this chunk and the rest in its transaction.
func (ra *readAhead) take(ctx context.Context) (*loaded, error) {
	l, ok := <-ra.next
	switch {
	case !ok:
		return nil, cmp.Or(ctx.Err(), errors.New("reading ahead stopped"))
	case db.IsLockTimeout(l.err):
		return nil, nil
	case l.err != nil:
		return nil, l.err
	}
	return &l, nil
}

// load waits for saveAhead to save chunk k, ids, when saved is not nil;
// reads its settings unless the save gave them as they are now
// (savedAhead.current); routes it; and, when asked to probe, marks
// its joins Fresh if none of its recipients has a batch open (db.MarkFresh),
// with an id reserved for each (and marks them so unasked when the save
// created every recipient of the chunk, db.MarkNew): the transaction then opens their batches
// with a plain INSERT of those ids and reads nothing back
// (db.JoinBatches), and a batch opened since makes it upsert them. It
// runs outside the request's goroutine, where the server's recovery from
// a panic does not reach: a panic fails the event instead of the process.
func load(ctx context.Context, q db.Querier, ids []string, r router, probe bool, saved *savedAhead, k int) (l loaded) {
	defer func() {
		if p := recover(); p != nil {
			l = loaded{err: fmt.Errorf("route ahead: %v", p)}
		}
	}()
	var known db.Saved
	if saved != nil {
		var err error
		if known, err = saved.take(ctx, k); err != nil {
			return loaded{err: err}
		}
		if !saved.current(k) {
			known = db.Saved{}
		}
	}
	s, ok := saved.settings(k, ids, known)
	var err error
	if !ok {
		s, err = db.LoadRecipientSettings(ctx, q, ids, r.typ.Key)
	}
	if err != nil || len(s) < len(ids) {
		return loaded{settings: s, err: err}
	}
	if err := r.route(ctx, q, ids, s); err != nil {
		return loaded{err: err}
	}
	l = loaded{settings: s, routed: &r}
	switch {
	case known.Like != nil:
		// The save created every recipient of the chunk: none had a
		// batch to probe for, the first chunk's included.
		l.fresh, err = true, db.MarkNew(ctx, q, r.joins)
	case probe:
		l.fresh, err = db.MarkFresh(ctx, q, r.joins)
	}
	if err != nil {
		return loaded{err: err}
	}
	return l
}
