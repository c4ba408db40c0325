package jobs

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
)

// Control lets the operator console retry or cancel a job through River.
type Control struct {
	Client *river.Client[pgx.Tx]
}

// Retry makes a job run again as soon as possible.
func (c Control) Retry(ctx context.Context, id int64) error {
	_, err := c.Client.JobRetry(ctx, id)
	return err
}

// Cancel stops a job from running (again).
func (c Control) Cancel(ctx context.Context, id int64) error {
	_, err := c.Client.JobCancel(ctx, id)
	return err
}
