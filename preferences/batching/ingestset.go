package batching

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lull-dev/lull/db"
)

// Events to a few recipients that arrive at the same moment are written in
// sets: one transaction claims their idempotency keys, stores them, and
// routes, joins and schedules all their notifications with one statement
// of each kind. Thirty clients posting an event each then cost the
// database one transaction of a dozen statements instead of thirty of
// ten. A set's events commit together; each caller still gets its own
// answer, and an event that cannot be written with the others (a replayed
// key, an unknown recipient, a key another event of the set already has)
// is written by itself afterwards, exactly as without sets.
//
// Events of a set may name the same recipients: a flood of events into one
// thread then meets in the set, and each batch row is written once per set
// (see db.JoinBatches) instead of once per event, each event waiting for
// the one before to commit. The set is written as if its events came one
// after another at the same instant. Two exceptions keep that exact: the
// events sharing a recipient must be of one type (a set reads one
// preference per recipient), and an event is written by itself when the
// route of a recipient it shares depends on the recipient's past (the
// burst guard, the leading item), which an earlier event of the set
// changes but the database does not show yet.
//
// Events of up to smallEvent recipients are always written in sets.
// Events of up to setRecipients, to a team or a thread's followers, are
// what floods into shared batches are made of: they join a set when
// another event of the same type and batch_key naming one of their
// recipients is being written at the same moment (inFlight), and are
// written alone otherwise. Events of different types or batch keys that
// meet in one digest are not seen as meeting, and queue for its row as
// they did before sets shared recipients. Alone, such
// events into separate batches run side by side on every core, where one
// set at a time ran a flood of them into fresh batches at a third to two
// thirds of the rate; in a set, events into the same batches no longer
// queue for their rows. A larger fan-out is set-based already and is
// written alone; a set of groupSize events of setRecipients is at most
// as large as one chunk of a fan-out.
const (
	smallEvent    = 10
	setRecipients = 99
)

// inFlight counts the events of at most setRecipients recipients being
// written now, per recipient, type and batch_key: the batch of a
// cool-down or immediate notification. The zero value is ready to use.
type inFlight struct {
	mu sync.Mutex
	n  map[flightKey]int
}

type flightKey struct{ recipient, typ, batchKey string }

// enter counts ev (of type typ) as being written and reports whether
// another event of its type and batch_key to one of its recipients is.
func (f *inFlight) enter(ev *Event, typ string) (contended bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n == nil {
		f.n = map[flightKey]int{}
	}
	for _, r := range ev.Recipients {
		k := flightKey{r.ID, typ, ev.BatchKey}
		contended = contended || f.n[k] > 0
		f.n[k]++
	}
	return contended
}

// leave counts ev as written.
func (f *inFlight) leave(ev *Event, typ string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range ev.Recipients {
		k := flightKey{r.ID, typ, ev.BatchKey}
		if f.n[k]--; f.n[k] <= 0 {
			delete(f.n, k)
		}
	}
}

// setLockWait is how long a set waits for a row another transaction holds
// (a batch a fan-out is filling, a key its first request is using) before
// it gives up and its events are written one by one, each waiting for
// its own rows: one set runs at a time (two only while a full set waits
// behind it), so a set that waited would hold up every event behind it.
const setLockWait = 200 * time.Millisecond

// ingestCall is one validated event to write.
type ingestCall struct {
	apiKeyID int64
	typ      *db.Type
	ev       *Event
	// saved says its inline recipients are saved beside its transaction
	// (saveAhead), not by store.
	saved bool
	// inOrder says they are all saved before any batch is joined, not
	// chunk by chunk as the batches are: set when a save met a lock
	// while the transaction held batches (errSavedLate).
	inOrder bool
}

// ingestOut is a set's answer for one event: its result or error, or
// alone when the caller must write it by itself.
type ingestOut struct {
	res   *IngestResult
	err   error
	alone bool
}

