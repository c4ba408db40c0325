package db

import (
	"context"
	"embed"
	"fmt"
	"io/fs"

	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/uptrace/bun/migrate"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrationLock is the advisory lock key that serialises migrations when
// several lull processes start at once.
const migrationLock = 0x6c756c6c // "lull"

// Migrate applies River's migrations and lull's own, in that order. It holds
// an advisory lock meanwhile, so concurrent starts take turns instead of
// failing.
func (d *DB) Migrate(ctx context.Context) error {
	conn, err := d.Pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", migrationLock); err != nil {
		return fmt.Errorf("migrate: lock: %w", err)
	}
	defer conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", migrationLock)

	rm, err := rivermigrate.New(riverpgxv5.New(d.Pool), nil)
	if err != nil {
		return fmt.Errorf("migrate river: %w", err)
	}
	if _, err := rm.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("migrate river: %w", err)
	}

	migrations := migrate.NewMigrations()
	files, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if err := migrations.Discover(files); err != nil {
		return fmt.Errorf("migrate: read migrations: %w", err)
	}
	// A migration is marked applied once it succeeded, not before it
	// runs (bun's default): one that failed half-way (a lock it could not
	// get, a view in its way, a stopped process) runs again at the next
	// start. A process that dies between a migration's commit and its mark
	// runs it again too; lull's migrations that change data in several
	// steps (keys_compare_as_bytes) are written to run twice.
	m := migrate.NewMigrator(d.Bun, migrations, migrate.WithMarkAppliedOnSuccess(true))
	if err := m.Init(ctx); err != nil {
		return fmt.Errorf("migrate: init: %w", err)
	}
	if _, err := m.Migrate(ctx); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return nil
}
