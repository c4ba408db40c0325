package db

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/uptrace/bun"
)

// Type is a registered notification type with its defaults and texts.
type Type struct {
	bun.BaseModel `bun:"table:notification_types" db:"-"`

	Key          string    `bun:"key,pk" db:"key"`
	Name         string    `bun:"name" db:"name"`
	Description  string    `bun:"description" db:"description"`
	Category     string    `bun:"category" db:"category"`
	Required     bool      `bun:"required" db:"required"`
	DefaultMode  string    `bun:"default_mode" db:"default_mode"`
	WindowMS     int64     `bun:"window_ms" db:"window_ms"`
	MaxWaitMS    int64     `bun:"max_wait_ms" db:"max_wait_ms"`
	Lead         bool      `bun:"lead" db:"lead"`
	MaxItems     int       `bun:"max_items" db:"max_items"`
	DisplayLimit int       `bun:"display_limit" db:"display_limit"`
	ItemOrder    string    `bun:"item_order" db:"item_order"`
	ItemText     string    `bun:"item_text" db:"item_text"`
	GroupText    string    `bun:"group_text" db:"group_text"`
	BurstLimit   int       `bun:"burst_limit" db:"burst_limit"`
	SkipRead     bool      `bun:"skip_read" db:"skip_read"`
	CreatedAt    time.Time `bun:"created_at,nullzero,default:now()" db:"created_at"`
	UpdatedAt    time.Time `bun:"updated_at,nullzero,default:now()" db:"updated_at"`
}

// Window and MaxWait are the type's durations.
func (t *Type) Window() time.Duration  { return time.Duration(t.WindowMS) * time.Millisecond }
func (t *Type) MaxWait() time.Duration { return time.Duration(t.MaxWaitMS) * time.Millisecond }

// GetType loads one type. It reads through pgx rather than bun because
// every ingested event asks for its type, and bun's reflection costs more
// than the query.
func GetType(ctx context.Context, q Querier, key string) (*Type, error) {
	rows, err := q.Query(ctx, `SELECT `+typeColumns+` FROM notification_types WHERE key = $1`, key)
	ts, err := collectTypes(rows, err)
	switch {
	case err != nil:
		return nil, fmt.Errorf("type %s: %w", key, err)
	case len(ts) == 0:
		return nil, fmt.Errorf("type %s: %w", key, ErrNotFound)
	}
	return ts[0], nil
}

const typeColumns = `key, name, description, category, required, default_mode, window_ms,
	max_wait_ms, lead, max_items, display_limit, item_order, item_text, group_text, burst_limit, skip_read,
	created_at, updated_at`

func collectTypes(rows pgx.Rows, err error) ([]*Type, error) {
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToAddrOfStructByName[Type])
}

// ListTypes returns every type, by category then name.
func ListTypes(ctx context.Context, q bun.IDB) ([]Type, error) {
	var ts []Type
	if err := q.NewSelect().Model(&ts).Order("category", "name", "key").Scan(ctx); err != nil {
		return nil, fmt.Errorf("list types: %w", err)
	}
	return ts, nil
}

// SaveType creates or replaces a type.
func SaveType(ctx context.Context, q bun.IDB, t *Type) error {
	t.UpdatedAt = time.Now()
	_, err := q.NewInsert().Model(t).
		On("CONFLICT (key) DO UPDATE").
		Set("name = EXCLUDED.name, description = EXCLUDED.description, category = EXCLUDED.category").
		Set("required = EXCLUDED.required, default_mode = EXCLUDED.default_mode").
		Set("window_ms = EXCLUDED.window_ms, max_wait_ms = EXCLUDED.max_wait_ms, lead = EXCLUDED.lead").
		Set("max_items = EXCLUDED.max_items, display_limit = EXCLUDED.display_limit, item_order = EXCLUDED.item_order").
		Set("item_text = EXCLUDED.item_text, group_text = EXCLUDED.group_text, burst_limit = EXCLUDED.burst_limit").
		Set("skip_read = EXCLUDED.skip_read").
		Set("updated_at = EXCLUDED.updated_at").
		Returning("created_at").
		Exec(ctx)
	if err != nil {
		return fmt.Errorf("save type %s: %w", t.Key, err)
	}
	return nil
}
