package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/lull-dev/lull/bounce"
	"github.com/lull-dev/lull/client"
	"github.com/lull-dev/lull/db"
	"github.com/lull-dev/lull/db/localpg"
	"github.com/lull-dev/lull/db/suppress"
	"github.com/lull-dev/lull/jobs"
	"github.com/lull-dev/lull/mail"
	"github.com/lull-dev/lull/mailtemplates"
	"github.com/lull-dev/lull/metrics"
	"github.com/lull-dev/lull/preferences/batching"
	"github.com/lull-dev/lull/web"
)

// app is a running lull: database, River client and HTTP server.
type app struct {
	cfg    *Config
	logger *slog.Logger
	// riverLogger takes River's own lines, kept to warnings at info.
	riverLogger *slog.Logger
	db          *db.DB
	river       *river.Client[pgx.Tx]
	engine      *batching.Engine
	web         *web.Server
	sender      mail.Sender
	metrics     *metrics.Metrics
	// demoNote tells the demo's user how to get in.
	demoNote string
	// metricsURL is where /metrics is served, if anywhere.
	metricsURL string
	// secret is LULL_SECRET or the one stored in the database.
	secret []byte
	// bounces records what the bounce receiver and webhooks hear.
	bounces bounce.Sink
}

// metricsServer serves m at /metrics, with the same guards against slow
// clients as the main server.
func metricsServer(m *metrics.Metrics) *http.Server {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.Handler())
	return &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: 120 * time.Second}
}

// serve runs lull until ctx ends, then shuts down in order: stop taking
// requests, let running jobs finish (bounded), close the database.
func serve(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer, demo bool) error {
	cfg, err := loadConfig(args, getenv, stderr)
	if err != nil {
		return err
	}
	logger, riverLogger := newLogger(cfg, stderr)
	if demo {
		demoDefaults(cfg)
	}
	a, err := start(ctx, cfg, logger, riverLogger, stdout)
	if err != nil {
		return err
	}
	defer a.db.Close()

	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Addr, err)
	}
	var mln net.Listener
	if cfg.MetricsAddr != "" {
		if mln, err = net.Listen("tcp", cfg.MetricsAddr); err != nil {
			ln.Close()
			return fmt.Errorf("listen on LULL_METRICS_ADDR %s: %w", cfg.MetricsAddr, err)
		}
	}
	srv := a.web.HTTPServer(cfg.Addr)
	// River's context outlives SIGTERM: canceling the context Start was
	// given is River's abrupt stop, which cancels running flushes in the
	// middle of SMTP. The shutdown below stops River gracefully instead.
	if err := a.river.Start(context.WithoutCancel(ctx)); err != nil {
		return fmt.Errorf("start jobs: %w", err)
	}
	go a.web.Feed.Run(ctx)
	go (&jobs.Promoter{DB: a.db, Logger: a.logger}).Run(ctx)
	if _, err := startBounceReceiver(ctx, &cfg.Bounces, a.secret, a.bounces, a.logger); err != nil {
		return err
	}
	if demo {
		a.demoNote = fmt.Sprintf("  demo:      password %q, API key %q; events arrive for five minutes\n", cfg.AdminPassword, cfg.APIKey)
		go runDemo(ctx, a.logger, client.New(localURL(ln.Addr().String()), cfg.APIKey))
	}
	errc := make(chan error, 2)
	if mln != nil {
		msrv := metricsServer(a.metrics)
		defer msrv.Close()
		go func() { errc <- msrv.Serve(mln) }()
		a.metricsURL = "http://" + mln.Addr().String() + "/metrics"
	}
	a.announce(stdout, ln.Addr().String())

	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	logger.Info("shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	srv.Shutdown(shutdownCtx)
	// Stop lets running flushes finish; past the deadline they are
	// canceled and River retries them on the next start.
	if err := a.river.Stop(shutdownCtx); err != nil {
		logger.Warn("jobs did not stop in time; canceling", "err", err)
		a.river.StopAndCancel(context.Background())
	}
	if c, ok := a.sender.(interface{ Close() }); ok {
		c.Close()
	}
	return nil
}