// ingestSet writes calls as one set and answers each in order.
func (e *Engine) ingestSet(ctx context.Context, calls []ingestCall) []ingestOut {
	outs := make([]ingestOut, len(calls))
	for i := range outs {
		outs[i].alone = true
	}
	members := admit(calls)
	// A set whose transaction fails because some events name unknown
	// recipients is tried again without them: each such event then gets
	// its own error, from its own transaction.
	for len(members) > 0 {
		in := &ingestion{Engine: e, now: e.ingestNow(), members: slices.Clone(members)}
		written := false
		err := e.DB.InTxWaitingAtMost(ctx, setLockWait, func(tx pgx.Tx) error {
			in.tx = tx
			err := in.writeSet(ctx)
			written = err == nil
			return err
		})
		var unknown *unknownError
		var apart *apartError
		switch {
		case err == nil:
			for _, m := range in.members {
				outs[m.out] = ingestOut{res: m.res}
			}
			return outs
		case written && !db.IsServerError(err):
			// The COMMIT was sent and no answer came: the events may be
			// stored. Writing them again could store them twice, so each
			// caller gets the error, as a single event's caller would.
			for _, m := range in.members {
				outs[m.out] = ingestOut{err: err}
			}
			return outs
		case errors.As(err, &unknown):
			members = slices.DeleteFunc(members, func(m *member) bool { return m.err != nil })
		case errors.As(err, &apart):
			members = slices.DeleteFunc(members, func(m *member) bool { return slices.Contains(apart.members, m) })
		default:
			if len(members) > 1 && !db.IsLockTimeout(err) {
				e.Logger.Warn("writing events as a set failed; writing them one by one", "events", len(members), "err", err)
			}
			return outs
		}
	}
	return outs
}

// admit picks the calls that can share a transaction: no two may use the
// same idempotency key, and calls naming the same recipient must be of
// one type.
func admit(calls []ingestCall) []*member {
	type key struct {
		apiKeyID int64
		key      string
	}
	typeOf, keys := map[string]string{}, map[key]bool{}
	var members []*member
	for i, c := range calls {
		k := key{c.apiKeyID, c.ev.Key}
		taken := c.ev.Key != "" && keys[k]
		for _, r := range c.ev.Recipients {
			t, named := typeOf[r.ID]
			taken = taken || named && t != c.typ.Key
		}
		if taken {
			continue
		}
		keys[k] = true
		for _, r := range c.ev.Recipients {
			typeOf[r.ID] = c.typ.Key
		}
		members = append(members, &member{ingestCall: c, out: i})
	}
	return members
}

// writeSet writes the members of a set in in's transaction. Members whose
// key was used before are left out, for the caller to replay alone.
func (in *ingestion) writeSet(ctx context.Context) error {
	if err := in.claimKeys(ctx); err != nil {
		return err
	}
	if len(in.members) == 0 {
		return nil
	}
	if err := in.store(ctx); err != nil {
		return err
	}
	shares := make([]share, len(in.members))
	for i, m := range in.members {
		shares[i] = share{m, m.ids}
	}
	if err := in.part(ctx, shares, nil); err != nil {
		return err
	}
	return in.finish(ctx)
}

// claimKeys claims the members' idempotency keys and drops the members
// whose key was claimed before.
func (in *ingestion) claimKeys(ctx context.Context) error {
	var apiKeys []int64
	var keys []string
	var keyed []*member
	for _, m := range in.members {
		if m.ev.Key != "" {
			apiKeys, keys, keyed = append(apiKeys, m.apiKeyID), append(keys, m.ev.Key), append(keyed, m)
		}
	}
	if len(keyed) == 0 {
		return nil
	}
	claimed, err := db.ClaimEventKeys(ctx, in.tx, apiKeys, keys)
	if err != nil {
		return err
	}
	used := map[*member]bool{}
	for i, m := range keyed {
		used[m] = !claimed[i]
	}
	in.members = slices.DeleteFunc(in.members, func(m *member) bool { return used[m] })
	return nil
}

// apartError names the events of a set that must be written by themselves
// (see setRecipients); the set is tried again without them.
type apartError struct{ members []*member }

func (e *apartError) Error() string {
	return fmt.Sprintf("%d events share recipients whose route depends on their past", len(e.members))
}
