// Command lull is the notification batching service: it serves the API,
// the settings and operator pages, and works the flush jobs.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	// Time zones are built in, so digests keep local time on a machine
	// (or a container image) without a zoneinfo database.
	_ "time/tzdata"
)

// version is set at build time with -ldflags "-X main.version=...". When
// it is not, versionString reads what the Go toolchain recorded.
var version = "dev"

// versionString is the release version, or for a build from a checkout the
// module version or VCS revision Go stamped into the binary, so a bug
// report names the code it ran.
func versionString() string {
	if version != "dev" {
		return version
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return version
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, dirty string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev == "" {
		return version
	}
	return "dev-" + rev + dirty
}

const usage = `usage: lull <command> [flags]

commands:
  serve           migrate, then serve HTTP and work jobs
  demo            serve with demo types, recipients and a stream of events
  migrate         apply database migrations and exit
  apikey create   print a new API key: lull apikey create [NAME]
  apikey list     list API keys (ids and names, never the keys)
  apikey revoke   stop a key working: lull apikey revoke ID|KEY
  admin create    add an operator: lull admin create EMAIL PASSWORD
  simulate        replay events under proposed policies: lull simulate -h
  healthcheck     exit 0 if this machine's lull is ready (/readyz), for
                  container health checks
  version         print the version

Every setting is an environment variable, or a flag of the same name
(lull serve -LULL_ADDR=:9090). lull serve -h lists them.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	setMemoryLimit(os.Getenv)
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, errUsage) {
			fmt.Fprintln(os.Stderr, "lull:", err)
		}
		os.Exit(1)
	}
}

var errUsage = errors.New("usage")

// run is the whole program, separate from main so that tests can start a
// real server in-process with their own environment. Asking a command for
// its help (-h) is a success, not an error.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	err := dispatch(ctx, args, getenv, stdout, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	return err
}

func dispatch(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errUsage
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "version":
		fmt.Fprintln(stdout, "lull", versionString())
		return nil
	case "serve", "demo":
		return serve(ctx, rest, getenv, stdout, stderr, cmd == "demo")
	case "migrate":
		return migrateOnly(ctx, rest, getenv, stdout, stderr)
	case "apikey":
		return apikeyCmd(ctx, rest, getenv, stdout, stderr)
	case "admin":
		return adminCmd(ctx, rest, getenv, stdout, stderr)
	case "simulate":
		return simulateCmd(ctx, rest, getenv, stdout, stderr)
	case "healthcheck":
		return healthcheck(ctx, getenv, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprintf(stderr, "lull: unknown command %q\n\n%s", cmd, usage)
	return errUsage
}