// start connects, migrates and builds everything, without serving.
func start(ctx context.Context, cfg *Config, logger, riverLogger *slog.Logger, stdout io.Writer) (*app, error) {
	d, err := openDatabase(ctx, cfg, logger)
	if err != nil {
		return nil, err
	}
	if err := d.Migrate(ctx); err != nil {
		d.Close()
		return nil, err
	}
	warnKeyCollations(ctx, d, logger)
	a := &app{cfg: cfg, logger: logger, riverLogger: riverLogger, db: d}
	if err := a.build(ctx); err != nil {
		d.Close()
		return nil, err
	}
	return a, nil
}

func (a *app) build(ctx context.Context) error {
	cfg := a.cfg
	secret := cfg.Secret
	if secret == "" {
		s, err := db.Secret(ctx, a.db.Pool)
		if err != nil {
			return err
		}
		secret = s
	}
	if cfg.APIKey != "" {
		if err := db.AddAPIKey(ctx, a.db.Pool, "bootstrap (LULL_API_KEY)", cfg.APIKey); err != nil {
			return err
		}
	}
	if cfg.AdminEmail != "" && cfg.AdminPassword != "" {
		if err := db.UpsertOperator(ctx, a.db.Pool, cfg.AdminEmail, cfg.AdminPassword); err != nil {
			return fmt.Errorf("LULL_ADMIN_PASSWORD: %w", err)
		}
	}
	a.secret = []byte(secret)
	a.bounces = &suppress.Sink{DB: a.db, Soft: db.SoftBouncePolicy{Threshold: cfg.SoftBounceThreshold, Decay: cfg.SoftBounceDecay}}
	envelope, err := cfg.Bounces.envelope(a.secret)
	if err != nil {
		return err
	}
	webhooks, err := bounce.NewWebhooks(cfg.Bounces.Webhooks, bounce.VERP{Domain: cfg.Bounces.Domain, Secret: a.secret}, a.bounces, a.logger)
	if err != nil {
		return err
	}
	if cfg.SMTPURL == "" {
		a.sender = &mail.Outbox{DB: a.db}
	} else {
		s, err := mail.NewSMTP(mail.SMTPConfig{URL: cfg.SMTPURL, Rate: cfg.SMTPRate, Concurrency: cfg.SMTPConns, Envelope: envelope}, a.logger)
		if err != nil {
			return err
		}
		a.sender = s
	}
	links := mailtemplates.Links{BaseURL: cfg.BaseURL, Secret: []byte(secret)}
	a.metrics = metrics.New(versionString())
	a.metrics.WatchDatabase(a.db.Pool)
	brands := &batching.Brands{DB: a.db.Pool, Defaults: cfg.Brand}
	flush := &jobs.FlushWorker{
		DB: a.db, Sender: a.sender, Links: links, From: cfg.MailFrom, Brands: brands, DefaultLocale: cfg.DefaultLocale,
		AtMostOnce: cfg.Delivery == "at-most-once", Logger: a.logger, Metrics: a.metrics, DailyBudget: cfg.DailyBudget,
	}
	// A flush job promoted ahead of its time is fetched at River's next
	// poll after its batch closes, so the poll interval is how late a
	// flush may start; ten cheap polls a second keep that under a tenth
	// of a second.
	client, err := jobs.NewClient(a.db, jobs.Config{
		Workers: cfg.Workers, JobTimeout: cfg.JobTimeout, RescueAfter: cfg.RescueAfter,
		SweepEvery: 30 * time.Second, Retention: cfg.Retention,
		FetchCooldown: 20 * time.Millisecond, FetchPollInterval: 100 * time.Millisecond,
		RiverLogger: a.riverLogger,
	}, flush, a.logger, false)
	if err != nil {
		return fmt.Errorf("jobs: %w", err)
	}
	a.river = client
	a.engine = &batching.Engine{DB: a.db, Scheduler: &jobs.Scheduler{Client: client}, Logger: a.logger, Metrics: a.metrics, MaxData: cfg.MaxData}
	a.web = &web.Server{DB: a.db, Logger: a.logger, BaseURL: cfg.BaseURL, Secret: []byte(secret), Engine: a.engine, Links: links,
		Jobs: jobs.Control{Client: client}, MailFrom: cfg.MailFrom, DefaultLocale: cfg.DefaultLocale, Brands: brands, Feed: &web.FeedHub{DB: a.db, Logger: a.logger}, Metrics: a.metrics,
		Webhooks: webhooks, DailyBudget: cfg.DailyBudget, Mail: a.sender}
	return nil
}

