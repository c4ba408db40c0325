// Package suppress is the bounce package's Sink on the database: every
// bounce or complaint heard is recorded once and suppresses its address
// when it should (db.RecordBounce). It lives apart from db so that db
// need not import bounce, nor bounce db.
package suppress

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lull-dev/lull/bounce"
	"github.com/lull-dev/lull/db"
)

// Defaults of the soft bounce policy (LULL_SOFT_BOUNCE_THRESHOLD,
// LULL_SOFT_BOUNCE_DECAY).
const (
	DefaultThreshold = 3
	DefaultDecay     = 7 * 24 * time.Hour
)

// Sink records bounce reports in the database.
type Sink struct {
	DB *db.DB
	// Soft says when soft bounces suppress; zero fields take the defaults.
	Soft db.SoftBouncePolicy
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

var _ bounce.Sink = (*Sink)(nil)

// Record records r in its own transaction. A repeated report changes
// nothing; a report naming no address or no known kind is refused with
// db.ErrBadReport.
func (s *Sink) Record(ctx context.Context, r bounce.Report) error {
	p := s.Soft
	if p.Threshold <= 0 {
		p.Threshold = DefaultThreshold
	}
	if p.Decay <= 0 {
		p.Decay = DefaultDecay
	}
	now := time.Now()
	if s.Now != nil {
		now = s.Now()
	}
	if err := s.checkBatch(ctx, &r); err != nil {
		return err
	}
	rep := db.BounceReport{Address: r.Address, Kind: string(r.Kind), Status: r.Status, BatchID: r.BatchID,
		Source: r.Source, Detail: r.Detail, At: r.At}
	err := s.DB.InTx(ctx, func(tx pgx.Tx) error { return db.RecordBounce(ctx, tx, rep, p, now) })
	if errors.Is(err, db.ErrBadReport) {
		return fmt.Errorf("%w: %w", bounce.ErrRefused, err)
	}
	return err
}

// checkBatch holds a report heard by the SMTP receiver to the batch its
// signed return path names. The signature proves the batch, not the
// address: whoever received that batch's email knows its return path and
// could send a bounce naming someone else. So the address must be the
// one the batch was sent to (a complaint whose feedback loop removed it
// gets that one), and a batch no longer known proves nothing. Webhook
// reports come signed by the email service, which saw the address.
func (s *Sink) checkBatch(ctx context.Context, r *bounce.Report) error {
	if r.Source != "smtp" || r.BatchID == 0 {
		return nil
	}
	to, err := db.BatchAddress(ctx, s.DB.Pool, r.BatchID)
	switch {
	case errors.Is(err, db.ErrNotFound):
		return fmt.Errorf("%w: batch %d is not known", bounce.ErrRefused, r.BatchID)
	case err != nil:
		return err
	case r.Address == "":
		r.Address = to
	case db.NormalizeAddress(r.Address) != db.NormalizeAddress(to):
		return fmt.Errorf("%w: batch %d was not sent to %q", bounce.ErrRefused, r.BatchID, r.Address)
	}
	return nil
}
