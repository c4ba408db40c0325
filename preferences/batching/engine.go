// Package batching applies the rules of package preferences to stored
// data: it routes an event's notifications into batches, retracts them, and
// decides at flush time whether a batch is still wanted. The API, the
// workers and the simulator all go through it, so there is one answer to
// "which batch, and when does it close?".
package batching

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/db/coalesce"
)

// Scheduler enqueues flush jobs, and the wakes that enqueue a fan-out's
// flush jobs later, in the caller's transaction, so a batch and its timer
// commit together. The jobs package implements it; tests may too.
type Scheduler interface {
	ScheduleFlushes(ctx context.Context, tx pgx.Tx, flushes []Flush) error
	ScheduleWakes(ctx context.Context, tx pgx.Tx, wakes []Wake) error
}

// Flush asks for batch BatchID to be flushed at At.
type Flush struct {
	BatchID int64
	At      time.Time
}

// Metrics hears what each stored event did, for /metrics; package
// metrics/ implements it.
type Metrics interface {
	Ingested(batched, suppressed, opened int)
}

// Engine is the batching engine over one database.
type Engine struct {
	DB        *db.DB
	Scheduler Scheduler
	Logger    *slog.Logger
	// Metrics counts ingested events; nil counts nothing.
	Metrics Metrics
	// MaxData is the largest data of one event, in bytes of compact
	// JSON (LULL_MAX_DATA); 0 means DefaultMaxData.
	MaxData int
	// Now is the clock; tests walk it forward instead of sleeping.
	Now func() time.Time

	// sets gathers events posted at the same moment into one
	// transaction (see ingestSet).
	sets coalesce.Group[ingestCall, ingestOut]
	// writing tells which batches events are being written to now.
	writing inFlight
	// types remembers the types events were posted for (see db.Memo).
	types db.Memo[string, *db.Type]
}

// SaveType creates or updates a type, which the next event of this
// process sees; other processes see it within db.MemoTTL. t must be the
// caller's own: db.SaveType sets its times, and a type from the memo is
// shared by every event being written.
func (e *Engine) SaveType(ctx context.Context, t *db.Type) error {
	err := db.SaveType(ctx, e.DB.Pool, t)
	e.types.Forget()
	return err
}

func (e *Engine) now() time.Time {
	if e.Now != nil {
		return e.Now()
	}
	return time.Now()
}
