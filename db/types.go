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

	Key          string `bun:"key,pk" db:"key"`
	Name         string `bun:"name" db:"name"`
	Description  string `bun:"description" db:"description"`
	Category     string `bun:"category" db:"category"`
	Required     bool   `bun:"required" db:"required"`
	DefaultMode  string `bun:"default_mode" db:"default_mode"`
	WindowMS     int64  `bun:"window_ms" db:"window_ms"`
	MaxWaitMS    int64  `bun:"max_wait_ms" db:"max_wait_ms"`
	Lead         bool   `bun:"lead" db:"lead"`
	MaxItems     int    `bun:"max_items" db:"max_items"`
	DisplayLimit int    `bun:"display_limit" db:"display_limit"`
	ItemOrder    string `bun:"item_order" db:"item_order"`
	ItemText     string `bun:"item_text" db:"item_text"`
	GroupText    string `bun:"group_text" db:"group_text"`
	// ViewURL is where an email's "View all" leads (see
	// mailtemplates.ValidateViewURL); empty for the object's own URL.
	ViewURL    string `bun:"view_url" db:"view_url"`
	BurstLimit int    `bun:"burst_limit" db:"burst_limit"`
	SkipRead   bool   `bun:"skip_read" db:"skip_read"`
	// Texts are the type's texts per locale (BCP 47 tag, canonical form).
	Texts     map[string]TypeTexts `bun:"texts,type:jsonb" db:"texts"`
	CreatedAt time.Time            `bun:"created_at,nullzero,default:now()" db:"created_at"`
	UpdatedAt time.Time            `bun:"updated_at,nullzero,default:now()" db:"updated_at"`

	// Unsubscribe is what an email's unsubscribe link stops: "type" or
	// "thread" (the email's batch key).
	Unsubscribe string `bun:"unsubscribe" db:"unsubscribe"`
	// DailyBudget is the daily email budget of recipients who set none,
	// when this type's batch is flushed; nil follows LULL_DAILY_EMAIL_BUDGET.
	DailyBudget *int `bun:"daily_budget" db:"daily_budget"`
	// SharedDelivery sends recipients due at the same moment with
	// identical content one email (jobs/shared.go).
	SharedDelivery bool `bun:"shared_delivery" db:"shared_delivery"`
	// CatchUpDays slows this type to a weekly digest for a recipient not
	// seen for that many days (batching.catchUp); nil is off.
	CatchUpDays *int `bun:"catch_up_days" db:"catch_up_days"`
}

// TypeTexts are a type's texts in one locale; an empty one falls back.
type TypeTexts struct {
	Name        string `json:"name,omitempty"`
	Description string `json:"description,omitempty"`
	ItemText    string `json:"item_text,omitempty"`
	GroupText   string `json:"group_text,omitempty"`
}

// TextsIn returns the type's texts for a locale chain (de-AT, de; see
// i18n.Locale.TextChain): each text from the first locale that has it,
// else the type's own.
func (t *Type) TextsIn(chain []string) TypeTexts {
	out := TypeTexts{Name: t.Name, Description: t.Description, ItemText: t.ItemText, GroupText: t.GroupText}
	for i := len(chain) - 1; i >= 0; i-- {
		l, ok := t.Texts[chain[i]]
		if !ok {
			continue
		}
		for _, f := range []struct {
			dst *string
			src string
		}{
			{&out.Name, l.Name}, {&out.Description, l.Description}, {&out.ItemText, l.ItemText}, {&out.GroupText, l.GroupText},
		} {
			if f.src != "" {
				*f.dst = f.src
			}
		}
	}
	return out
}

// GroupTextLocale is the locale of chain whose group_text TextsIn
// returns, "" when it is the type's own: its plural rules pick the
// text's form.
func (t *Type) GroupTextLocale(chain []string) string {
	for _, l := range chain {
		if t.Texts[l].GroupText != "" {
			return l
		}
	}
	return ""
}

// textsOrEmpty stores a type without locale texts as {}, never null.
func textsOrEmpty(m map[string]TypeTexts) map[string]TypeTexts {
	if m == nil {
		return map[string]TypeTexts{}
	}
	return m
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
	view_url, texts, created_at, updated_at, unsubscribe, daily_budget, shared_delivery, catch_up_days`

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

// SaveType creates or replaces a type; t's CreatedAt is read back.
func SaveType(ctx context.Context, q Querier, t *Type) error {
	t.UpdatedAt = time.Now()
	err := q.QueryRow(ctx, `
		INSERT INTO notification_types (key, name, description, category, required, default_mode, window_ms,
		    max_wait_ms, lead, max_items, display_limit, item_order, item_text, group_text, burst_limit, skip_read, updated_at, view_url, texts,
		    unsubscribe, daily_budget, shared_delivery, catch_up_days)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, coalesce(nullif($20, ''), 'type'), $21, $22, $23)
		ON CONFLICT (key) DO UPDATE SET
		    name = EXCLUDED.name, description = EXCLUDED.description, category = EXCLUDED.category,
		    required = EXCLUDED.required, default_mode = EXCLUDED.default_mode,
		    window_ms = EXCLUDED.window_ms, max_wait_ms = EXCLUDED.max_wait_ms, lead = EXCLUDED.lead,
		    max_items = EXCLUDED.max_items, display_limit = EXCLUDED.display_limit, item_order = EXCLUDED.item_order,
		    item_text = EXCLUDED.item_text, group_text = EXCLUDED.group_text, burst_limit = EXCLUDED.burst_limit,
		    skip_read = EXCLUDED.skip_read, updated_at = EXCLUDED.updated_at, view_url = EXCLUDED.view_url, texts = EXCLUDED.texts,
		    unsubscribe = EXCLUDED.unsubscribe, daily_budget = EXCLUDED.daily_budget, shared_delivery = EXCLUDED.shared_delivery,
		    catch_up_days = EXCLUDED.catch_up_days
		RETURNING created_at`,
		t.Key, t.Name, t.Description, t.Category, t.Required, t.DefaultMode, t.WindowMS,
		t.MaxWaitMS, t.Lead, t.MaxItems, t.DisplayLimit, t.ItemOrder, t.ItemText, t.GroupText, t.BurstLimit, t.SkipRead, t.UpdatedAt, t.ViewURL, textsOrEmpty(t.Texts),
		t.Unsubscribe, t.DailyBudget, t.SharedDelivery, t.CatchUpDays).
		Scan(&t.CreatedAt)
	if err != nil {
		return fmt.Errorf("save type %s: %w", t.Key, err)
	}
	return nil
}
