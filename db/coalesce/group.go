package coalesce

import (
	"context"
	"sync"
	"time"
)

// A Group lets calls that arrive together share one piece of work, the
// way a database commits many transactions with one disk flush. When a
// flush wave puts a hundred flush jobs on the workers at once, or thirty
// clients post events at once, each of them would otherwise run its own
// transaction: a hundred of each statement where one statement over a
// hundred rows costs the server several times less.
//
// A call joins the pending set. If fewer than groupLeaders sets are being
// run, or a full set is waiting and fewer than fullLeaders are, the caller
// leads: it takes up to groupSize pending calls, runs them
// as one set, hands each its result, and passes the lead to a call still
// pending, if any, before it returns with its own result. No call waits
// for a timer: when nothing else is pending, a call runs as a set of one
// at once, so a quiet system works exactly as it would alone.
//
// The zero Group is ready to use.
type Group[In, Out any] struct {
	mu      sync.Mutex
	pending []*groupCall[In, Out]
	leaders int
}

type groupCall[In, Out any] struct {
	in  In
	out Out
	ok  bool // out is a result: the set did not fail as a whole
	// done carries true when out is set, false when the call is asked to
	// lead the next set. It holds both, so no sender ever waits.
	done   chan bool
	handed bool // asked to lead already
}

const (
	// groupLeaders is how many sets run at once. One: while a set is in
	// the database's hands, the next one gathers behind it. On two cores
	// two leaders split the calls into sets too small to pay: ingest ran
	// at a third of the rate (1,300 events/s against 3,800) and a flush
	// wave at two thirds.
	groupLeaders = 1
	// fullLeaders is how many sets run at once while a full set waits:
	// then a second set takes no calls from the first, and its database
	// work overlaps the first one's work in lull. A flush set of a hundred
	// spends about half its 35–40 ms rendering, and in a flush wave run on
	// more workers than a set holds, full sets queued behind each other:
	// 1,900–2,200 digests a second with one set at a time, 2,100–2,700
	// with two.
	fullLeaders = 2
	// groupSize bounds one set, and so one transaction's locks and rows.
	groupSize = 100
	// groupTimeout bounds one set's work, which runs on behalf of calls
	// whose own deadlines the leader cannot honour one by one.
	groupTimeout = time.Minute
)

// do runs in through run, alone or in a set with calls made at the same
// time. run gets the inputs of one set and returns their outputs in the
// same order; it runs on behalf of every caller in the set, so it is given
// the leader's context without its cancellation, and must not wait for
// anything one caller holds. ok is false when the set failed as a whole
// (run panicked): the caller then does its own work by itself, so that a
// panic fails one job, as it would without the group.
func (g *Group[In, Out]) Do(ctx context.Context, in In, run func(context.Context, []In) []Out) (out Out, ok bool) {
	c := &groupCall[In, Out]{in: in, done: make(chan bool, 2)}
	g.mu.Lock()
	g.pending = append(g.pending, c)
	lead := g.leaders < groupLeaders || g.leaders < fullLeaders && len(g.pending) >= groupSize
	if lead {
		g.leaders++
		c.handed = true
	}
	g.mu.Unlock()
	for {
		if lead {
			g.lead(ctx, run)
		}
		if <-c.done {
			return c.out, c.ok
		}
		lead = true
	}
}

// lead runs one set of pending calls, then passes the lead on or gives it
// up.
func (g *Group[In, Out]) lead(ctx context.Context, run func(context.Context, []In) []Out) {
	g.mu.Lock()
	n := min(len(g.pending), groupSize)
	set := g.pending[:n:n]
	g.pending = append([]*groupCall[In, Out](nil), g.pending[n:]...)
	g.mu.Unlock()

	if n > 0 {
		ins := make([]In, n)
		for i, c := range set {
			ins[i] = c.in
		}
		outs, ok := runSet(ctx, ins, run)
		for i, c := range set {
			if c.ok = ok; ok {
				c.out = outs[i]
			}
			c.done <- true
		}
	}

	g.mu.Lock()
	defer g.mu.Unlock()
	if g.leaders > groupLeaders && len(g.pending) < groupSize {
		// The extra lead was for a backlog that is gone: the other
		// leader, still running, takes what waits, in one set.
		g.leaders--
		return
	}
	for _, c := range g.pending {
		if !c.handed {
			c.handed = true
			c.done <- false
			return
		}
	}
	g.leaders--
}

// runSet runs one set, turning a panic into ok false.
func runSet[In, Out any](ctx context.Context, ins []In, run func(context.Context, []In) []Out) (outs []Out, ok bool) {
	defer func() {
		if recover() != nil {
			outs, ok = nil, false
		}
	}()
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), groupTimeout)
	defer cancel()
	return run(ctx, ins), true
}
