package main

import (
	"flag"
	"fmt"
	"github.com/lull-dev/lull/i18n"
	"io"
	"log/slog"
	"net/mail"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lull-dev/lull/mailtemplates"
	"github.com/lull-dev/lull/preferences"
	"github.com/lull-dev/lull/preferences/batching"
)

// Config is lull's whole configuration. Every field comes from an
// environment variable, and a flag of the same name overrides it.
type Config struct {
	DatabaseURL string
	Addr        string
	// MetricsAddr is where /metrics is served, in the Prometheus text
	// format; empty serves no metrics. It is a listen address of its own
	// rather than a path on Addr: the numbers describe the whole
	// installation, scrapers rarely log in, and a port that only the
	// monitoring network can reach keeps them private without a password.
	MetricsAddr   string
	BaseURL       string
	Secret        string
	APIKey        string
	AdminEmail    string
	AdminPassword string
	SMTPURL       string
	SMTPRate      float64
	SMTPConns     int
	MailFrom      string
	// DefaultLocale is the language of a recipient without a locale of
	// their own (LULL_DEFAULT_LOCALE).
	DefaultLocale string
	Delivery      string
	Retention     time.Duration
	// SoftBounceThreshold and SoftBounceDecay say when soft bounces
	// suppress an address (db.SoftBouncePolicy, for suppress.Sink).
	SoftBounceThreshold int
	SoftBounceDecay     time.Duration
	Workers             int
	// JobTimeout bounds one flush; a job running longer is considered dead
	// and River rescues it after RescueAfter.
	JobTimeout  time.Duration
	RescueAfter time.Duration
	LogLevel    slog.Level
	LogFormat   string
	// MaxData is the largest data of one event, in bytes of compact JSON.
	MaxData int
	// DailyBudget is the emails a day a recipient gets at most, unless
	// they or the type say otherwise; 0 is no limit.
	DailyBudget int
	// Bounces configures the return path, the bounce receiver, webhooks,
	// DKIM and the Feedback-ID (see bounce.go).
	Bounces BounceConfig
	// Brand is the host product's brand from the environment: the
	// defaults the console's Brand page can override.
	Brand mailtemplates.Brand
}

// brandVars names the variable of each brand field, for errors.
var brandVars = [][2]string{{"product_name", "LULL_PRODUCT_NAME"}, {"product_url", "LULL_PRODUCT_URL"},
	{"logo_url", "LULL_LOGO_URL"}, {"color", "LULL_BRAND_COLOR"}, {"from_name", "LULL_MAIL_FROM_NAME"}}

// configVar binds one variable: its name, default, and what it means.
type configVar struct {
	name, def, usage string
	set              func(string) error
}

// secretVars may instead be read from the file named by NAME_FILE, as
// container platforms hand secrets over.
var secretVars = []string{"DATABASE_URL", "LULL_SECRET", "LULL_API_KEY", "LULL_ADMIN_PASSWORD", "LULL_SMTP_URL",
	"LULL_DKIM_KEY", "LULL_WEBHOOK_POSTMARK_TOKEN", "LULL_WEBHOOK_MAILGUN_KEY", "LULL_WEBHOOK_RESEND_SECRET"}

