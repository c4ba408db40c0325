package batching

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/lull-dev/lull/db"
)

// A fan-out's transaction runs on one server process, one statement at a
// time, while the machine's other cores wait. Reading the recipients'
// settings and routing them (their mutes, history and visits) only read,
// and need not see the transaction's writes when the event gives no
// recipient inline (none was written by it) and each chunk names other
// recipients. So a second connection reads and routes chunks while the
// transaction writes the ones before. The transaction reads committed
// data statement by statement anyway: what another connection read a
// moment earlier is what its own read could have seen, provided the read
// starts after every lock the transaction waited for before it.
//
// Only joining batches waits for other events (JoinBatchesMeeting says
// when it may have, and why the one wait it cannot tell does no harm):
// read while the transaction waited, a chunk would miss what the event
// it waited for committed, such as an open batch or an unsubscribe for a
// recipient of that chunk, which the transaction reading for itself
// always sees. So while every chunk read so far opens new batches
// (MarkFresh found none open: nothing to wait for) and no join met
// another event's batch, a fan-out naming its recipients by id reads up
// to readAheadAtMost chunks ahead, and its reads and writes overlap
// whole; otherwise a chunk is read once the chunk before it has joined
// its batches. A chunk read before a join that did meet one is read
// again by the transaction (readAhead.current).

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

// readAheadAtMost is how many chunks past the one the transaction writes
// a fresh fan-out's read may be: each holds 10,000 recipients' settings.
const readAheadAtMost = 2

// loaded is one chunk's settings and route, or why they could not be
// read. routed is nil when a recipient is unknown: the transaction then
// refuses the event, naming it.
type loaded struct {
	settings map[string]db.RecipientSettings
	routed   *router
	err      error
	// fresh says every join was found to open a new batch (MarkFresh).
	fresh bool
	// after is how many chunks the transaction had joined when the read
	// began (see readAhead.current).
	after int32
}

// readAhead reads and routes the chunks of a fan-out on a connection of
// its own, ahead of the transaction.
type readAhead struct {
	next      chan loaded   // each chunk's settings and route, in order
	joinCount               // the chunks the transaction joined, which wake the read
	halt      chan struct{} // closed: read no further chunk (settle)
	stop      func()
}

// prefetch starts reading chunks, in order, with a copy of r each. It
// reads the first at once and each later one as await allows. When saved
// is not nil, a chunk is read once saveAhead saved it, and settings its
// save knows (db.Saved) are not read again. It returns nil when no
// connection is free. The caller calls stop when done.
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
	ra := &readAhead{next: make(chan loaded, 1), joinCount: joinCount{wake: make(chan struct{}, 1)}, halt: make(chan struct{})}
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Closed, next tells a transaction waiting for a chunk that the
		// request ended: it must not wait forever.
		defer close(ra.next)
		defer releaseWaiting(ctx, conn)
		// Whether a chunk's recipients have batches open is asked only
		// while every chunk asked had none: a fan-out to an audience
		// whose batches are open stops asking at once.
		fresh := true
		// An audience given inline is saved ahead on a third connection
		// (saveAhead), which knows most of its settings: reading further
		// ahead saves nothing there, and only hurried the save onto the
		// cores the transaction writes with (100,000 new inline
		// recipients took 5–8 % longer).
		speculate := saved == nil
		for i, ids := range chunks {
			if !ra.await(ctx, i, fresh && speculate) {
				return
			}
			after := ra.joined.Load()
			l := load(ctx, conn, ids, r, fresh, saved, i)
			l.after, fresh = after, fresh && l.fresh
			select {
			case ra.next <- l:
			case <-ctx.Done():
				return
			}
			// A chunk naming an unknown recipient refuses the event.
			if l.err != nil || l.routed == nil {
				return
			}
		}
	}()
	ra.stop = func() { cancel(); <-done }
	return ra
}

// await waits until chunk i may be read: once the chunk before it has
// joined its batches or, while every chunk read opened new batches
// (fresh) and no join met another event's, once the transaction has
// joined all but readAheadAtMost of the chunks before it. It reports
// false when the read must stop.
func (ra *readAhead) await(ctx context.Context, i int, fresh bool) bool {
	for {
		select {
		case <-ra.halt:
			return false
		default:
		}
		joined := int(ra.joined.Load())
		if joined >= i || fresh && ra.metAt.Load() == 0 && joined >= i-readAheadAtMost {
			return true
		}
		select {
		case <-ra.wake:
		case <-ra.halt:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// current says whether chunk l was read after every chunk that met
// another event's batches had joined them, as the transaction reading
// for itself would have read it. It is asked once the chunks before l
// are joined, so no later join can change the answer.
func (ra *readAhead) current(l *loaded) bool {
	return ra.currentSince(l.after)
}

// joinCount counts the chunks whose batches a fan-out's transaction has
// joined, for work done beside it on another connection, which must
// know whether what it read came after the transaction's waits. metAt is
// the count once a chunk met batches another event had opened, for
// which the transaction may have waited (0 while none did).
type joinCount struct {
	joined, metAt atomic.Int32
	wake          chan struct{} // capacity 1: a token at each join
}

// add counts a chunk joined, which met another event's batches or not.
func (c *joinCount) add(met bool) {
	n := c.joined.Add(1)
	if met {
		c.metAt.Store(n)
	}
	// Wake whoever waits for a join, or leave a token if none does.
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// currentSince says whether what was read once after chunks had joined
// is what the transaction could have read itself: no chunk joined since
// met another event's batches.
func (c *joinCount) currentSince(after int32) bool {
	return c.metAt.Load() <= after
}

// settle lets the read end before the event is refused: canceled
// mid-query, its connection would be closed instead of going back to the
// pool, and a client sending many refused fan-outs would make the pool
// open a connection for every few of them. The read finishes the chunk
// it is reading, bounded by aheadLockWait, and reads no other; it ends
// at once when the request does. A nil readAhead has nothing to settle.
func (ra *readAhead) settle() {
	if ra != nil {
		close(ra.halt)
		for range ra.next {
		}
	}
}

// take returns the next chunk's settings and route, or why there are
// none: the request ended, or the read failed. It returns nil and no
// error when the read waited too long for a table lock, or ended with a
// chunk that was not current (the transaction reads that again anyway)
// and that failed or named an unknown recipient: the caller then reads
// this chunk and the rest in its transaction.
func (ra *readAhead) take(ctx context.Context) (*loaded, error) {
	l, ok := <-ra.next
	switch {
	case !ok:
		return nil, cmp.Or(ctx.Err(), errors.New("reading ahead stopped"))
	case db.IsLockTimeout(l.err), !ra.current(&l) && (l.err != nil || l.routed == nil):
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
