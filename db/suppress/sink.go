// Package suppress is the bounce package's Sink on the database: every
// bounce or complaint heard is recorded once and suppresses its address
// when it should (db.RecordBounce). It lives apart from db so that db
// need not import bounce, nor bounce db.
package suppress

import (
	"context"
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
	rep := db.BounceReport{Address: r.Address, Kind: string(r.Kind), Status: r.Status, BatchID: r.BatchID,
		Source: r.Source, Detail: r.Detail, At: r.At}
	return s.DB.InTx(ctx, func(tx pgx.Tx) error { return db.RecordBounce(ctx, tx, rep, p, now) })
}