func (c *Config) vars() []configVar {
	str := func(p *string) func(string) error { return func(s string) error { *p = s; return nil } }
	dur := func(p *time.Duration) func(string) error {
		return func(s string) (err error) { *p, err = time.ParseDuration(s); return err }
	}
	return append([]configVar{
		{"DATABASE_URL", "", "PostgreSQL URL (14 or newer); empty: a local cluster started for you", str(&c.DatabaseURL)},
		{"LULL_ADDR", ":8080", "listen address", str(&c.Addr)},
		{"LULL_METRICS_ADDR", "", "listen address for Prometheus /metrics (keep it private, such as 127.0.0.1:9090); empty: no metrics", str(&c.MetricsAddr)},
		{"LULL_BASE_URL", "http://localhost:8080", "public URL used in links in emails", str(&c.BaseURL)},
		{"LULL_SECRET", "", "key for sessions and signed links (32+ bytes); empty: generated once and stored in the database", str(&c.Secret)},
		{"LULL_API_KEY", "", "a bootstrap API key", str(&c.APIKey)},
		{"LULL_ADMIN_EMAIL", "", "a bootstrap operator's email", str(&c.AdminEmail)},
		{"LULL_ADMIN_PASSWORD", "", "a bootstrap operator's password", str(&c.AdminPassword)},
		{"LULL_SMTP_URL", "", "smtp://user:pass@host:port, smtps://..., ?starttls=required; empty: the built-in outbox", str(&c.SMTPURL)},
		{"LULL_SMTP_RATE", "0", "SMTP messages per second at most; 0: no limit", func(s string) (err error) { c.SMTPRate, err = strconv.ParseFloat(s, 64); return err }},
		{"LULL_SMTP_CONNECTIONS", "4", "SMTP connections open at once, each reused for many emails", func(s string) (err error) { c.SMTPConns, err = strconv.Atoi(s); return err }},
		{"LULL_MAIL_FROM", "notifications@localhost", "From address", str(&c.MailFrom)},
		{"LULL_DEFAULT_LOCALE", "en", "language (BCP 47) of recipients without a locale of their own", str(&c.DefaultLocale)},
		{"LULL_MAIL_FROM_NAME", "", "From display name; empty: the name in LULL_MAIL_FROM, else the product name", str(&c.Brand.FromName)},
		{"LULL_PRODUCT_NAME", "", "the host product's name on emails and recipient pages (editable in the console); empty: none", str(&c.Brand.ProductName)},
		{"LULL_PRODUCT_URL", "", "http(s) address the product's name and logo link to", str(&c.Brand.ProductURL)},
		{"LULL_LOGO_URL", "", "http(s) address of the product's logo, about 28 pixels high", str(&c.Brand.LogoURL)},
		{"LULL_BRAND_COLOR", "", "#rrggbb for links and buttons, dark enough for white text on it", str(&c.Brand.Color)},
		{"LULL_DELIVERY", "at-least-once", "at-least-once or at-most-once", func(s string) error {
			if s != "at-least-once" && s != "at-most-once" {
				return fmt.Errorf("must be at-least-once or at-most-once")
			}
			c.Delivery = s
			return nil
		}},
		{"LULL_RETENTION", "720h", "how long sent notifications are kept", dur(&c.Retention)},
		{"LULL_SOFT_BOUNCE_THRESHOLD", "3", "soft bounces (4.x.x) that suppress an address, each within LULL_SOFT_BOUNCE_DECAY of the one before", func(s string) (err error) { c.SoftBounceThreshold, err = strconv.Atoi(s); return err }},
		{"LULL_SOFT_BOUNCE_DECAY", "168h", "a soft bounce score whose last bounce is older than this starts again from nothing", dur(&c.SoftBounceDecay)},
		{"LULL_WORKERS", "50", "jobs worked at once by this process", func(s string) (err error) { c.Workers, err = strconv.Atoi(s); return err }},
		{"LULL_JOB_TIMEOUT", "1m", "how long one flush may take before it counts as stuck", dur(&c.JobTimeout)},
		{"LULL_RESCUE_AFTER", "2m", "when a stuck flush (a crashed process's) is retried", dur(&c.RescueAfter)},
		{"LULL_LOG_LEVEL", "info", "debug, info, warn or error", func(s string) error { return c.LogLevel.UnmarshalText([]byte(s)) }},
		{"LULL_LOG_FORMAT", "text", "text or json (one object a line)", func(s string) error {
			if s != "text" && s != "json" {
				return fmt.Errorf("must be text or json")
			}
			c.LogFormat = s
			return nil
		}},
		{"LULL_MAX_DATA", strconv.Itoa(batching.DefaultMaxData), "largest data of one event, in bytes of compact JSON; larger events are refused", func(s string) (err error) { c.MaxData, err = strconv.Atoi(s); return err }},
		{"LULL_DAILY_EMAIL_BUDGET", "0", "emails a day a recipient gets at most (their local day), unless they or the type set their own; 0 is no limit", func(s string) (err error) {
			c.DailyBudget, err = strconv.Atoi(s)
			if err == nil && (c.DailyBudget < 0 || c.DailyBudget > preferences.MaxDailyBudget) {
				err = fmt.Errorf("must be 0 (no limit) to %d", preferences.MaxDailyBudget)
			}
			return err
		}},
	}, c.Bounces.vars()...)
}

