package db

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
)

// Suppression reasons.
const (
	ReasonHardBounce = "hard_bounce"
	ReasonSoftBounce = "soft_bounce"
	ReasonComplaint  = "complaint"
	ReasonOperator   = "operator"
)

// Suppression scopes.
const (
	// ScopeAll stops every email to the address.
	ScopeAll = "all"
	// ScopeNonRequired stops every email but those of required types, so
	// someone who complained still gets their security alerts.
	ScopeNonRequired = "non_required"
)

// Skip reasons of a suppressed address (SkipBounced is in deliveries.go).
const (
	SkipComplained = "complained"
	SkipSuppressed = "suppressed"
)

// Suppression is one entry of the suppression list.
type Suppression struct {
	Address   string    `json:"address"`
	Reason    string    `json:"reason"`
	Scope     string    `json:"scope"`
	Detail    string    `json:"detail"`
	Source    string    `json:"source"`
	BatchID   int64     `json:"batch_id,omitempty"`
	CreatedBy string    `json:"created_by"`
	CreatedAt time.Time `json:"created_at"`
}

// Stops says whether the suppression stops an email of a type that is
// (or is not) required. A nil suppression stops nothing.
func (s *Suppression) Stops(required bool) bool {
	return s != nil && (s.Scope == ScopeAll || !required)
}

// SkipReason is the skip log's reason for what the suppression stops.
func (s *Suppression) SkipReason() string {
	switch s.Reason {
	case ReasonHardBounce, ReasonSoftBounce:
		return SkipBounced
	case ReasonComplaint:
		return SkipComplained
	}
	return SkipSuppressed
}

// NormalizeAddress is the suppression list's key for an address as sent:
// trimmed and lower-cased here in Go, never in SQL, so every writer and
// the flush compute the same key.
func NormalizeAddress(address string) string {
	return strings.ToLower(strings.TrimSpace(address))
}

const suppressionColumns = `address, reason, scope, detail, source, batch_id, created_by, created_at`

func collectSuppressions(rows pgx.Rows, err error) ([]Suppression, error) {
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[Suppression])
}

