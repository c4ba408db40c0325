package batching

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/mailtemplates"
)

// Brands is the brand in use: what the console saved, field by field
// over the environment's defaults. Every email and recipient page reads
// it, so it is kept for TTL (10 s when zero) rather than read each time;
// a console edit thus reaches every process within that, and this one at
// once. A nil *Brands is the neutral, unbranded look.
type Brands struct {
	DB       db.Querier
	Defaults mailtemplates.Brand
	TTL      time.Duration

	mu  sync.Mutex
	cur mailtemplates.Brand
	at  time.Time
}

// Get returns the brand in use. When the database cannot be read it keeps
// the last brand it had (or the defaults) and tries again next time: an
// email in the old brand beats an email not sent.
func (b *Brands) Get(ctx context.Context) mailtemplates.Brand {
	if b == nil {
		return mailtemplates.Brand{}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	ttl := b.TTL
	if ttl <= 0 {
		ttl = 10 * time.Second
	}
	if !b.at.IsZero() && time.Since(b.at) < ttl {
		return b.cur
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	stored, err := b.Stored(ctx)
	if b.at.IsZero() || err == nil {
		b.cur = Overlay(checked(b.Defaults), checked(stored))
	}
	b.at = time.Now()
	return b.cur
}

// Stored returns the fields the console saved; the rest are empty.
func (b *Brands) Stored(ctx context.Context) (mailtemplates.Brand, error) {
	var out mailtemplates.Brand
	if b == nil {
		return out, nil
	}
	fields, err := db.BrandSettings(ctx, b.DB)
	if err != nil {
		return out, err
	}
	for name, p := range brandFields(&out) {
		*p = fields[name]
	}
	return out, nil
}

// Save stores the console's fields (an empty one falls back to the
// environment) and makes this process use them at once.
func (b *Brands) Save(ctx context.Context, stored mailtemplates.Brand) error {
	if b == nil {
		return errors.New("save brand: no brand store configured")
	}
	fields := map[string]string{}
	for name, p := range brandFields(&stored) {
		fields[name] = *p
	}
	if err := db.SaveBrandSettings(ctx, b.DB, fields); err != nil {
		return err
	}
	b.mu.Lock()
	b.at = time.Time{}
	b.mu.Unlock()
	return nil
}

// Overlay is base with every non-empty field of top written over it.
func Overlay(base, top mailtemplates.Brand) mailtemplates.Brand {
	tops := brandFields(&top)
	for name, p := range brandFields(&base) {
		if v := *tops[name]; v != "" {
			*p = v
		}
	}
	return base
}

// checked is b without the fields Check refuses: a value stored before
// its check existed, or written to the database past the console, must
// not reach a recipient (pages link the product's address as it is).
func checked(b mailtemplates.Brand) mailtemplates.Brand {
	errs := b.Check()
	for name, p := range brandFields(&b) {
		if errs[name] != "" {
			*p = ""
		}
	}
	return b
}

// brandFields names b's fields as the console and the settings table do.
func brandFields(b *mailtemplates.Brand) map[string]*string {
	return map[string]*string{
		"product_name": &b.ProductName, "product_url": &b.ProductURL, "logo_url": &b.LogoURL,
		"color": &b.Color, "from_name": &b.FromName,
	}
}
