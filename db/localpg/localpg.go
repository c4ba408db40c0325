// Package localpg starts a throwaway PostgreSQL cluster from the machine's own
// server binaries, so that lull and its tests run without anyone having to
// install, configure or start a database server first.
//
// The cluster lives in a folder of its own and keeps running after the
// process that started it exits: a second run finds it and reuses it, so data
// survives restarts of lull. PostgreSQL refuses to run as root; when lull runs
// as root the cluster is created and started as the "postgres" system user,
// in a folder under the system temp directory that this user can reach.
package localpg

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ErrNoBinaries is returned when no PostgreSQL server binaries can be found.
var ErrNoBinaries = errors.New(`no PostgreSQL server binaries found (initdb, pg_ctl).
Install them, or set DATABASE_URL to an existing PostgreSQL 14 or newer:
  Debian/Ubuntu: sudo apt-get install postgresql
  macOS:         brew install postgresql@16`)

// Cluster is a local PostgreSQL cluster in Dir, listening on 127.0.0.1:Port.
type Cluster struct {
	Dir  string // data folder's parent: holds data/, the socket, the log and the lock
	Port int
	bin  string
	cred *syscall.Credential // set when running as root
	fast bool
}

// DefaultDir is where the cluster for the project at projectDir lives: in
// the project's git-ignored .lull folder for a normal user, and in the system
// temp folder (keyed by the project path) for root, because the unprivileged
// postgres user must be able to traverse every parent of the data folder.
func DefaultDir(projectDir, name string) string {
	if os.Geteuid() != 0 {
		return filepath.Join(projectDir, ".lull", name)
	}
	sum := sha256.Sum256([]byte(projectDir))
	return filepath.Join(os.TempDir(), "lull-"+name+"-"+hex.EncodeToString(sum[:6]))
}

// Ensure makes sure a cluster runs in dir, creating and starting it if
// needed, and returns it. Concurrent callers (several test binaries, say) are
// serialised with a file lock, so exactly one of them creates the cluster.
// With fast set, the server skips fsync: for test clusters, where speed
// matters and a machine crash may lose everything anyway.
func Ensure(ctx context.Context, dir string, fast bool) (*Cluster, error) {
	bin, err := findBinaries()
	if err != nil {
		return nil, err
	}
	c := &Cluster{Dir: dir, bin: bin, fast: fast}
	if err := c.prepareDir(); err != nil {
		return nil, err
	}
	unlock, err := lockFile(filepath.Join(dir, "lock"))
	if err != nil {
		return nil, err
	}
	defer unlock()

	if port, ok := c.runningPort(); ok {
		c.Port = port
		return c, nil
	}
	if _, err := os.Stat(filepath.Join(c.dataDir(), "PG_VERSION")); err != nil {
		if err := c.initdb(ctx); err != nil {
			return nil, err
		}
	}
	if err := c.start(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// URL is the connection string for database name in this cluster.
func (c *Cluster) URL(database string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", c.Port, database)
}

// Stop shuts the cluster down quickly, dropping connections.
func (c *Cluster) Stop(ctx context.Context) error {
	return c.run(ctx, "pg_ctl", "-D", c.dataDir(), "-m", "fast", "-w", "stop")
}

// Start starts a stopped cluster on the port it had.
func (c *Cluster) Start(ctx context.Context) error { return c.start(ctx) }

func (c *Cluster) dataDir() string { return filepath.Join(c.Dir, "data") }

func (c *Cluster) prepareDir() error {
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return fmt.Errorf("create cluster folder: %w", err)
	}
	if os.Geteuid() != 0 {
		return nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return fmt.Errorf("running as root needs the postgres system user to run PostgreSQL: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	c.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	if err := os.Chown(c.Dir, uid, gid); err != nil {
		return fmt.Errorf("hand cluster folder to postgres: %w", err)
	}
	return nil
}

func (c *Cluster) initdb(ctx context.Context) error {
	return c.run(ctx, "initdb", "-D", c.dataDir(), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync")
}

// start runs pg_ctl start on the remembered port, or a free one the first
// time. The port is kept in a file so links and DATABASE_URLs stay valid.
func (c *Cluster) start(ctx context.Context) error {
	portFile := filepath.Join(c.Dir, "port")
	if b, err := os.ReadFile(portFile); err == nil {
		c.Port, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	}
	if c.Port == 0 || !portFree(c.Port) {
		p, err := freePort()
		if err != nil {
			return err
		}
		c.Port = p
	}
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c max_connections=300", c.Port, c.Dir)
	if c.fast {
		opts += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
	}
	if err := c.run(ctx, "pg_ctl", "-D", c.dataDir(), "-o", opts, "-l", filepath.Join(c.Dir, "postgres.log"), "-w", "-t", "60", "start"); err != nil {
		return err
	}
	return os.WriteFile(portFile, []byte(strconv.Itoa(c.Port)), 0o644)
}

// runningPort reports whether the cluster's postmaster is alive and on
// which port, from postmaster.pid (whose fourth line is the port).
func (c *Cluster) runningPort() (int, bool) {
	b, err := os.ReadFile(filepath.Join(c.dataDir(), "postmaster.pid"))
	if err != nil {
		return 0, false
	}
	lines := strings.Split(string(b), "\n")
	if len(lines) < 4 {
		return 0, false
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(lines[0]))
	port, _ := strconv.Atoi(strings.TrimSpace(lines[3]))
	if pid <= 0 || syscall.Kill(pid, 0) != nil {
		return 0, false
	}
	conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", port), time.Second)
	if err != nil {
		return 0, false
	}
	conn.Close()
	return port, true
}

func (c *Cluster) run(ctx context.Context, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, filepath.Join(c.bin, name), args...)
	cmd.Dir = c.Dir
	// pg_ctl's server must outlive us: its own process group keeps it from
	// receiving the terminal's Ctrl-C meant for lull.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: c.cred}
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %w\n%s", name, err, out)
	}
	return nil
}

// findBinaries looks for initdb and pg_ctl on PATH, then in the versioned
// folders where Debian/Ubuntu and Homebrew install them, newest first.
func findBinaries() (string, error) {
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		dir := filepath.Dir(p)
		if _, err := os.Stat(filepath.Join(dir, "initdb")); err == nil {
			return dir, nil
		}
	}
	var candidates []string
	for _, pattern := range []string{
		"/usr/lib/postgresql/*/bin",
		"/usr/pgsql-*/bin",
		"/opt/homebrew/opt/postgresql@*/bin",
		"/usr/local/opt/postgresql@*/bin",
		"/opt/homebrew/opt/postgresql/bin",
		"/usr/local/opt/postgresql/bin",
	} {
		m, _ := filepath.Glob(pattern)
		candidates = append(candidates, m...)
	}
	sort.Slice(candidates, func(i, j int) bool { return versionOf(candidates[i]) > versionOf(candidates[j]) })
	for _, dir := range candidates {
		if _, err := os.Stat(filepath.Join(dir, "initdb")); err == nil {
			return dir, nil
		}
	}
	return "", ErrNoBinaries
}

func versionOf(dir string) int {
	digits := strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' {
			return r
		}
		return -1
	}, dir)
	v, _ := strconv.Atoi(digits)
	return v
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func portFree(port int) bool {
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

// lockFile takes an exclusive flock on path, waiting for other holders.
func lockFile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() { syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
}