// value is the variable's value from getenv, from the file NAME_FILE names
// (secrets only; a trailing newline is dropped), or its default. Setting
// both is refused: which one wins would be a guess.
func (v configVar) value(getenv func(string) string) (string, error) {
	val, file := getenv(v.name), ""
	if slices.Contains(secretVars, v.name) {
		file = getenv(v.name + "_FILE")
	}
	switch {
	case val != "" && file != "":
		return "", fmt.Errorf("set %s or %s_FILE, not both", v.name, v.name)
	case file != "":
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("%s_FILE: %w", v.name, err)
		}
		return strings.TrimRight(string(b), "\r\n"), nil
	case val != "":
		return val, nil
	}
	return v.def, nil
}

// newLogger writes lull's log in the configured format and level. River's
// own routine lines (leader elections, queue maintenance) are kept to
// warnings unless debug is asked for, so they do not bury lull's.
func newLogger(c *Config, w io.Writer) (app, river *slog.Logger) {
	handler := func(level slog.Level) slog.Handler {
		opts := &slog.HandlerOptions{Level: level}
		if c.LogFormat == "json" {
			return slog.NewJSONHandler(w, opts)
		}
		return slog.NewTextHandler(w, opts)
	}
	riverLevel := max(c.LogLevel, slog.LevelWarn)
	if c.LogLevel <= slog.LevelDebug {
		riverLevel = c.LogLevel
	}
	return slog.New(handler(c.LogLevel)), slog.New(handler(riverLevel))
}

// loadConfig fills a Config from getenv, then from args (flags named like
// the variables: -LULL_ADDR=:9090).
func loadConfig(args []string, getenv func(string) string, stderr io.Writer) (*Config, error) {
	c := &Config{}
	fs := flag.NewFlagSet("lull", flag.ContinueOnError)
	fs.SetOutput(stderr)
	for _, v := range c.vars() {
		val, err := v.value(getenv)
		if err != nil {
			return nil, err
		}
		if err := v.set(val); err != nil {
			return nil, fmt.Errorf("%s=%q: %w", v.name, val, err)
		}
		fs.Func(v.name, v.usage+" (default "+strconv.Quote(v.def)+")", v.set)
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if _, err := url.Parse(c.BaseURL); err != nil {
		return nil, fmt.Errorf("LULL_BASE_URL: %w", err)
	}
	if c.Secret != "" && len(c.Secret) < 32 {
		return nil, fmt.Errorf("LULL_SECRET must be at least 32 bytes")
	}
	if c.SMTPConns < 1 {
		return nil, fmt.Errorf("LULL_SMTP_CONNECTIONS must be at least 1")
	}
	if c.MaxData < 2 {
		return nil, fmt.Errorf("LULL_MAX_DATA must be at least 2 bytes (the size of {})")
	}
	// A From without an address would be refused at every send, so
	// nothing would go out; better to say so at the start.
	if _, err := mail.ParseAddress(c.MailFrom); err != nil {
		return nil, fmt.Errorf("LULL_MAIL_FROM %q: %v; want an address such as notifications@example.com or Acme <notifications@example.com>", c.MailFrom, err)
	}
	errs := c.Brand.Check()
	for _, v := range brandVars {
		if msg := errs[v[0]]; msg != "" {
			return nil, fmt.Errorf("%s: %s", v[1], msg)
		}
	}
	if _, err := i18n.Parse(c.DefaultLocale); err != nil || c.DefaultLocale == "" {
		return nil, fmt.Errorf("LULL_DEFAULT_LOCALE %q: must be a language tag such as en, de or pt-BR", c.DefaultLocale)
	}
	if c.SoftBounceThreshold < 1 || c.SoftBounceDecay < time.Minute {
		return nil, fmt.Errorf("LULL_SOFT_BOUNCE_THRESHOLD must be at least 1 and LULL_SOFT_BOUNCE_DECAY at least 1m")
	}
	if c.Retention < 24*time.Hour {
		return nil, fmt.Errorf("LULL_RETENTION must be at least 24h (partitions are whole days)")
	}
	if err := c.Bounces.check(); err != nil {
		return nil, err
	}
	return c, nil
}