// localURL is the URL of a listen address on this machine: a wildcard
// address (":8080") is reached at localhost.
func localURL(addr string) string {
	host, port, _ := net.SplitHostPort(addr)
	if host == "" || host == "::" || host == "0.0.0.0" {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// announce prints where lull listens and how to get in.
func (a *app) announce(w io.Writer, addr string) {
	base := localURL(addr)
	fmt.Fprintf(w, "lull is listening on %s\n", base)
	fmt.Fprintf(w, "  health:    %s/readyz\n", base)
	fmt.Fprintf(w, "  API:       %s/api/v1 (Authorization: Bearer <key>)\n", base)
	fmt.Fprintf(w, "  API docs:  %s/api/docs\n", base)
	if a.cfg.AdminEmail != "" {
		fmt.Fprintf(w, "  operators: %s/admin (log in as %s)\n", base, a.cfg.AdminEmail)
	}
	if a.metricsURL != "" {
		fmt.Fprintf(w, "  metrics:   %s\n", a.metricsURL)
	}
	if a.demoNote != "" {
		fmt.Fprint(w, a.demoNote)
	}
	if a.cfg.SMTPURL == "" {
		fmt.Fprintln(w, "  mail:      kept in the built-in outbox (set LULL_SMTP_URL to send)")
	}
}

// openDatabase connects to DATABASE_URL, or starts the local cluster.
func openDatabase(ctx context.Context, cfg *Config, logger *slog.Logger) (*db.DB, error) {
	url := cfg.DatabaseURL
	if url == "" {
		cwd, err := os.Getwd()
		if err != nil {
			return nil, err
		}
		dir := localpg.DefaultDir(cwd, "pg")
		logger.Info("DATABASE_URL is not set; using a local PostgreSQL cluster", "dir", dir)
		c, err := localpg.Ensure(ctx, dir, false)
		if err != nil {
			if errors.Is(err, localpg.ErrNoBinaries) {
				return nil, err
			}
			return nil, fmt.Errorf("start local PostgreSQL: %w", err)
		}
		if err := createDatabase(ctx, c.URL("postgres"), "lull"); err != nil {
			return nil, err
		}
		url = c.URL("lull")
		logger.Info("local PostgreSQL is up", "url", url)
	}
	return db.Open(ctx, url)
}

// warnKeyCollations warns when key columns compare through a language's
// collation (a database restored from a dump of a "C" one): lull works,
// but every fan-out pays for it, and the migration that would fix it is
// recorded as applied. The warning carries the statements to run, and it
// returns them. A failed or slow check is logged and lull goes on: it is
// advice, not a condition of starting.
func warnKeyCollations(ctx context.Context, d *db.DB, logger *slog.Logger) []string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cols, err := db.KeysInLanguageCollation(ctx, d.Pool)
	if err != nil {
		logger.Warn("could not check the key columns' collation", "err", err)
		return nil
	}
	if len(cols) == 0 {
		return nil
	}
	fix := db.KeysAsBytesSQL(cols)
	// A text log quotes the statements ("C" becomes \"C\", which psql
	// reads as a command), so the message says where to get them as they
	// are: lull migrate writes them to its standard output.
	logger.Warn(`key columns compare in the database's language collation, which slows fan-outs by up to a quarter; `+
		`run the statements given as "fix" (lull migrate prints them one a line, ready for psql) `+
		`when a table lock of a second per 300,000 rows is acceptable (docs/operations.md, "Upgrading")`,
		"columns", strings.Join(cols, ", "), "fix", strings.Join(fix, " "))
	return fix
}

func createDatabase(ctx context.Context, serverURL, name string) error {
	conn, err := pgx.Connect(ctx, serverURL)
	if err != nil {
		return fmt.Errorf("connect to local PostgreSQL: %w", err)
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "CREATE DATABASE "+name)
	if err != nil && !strings.Contains(err.Error(), "already exists") {
		return fmt.Errorf("create database %s: %w", name, err)
	}
	return nil
}

// migrateOnly applies migrations and exits.
func migrateOnly(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg, err := loadConfig(args, getenv, stderr)
	if err != nil {
		return err
	}
	logger := slog.New(slog.NewTextHandler(stderr, nil))
	d, err := openDatabase(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Migrate(ctx); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "migrations applied")
	if fix := warnKeyCollations(ctx, d, logger); len(fix) > 0 {
		fmt.Fprintln(stdout, "-- Key columns compare in the database's language collation (see the warning). To fix, run the lines below one by one in psql (or save them, without \"migrations applied\", for psql -f):")
		for _, stmt := range fix {
			fmt.Fprintln(stdout, stmt)
		}
	}
	return nil
}

// apikeyCmd handles "lull apikey create [NAME]", "lull apikey list" and
// "lull apikey revoke ID|KEY".
func apikeyCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	const use = "usage: lull apikey create [NAME] | lull apikey list | lull apikey revoke ID|KEY"
	if len(args) == 0 {
		fmt.Fprintln(stderr, use)
		return errUsage
	}
	switch {
	case args[0] == "create" && len(args) <= 2:
		name := "created with lull apikey create"
		if len(args) > 1 {
			name = args[1]
		}
		return withDB(ctx, getenv, stderr, func(d *db.DB) error {
			key, err := db.CreateAPIKey(ctx, d.Pool, name)
			if err != nil {
				return err
			}
			fmt.Fprintln(stdout, key)
			return nil
		})
	case args[0] == "list" && len(args) == 1:
		return withDB(ctx, getenv, stderr, func(d *db.DB) error {
			keys, err := db.ListAPIKeys(ctx, d.Pool)
			if err != nil {
				return err
			}
			for _, k := range keys {
				state := "live"
				if k.RevokedAt != nil {
					state = "revoked " + k.RevokedAt.UTC().Format(time.RFC3339)
				}
				fmt.Fprintf(stdout, "%d\t%s\tcreated %s\t%s\n", k.ID, k.Name, k.CreatedAt.UTC().Format(time.RFC3339), state)
			}
			return nil
		})
	case args[0] == "revoke" && len(args) == 2:
		return withDB(ctx, getenv, stderr, func(d *db.DB) error {
			id, err := db.RevokeAPIKey(ctx, d.Pool, args[1])
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "api key %d revoked\n", id)
			return nil
		})
	}
	fmt.Fprintln(stderr, use)
	return errUsage
}

// adminCmd handles "lull admin create EMAIL PASSWORD".
func adminCmd(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) != 3 || args[0] != "create" {
		fmt.Fprintln(stderr, "usage: lull admin create EMAIL PASSWORD")
		return errUsage
	}
	return withDB(ctx, getenv, stderr, func(d *db.DB) error {
		if err := db.UpsertOperator(ctx, d.Pool, args[1], args[2]); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "operator %s can log in at /admin\n", args[1])
		return nil
	})
}

func withDB(ctx context.Context, getenv func(string) string, stderr io.Writer, fn func(*db.DB) error) error {
	cfg, err := loadConfig(nil, getenv, stderr)
	if err != nil {
		return err
	}
	d, err := openDatabase(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Migrate(ctx); err != nil {
		return err
	}
	return fn(d)
}
