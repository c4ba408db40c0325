package db

import (
	"context"
	"fmt"
	"time"

	"github.com/uptrace/bun"
)

// Recipient is a person lull emails, with their calendar and opt-outs.
// Times of day are minutes after local midnight.
type Recipient struct {
	bun.BaseModel `bun:"table:recipients"`

	ID           string    `bun:"id,pk"`
	Email        string    `bun:"email"`
	Name         string    `bun:"name"`
	Timezone     string    `bun:"timezone"`
	Locale       string    `bun:"locale"`
	Active       bool      `bun:"active"`
	DailyAt      int       `bun:"daily_at"`
	WeeklyOn     int       `bun:"weekly_on"`
	WeeklyAt     int       `bun:"weekly_at"`
	QuietStart   *int      `bun:"quiet_start"`
	QuietEnd     *int      `bun:"quiet_end"`
	Unsubscribed bool      `bun:"unsubscribed"`
	CreatedAt    time.Time `bun:"created_at,nullzero,default:now()"`
	UpdatedAt    time.Time `bun:"updated_at,nullzero,default:now()"`
}

// TypePreference is a recipient's own choice for one type; nil parameters
// follow the type.
type TypePreference struct {
	bun.BaseModel `bun:"table:type_preferences"`

	RecipientID string    `bun:"recipient_id,pk"`
	TypeKey     string    `bun:"type_key,pk"`
	Mode        string    `bun:"mode"`
	WindowMS    *int64    `bun:"window_ms"`
	MaxWaitMS   *int64    `bun:"max_wait_ms"`
	Lead        *bool     `bun:"lead"`
	UpdatedAt   time.Time `bun:"updated_at,nullzero,default:now()"`
}

// GetRecipient loads one recipient.
func GetRecipient(ctx context.Context, q bun.IDB, id string) (*Recipient, error) {
	r := new(Recipient)
	if err := q.NewSelect().Model(r).Where("id = ?", id).Scan(ctx); err != nil {
		return nil, notFound(err, "recipient "+id)
	}
	return r, nil
}

// LockRecipient loads one recipient and holds its row lock until q's
// transaction ends, so a change merged onto what it read cannot write
// over a change made in between (a one-click unsubscribe).
func LockRecipient(ctx context.Context, q bun.IDB, id string) (*Recipient, error) {
	r := new(Recipient)
	if err := q.NewSelect().Model(r).Where("id = ?", id).For("UPDATE").Scan(ctx); err != nil {
		return nil, notFound(err, "recipient "+id)
	}
	return r, nil
}

// UpsertRecipient creates a recipient or updates all the contact fields
// of an existing one, leaving their preferences alone.
func UpsertRecipient(ctx context.Context, q bun.IDB, r *Recipient) error {
	return MergeRecipient(ctx, q, r, "email", "name", "timezone", "locale", "active")
}

// MergeRecipient creates r, or updates only the named contact columns of
// the stored recipient, in one statement (so two callers cannot undo each
// other's fields). r is read back: it holds the stored recipient after.
func MergeRecipient(ctx context.Context, q bun.IDB, r *Recipient, columns ...string) error {
	r.UpdatedAt = time.Now()
	ins := q.NewInsert().Model(r).
		Column("id", "email", "name", "timezone", "locale", "active", "updated_at").
		On("CONFLICT (id) DO UPDATE").
		Set("updated_at = EXCLUDED.updated_at")
	for _, c := range columns {
		ins = ins.Set("? = EXCLUDED.?", bun.Ident(c), bun.Ident(c))
	}
	if _, err := ins.Returning("*").Exec(ctx); err != nil {
		return fmt.Errorf("save recipient %s: %w", r.ID, err)
	}
	return nil
}

// SavePreferences stores a recipient's calendar, opt-out and per-type
// choices in one transaction (a savepoint in q's, if q is one); types
// not in prefs go back to defaults.
func SavePreferences(ctx context.Context, q bun.IDB, r *Recipient, prefs []TypePreference) error {
	return q.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		r.UpdatedAt = time.Now()
		_, err := tx.NewUpdate().Model(r).
			Column("timezone", "daily_at", "weekly_on", "weekly_at", "quiet_start", "quiet_end", "unsubscribed", "updated_at").
			WherePK().Exec(ctx)
		if err != nil {
			return fmt.Errorf("save preferences: %w", err)
		}
		if _, err := tx.NewDelete().Model((*TypePreference)(nil)).Where("recipient_id = ?", r.ID).Exec(ctx); err != nil {
			return fmt.Errorf("save preferences: %w", err)
		}
		if len(prefs) == 0 {
			return nil
		}
		if _, err := tx.NewInsert().Model(&prefs).Exec(ctx); err != nil {
			return fmt.Errorf("save preferences: %w", err)
		}
		return nil
	})
}

// TypePreferences returns a recipient's per-type choices by type key.
func TypePreferences(ctx context.Context, q bun.IDB, recipientID string) (map[string]TypePreference, error) {
	var ps []TypePreference
	if err := q.NewSelect().Model(&ps).Where("recipient_id = ?", recipientID).Scan(ctx); err != nil {
		return nil, fmt.Errorf("load preferences: %w", err)
	}
	m := make(map[string]TypePreference, len(ps))
	for _, p := range ps {
		m[p.TypeKey] = p
	}
	return m, nil
}