// Suppress adds s to the list, or merges it into the address's entry:
// a scope only ever widens, so a complaint after a hard bounce leaves
// the address stopped for all mail, while a hard bounce after a
// complaint stops all of it. It returns the stored entry and whether the
// address was new to the list.
func Suppress(ctx context.Context, q Querier, s Suppression, now time.Time) (*Suppression, bool, error) {
	s.Address = NormalizeAddress(s.Address)
	// In bytes, room for the 1000 characters of any script the API and
	// console allow; reports were cut to maxDetail already.
	s.Detail = cleanText(s.Detail, 4*maxDetail)
	// The update always writes, keeping the stored values where the new
	// entry would narrow an 'all', so that RETURNING always has the row;
	// xmax = 0 only on a row this statement inserted.
	keep := func(col string) string {
		return col + " = CASE WHEN s.scope = 'all' AND EXCLUDED.scope <> 'all' THEN s." + col + " ELSE EXCLUDED." + col + " END"
	}
	set := make([]string, 0, 7)
	for _, c := range []string{"reason", "detail", "source", "batch_id", "created_by", "created_at", "scope"} {
		set = append(set, keep(c))
	}
	var out Suppression
	var created bool
	err := q.QueryRow(ctx, `
		INSERT INTO suppressions AS s (`+suppressionColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
		ON CONFLICT (address) DO UPDATE SET `+strings.Join(set, ", ")+`
		RETURNING `+suppressionColumns+`, xmax = 0`,
		s.Address, s.Reason, s.Scope, s.Detail, s.Source, s.BatchID, s.CreatedBy, now).
		Scan(&out.Address, &out.Reason, &out.Scope, &out.Detail, &out.Source, &out.BatchID, &out.CreatedBy, &out.CreatedAt, &created)
	if err != nil {
		return nil, false, fmt.Errorf("suppress %s: %w", s.Address, err)
	}
	return &out, created, nil
}

// Unsuppress removes address from the list, and forgets its soft bounce
// score so that it starts afresh. It returns the entry removed;
// ErrNotFound says the address was not listed.
func Unsuppress(ctx context.Context, q Querier, address string) (*Suppression, error) {
	address = NormalizeAddress(address)
	rows, err := q.Query(ctx, `
		WITH score AS (DELETE FROM bounce_scores WHERE address = $1)
		DELETE FROM suppressions WHERE address = $1 RETURNING `+suppressionColumns, address)
	ss, err := collectSuppressions(rows, err)
	if err != nil {
		return nil, fmt.Errorf("unsuppress %s: %w", address, err)
	}
	if len(ss) == 0 {
		return nil, fmt.Errorf("suppression %s: %w", address, ErrNotFound)
	}
	return &ss[0], nil
}

// GetSuppression returns the list's entry for address.
func GetSuppression(ctx context.Context, q Querier, address string) (*Suppression, error) {
	rows, err := q.Query(ctx, `SELECT `+suppressionColumns+` FROM suppressions WHERE address = $1`, NormalizeAddress(address))
	ss, err := collectSuppressions(rows, err)
	if err != nil {
		return nil, fmt.Errorf("suppression %s: %w", address, err)
	}
	if len(ss) == 0 {
		return nil, fmt.Errorf("suppression %s: %w", address, ErrNotFound)
	}
	return &ss[0], nil
}

// ListSuppressions returns up to limit entries whose address starts with
// prefix, in address order, after the address after (a page's cursor).
// The prefix is matched as text, not as a pattern, on the primary key.
func ListSuppressions(ctx context.Context, q Querier, prefix, after string, limit int) ([]Suppression, error) {
	prefix = NormalizeAddress(prefix)
	rows, err := q.Query(ctx, `SELECT `+suppressionColumns+` FROM suppressions
		WHERE address LIKE $1 || '%' AND address > $2 ORDER BY address LIMIT $3`,
		likeEscape(prefix), after, limit)
	ss, err := collectSuppressions(rows, err)
	if err != nil {
		return nil, fmt.Errorf("list suppressions: %w", err)
	}
	return ss, nil
}

// likeEscape makes s match itself in a LIKE pattern.
func likeEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}

// AttachSuppressions sets the Suppression of each flush content whose
// recipient's address is on the list, with one lookup on the list's
// primary key for all of them. The flush calls it under the batches'
// locks, so an address suppressed until the moment before is honoured.
func AttachSuppressions(ctx context.Context, q Querier, fcs ...*FlushContent) error {
	byAddress := map[string][]*FlushContent{}
	for _, fc := range fcs {
		for _, rs := range fc.Settings {
			if a := NormalizeAddress(rs.Email); a != "" {
				byAddress[a] = append(byAddress[a], fc)
			}
			break // every type's settings name the same recipient
		}
	}
	if len(byAddress) == 0 {
		return nil
	}
	addresses := make([]string, 0, len(byAddress))
	for a := range byAddress {
		addresses = append(addresses, a)
	}
	rows, err := q.Query(ctx, `SELECT `+suppressionColumns+` FROM suppressions WHERE address = ANY($1)`, addresses)
	ss, err := collectSuppressions(rows, err)
	if err != nil {
		return fmt.Errorf("look up suppressions: %w", err)
	}
	for i := range ss {
		for _, fc := range byAddress[ss[i].Address] {
			fc.Suppression = &ss[i]
		}
	}
	return nil
}

// BounceReport is one bounce or complaint about one address, as the
// bounce package's sources report it.
type BounceReport struct {
	Address string
	Kind    string // "hard", "soft" or "complaint"
	Status  string
	BatchID int64
	Source  string
	Detail  string
	At      time.Time
}

// SoftBouncePolicy is when soft bounces suppress an address, as Mailman
// scores them: each soft bounce adds a point, a score whose last bounce
// is older than Decay starts again from nothing, and an address whose
// score reaches Threshold is suppressed.
type SoftBouncePolicy struct {
	Threshold int
	Decay     time.Duration
}

// ErrBadReport is a bounce report that names no address or no known kind.
var ErrBadReport = errors.New("bad bounce report")

// maxDetail bounds what a report's detail keeps, whatever its source sent.
const maxDetail = 1000

// RecordBounce records a bounce or complaint and suppresses its address
// when it should: a hard bounce at once, soft bounces when their score
// reaches the threshold, a complaint for all but required types (after
// unsubscribing every recipient with the address from everything not
// required). A report repeated (insertBounceReport) changes nothing. It
// runs in the caller's transaction.
func RecordBounce(ctx context.Context, tx pgx.Tx, r BounceReport, p SoftBouncePolicy, now time.Time) error {
	// Validity is checked before lower-casing, which would turn bad
	// bytes into replacement characters.
	valid := utf8.ValidString(r.Address)
	r.Address = NormalizeAddress(r.Address)
	if !valid || !strings.Contains(r.Address, "@") || len(r.Address) > 320 || strings.ContainsAny(r.Address, "\x00\r\n\t ") {
		return fmt.Errorf("%w: address %q", ErrBadReport, r.Address)
	}
	reason, scope := "", ScopeAll
	switch r.Kind {
	case "hard":
		reason = ReasonHardBounce
	case "soft":
		reason = ReasonSoftBounce
	case "complaint":
		reason, scope = ReasonComplaint, ScopeNonRequired
	default:
		return fmt.Errorf("%w: kind %q", ErrBadReport, r.Kind)
	}
	r.Detail, r.Status, r.Source = cleanText(r.Detail, maxDetail), cleanText(r.Status, 100), cleanText(r.Source, 100)
	if r.BatchID < 0 {
		r.BatchID = 0
	}
	// A time a little ahead is a source's clock running fast, and kept:
	// made now, the same report heard again later would carry another
	// time and count twice. Only a time far ahead is not believed.
	at := r.At
	if at.IsZero() || at.After(now.Add(time.Hour)) {
		at = now
	}
	fresh, err := insertBounceReport(ctx, tx, r, at, now)
	if err != nil || !fresh {
		return err
	}
	if r.Kind == "soft" {
		if score, err := addSoftBounce(ctx, tx, r.Address, at, p); err != nil || score < max(p.Threshold, 1) {
			return err
		}
	}
	detail := r.Detail
	if r.Status != "" {
		detail = cleanText(r.Status+" "+detail, maxDetail)
	}
	_, _, err = AddSuppression(ctx, tx, Suppression{Address: r.Address, Reason: reason, Scope: scope, Detail: detail,
		Source: r.Source, BatchID: r.BatchID, CreatedBy: r.Source}, now)
	return err
}

// AddSuppression is Suppress for a report or a request: a complaint
// also unsubscribes every recipient with the address, so that what they
// complained of stops at ingest too and their settings page says so.
func AddSuppression(ctx context.Context, q Querier, s Suppression, now time.Time) (*Suppression, bool, error) {
	if s.Reason == ReasonComplaint {
		// recipients has no index on lower(email): complaints are rare,
		// and one would cost every ingest that writes a recipient. The
		// rows are locked in id order, as every writer of several
		// recipients locks them (UpsertRecipients), so that a complaint
		// and a fan-out updating two of them cannot wait for each other.
		if _, err := q.Exec(ctx, `UPDATE recipients r SET unsubscribed = true, updated_at = $2
			FROM (SELECT id FROM recipients WHERE lower(email) = $1 AND NOT unsubscribed
			      ORDER BY id COLLATE "C" FOR NO KEY UPDATE) l
			WHERE r.id = l.id`, NormalizeAddress(s.Address), now); err != nil {
			return nil, false, fmt.Errorf("unsubscribe %s: %w", s.Address, err)
		}
	}
	return Suppress(ctx, q, s, now)
}

// BatchAddress is the address a batch's email went to: its delivery's,
// or, before one was made, its recipient's. ErrNotFound when the batch is
// not known (never made, or pruned).
func BatchAddress(ctx context.Context, q Querier, batchID int64) (string, error) {
	var to *string
	err := q.QueryRow(ctx, `
		SELECT coalesce((SELECT d.to_address FROM deliveries d WHERE d.batch_id = b.id ORDER BY d.id DESC LIMIT 1), r.email)
		FROM batches b LEFT JOIN recipients r ON r.id = b.recipient_id
		WHERE b.id = $1`, batchID).Scan(&to)
	switch {
	case errors.Is(err, pgx.ErrNoRows) || (err == nil && (to == nil || *to == "")):
		return "", fmt.Errorf("batch %d: %w", batchID, ErrNotFound)
	case err != nil:
		return "", fmt.Errorf("address of batch %d: %w", batchID, err)
	}
	return *to, nil
}

// insertBounceReport stores r, reported at at, reporting false when the
// same report was stored before: the same address, batch and kind, or for
// a report naming no batch, the same address, kind and time.
func insertBounceReport(ctx context.Context, tx pgx.Tx, r BounceReport, at, now time.Time) (bool, error) {
	// The batch's type, or its batch key for a digest, is kept with the
	// report so rates per type need no join to batches that retention
	// may have pruned by then.
	tag, err := tx.Exec(ctx, `
		INSERT INTO bounce_reports (address, kind, batch_id, type_key, status, source, detail, reported_at, received_at)
		VALUES ($1, $2, $3, coalesce((SELECT coalesce(type_key, batch_key) FROM batches WHERE id = $3), ''), $4, $5, $6, $7, $8)
		ON CONFLICT DO NOTHING`,
		r.Address, r.Kind, r.BatchID, r.Status, r.Source, r.Detail, at, now)
	if err != nil {
		return false, fmt.Errorf("record bounce of %s: %w", r.Address, err)
	}
	return tag.RowsAffected() == 1, nil
}

// addSoftBounce adds a soft bounce at at to address's score and returns
// the score.
func addSoftBounce(ctx context.Context, tx pgx.Tx, address string, at time.Time, p SoftBouncePolicy) (int, error) {
	var score int
	err := tx.QueryRow(ctx, `
		INSERT INTO bounce_scores AS s (address, score, last_at) VALUES ($1, 1, $2)
		ON CONFLICT (address) DO UPDATE SET
		    score = CASE WHEN s.last_at >= $2 - make_interval(secs => $3) THEN s.score + 1 ELSE 1 END,
		    last_at = greatest(s.last_at, $2)
		RETURNING score`, address, at, p.Decay.Seconds()).Scan(&score)
	if err != nil {
		return 0, fmt.Errorf("score soft bounce of %s: %w", address, err)
	}
	return score, nil
}

// cleanText makes s storable as text: valid UTF-8, no NUL (which
// PostgreSQL refuses), at most n bytes cut on a rune boundary.
func cleanText(s string, n int) string {
	s = strings.ReplaceAll(strings.ToValidUTF8(s, ""), "\x00", "")
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// The rates of bounces and complaints operators watch, as mailbox
// providers judge them: Gmail wants complaints below 0.1 % of what a
// sender sends, and never 0.3 %.
const (
	RateWindow  = 7 * 24 * time.Hour
	RateWarning = 0.001
	RateBad     = 0.003
)

// DeliveryRate is what came back from the emails of one type (or all,
// Type ""), sent in the last RateWindow: hard bounces and complaints
// heard in that window, each counted once per address and batch.
type DeliveryRate struct {
	Type       string
	Sent       int64
	Bounced    int64
	Complained int64
}

// BounceRate is Bounced ÷ Sent, 0 with nothing sent.
func (r DeliveryRate) BounceRate() float64 { return ratio(r.Bounced, r.Sent) }

// ComplaintRate is Complained ÷ Sent, 0 with nothing sent.
func (r DeliveryRate) ComplaintRate() float64 { return ratio(r.Complained, r.Sent) }

func ratio(n, of int64) float64 {
	if of == 0 {
		return 0
	}
	return float64(n) / float64(of)
}

// RateLevel is how a rate stands against the providers' limits: "ok",
// "warning" from RateWarning, "bad" from RateBad.
func RateLevel(rate float64) string {
	switch {
	case rate >= RateBad:
		return "bad"
	case rate >= RateWarning:
		return "warning"
	}
	return "ok"
}

// DeliveryRates returns the rates of the window ending at now, per type
// (a digest's type is its batch key, "digest:daily") and overall first
// (Type ""). A report naming no batch counts only overall.
func DeliveryRates(ctx context.Context, q Querier, now time.Time) ([]DeliveryRate, error) {
	rows, err := q.Query(ctx, `
		WITH sent AS (
		    SELECT coalesce(b.type_key, b.batch_key) AS t, count(*) AS n
		    FROM deliveries d JOIN batches b ON b.id = d.batch_id
		    WHERE d.sent_at >= $1 AND d.state = 'sent'
		    GROUP BY 1),
		heard AS (
		    SELECT type_key AS t,
		           count(DISTINCT (address, batch_id)) FILTER (WHERE kind = 'hard') AS bounced,
		           count(DISTINCT (address, batch_id)) FILTER (WHERE kind = 'complaint') AS complained
		    FROM bounce_reports WHERE received_at >= $1
		    GROUP BY 1)
		SELECT coalesce(s.t, h.t), coalesce(s.n, 0), coalesce(h.bounced, 0), coalesce(h.complained, 0)
		FROM sent s FULL JOIN heard h ON h.t = s.t
		ORDER BY 1`, now.Add(-RateWindow))
	if err != nil {
		return nil, fmt.Errorf("delivery rates: %w", err)
	}
	rates, err := pgx.CollectRows(rows, pgx.RowToStructByPos[DeliveryRate])
	if err != nil {
		return nil, fmt.Errorf("delivery rates: %w", err)
	}
	all := DeliveryRate{}
	out := []DeliveryRate{}
	for _, r := range rates {
		all.Sent, all.Bounced, all.Complained = all.Sent+r.Sent, all.Bounced+r.Bounced, all.Complained+r.Complained
		if r.Type != "" {
			out = append(out, r)
		}
	}
	return append([]DeliveryRate{all}, out...), nil
}
