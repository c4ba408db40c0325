// Command lull is the notification batching service: it serves the API,
// the settings and operator pages, and works the flush jobs.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

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
  version         print the version

Every setting is an environment variable, or a flag of the same name
(lull serve -LULL_ADDR=:9090). lull serve -h lists them.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, errUsage) {
			fmt.Fprintln(os.Stderr, "lull:", err)
		}
		os.Exit(1)
	}
}

var errUsage = errors.New("usage")

// run is the whole program, separate from main so that tests can start a
// real server in-process with their own environment.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errUsage
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "version":
		fmt.Fprintln(stdout, "lull", version)
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
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprintf(stderr, "lull: unknown command %q\n\n%s", cmd, usage)
	return errUsage
}
