package db

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Querier is what a pgx pool and a pgx.Tx share, so engine queries run
// inside or outside a transaction.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Pipeline runs the statements fn issues with Exec in one round trip and
// one implicit transaction: all of them take effect or none. It suits a
// step that only writes, such as recording a send's outcome, where a
// BEGIN and a COMMIT of their own would double the round trips. fn sees
// no results: Exec always succeeds at once and the first error of the
// pipeline is returned; Query and QueryRow are refused.
func (d *DB) Pipeline(ctx context.Context, fn func(Querier) error) error {
	return sendPipelined(ctx, d.Pool, fn)
}

// PipelineTx is Pipeline inside tx: the writes fn issues go to the server
// together and take effect with the transaction.
func PipelineTx(ctx context.Context, tx pgx.Tx, fn func(Querier) error) error {
	return sendPipelined(ctx, tx, fn)
}

func sendPipelined(ctx context.Context, to interface {
	SendBatch(context.Context, *pgx.Batch) pgx.BatchResults
}, fn func(Querier) error) error {
	var b pgx.Batch
	if err := fn(pipeline{&b}); err != nil {
		return err
	}
	if b.Len() == 0 {
		return nil
	}
	return to.SendBatch(ctx, &b).Close()
}

var errPipelined = errors.New("a pipeline only writes: no query results")

type pipeline struct{ b *pgx.Batch }

func (p pipeline) Exec(_ context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	p.b.Queue(sql, args...)
	return pgconn.CommandTag{}, nil
}

func (pipeline) Query(context.Context, string, ...any) (pgx.Rows, error) { return nil, errPipelined }

func (pipeline) QueryRow(context.Context, string, ...any) pgx.Row { return errRow{} }

type errRow struct{}

func (errRow) Scan(...any) error { return errPipelined }
