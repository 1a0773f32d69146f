package integration

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	// The pgx driver for database/sql, registered as "pgx".
	_ "github.com/jackc/pgx/v5/stdlib"
)

// ErrNoPostgres reports that no PostgreSQL server binaries were found.
// NewPostgres fails the test on it under CI and skips it otherwise.
var ErrNoPostgres = errors.New("integration: PostgreSQL not found; install Debian's `postgresql` package " +
	"(apt-get install postgresql), or set PG_BINDIR to a directory holding initdb and postgres")

// Postgres is a real PostgreSQL server run by the harness: a fresh cluster
// made by initdb in a temporary directory, served by one postgres process
// on a free loopback port, reached over TCP as the superuser "postgres"
// with trust authentication. Close stops it and removes its files.
//
// PostgreSQL refuses to run as root: when the harness runs as root, it
// runs initdb and postgres as the OS user "postgres" (which Debian's
// package creates) and hands the temporary directory to that user.
type Postgres struct {
	dir  string
	addr string
	dsn  string
	log  *slog.Logger

	cmd  *exec.Cmd
	done chan struct{} // closed when postgres exits
	db   *sql.DB

	closeOnce sync.Once
	closeErr  error
}

// NewPostgres starts a PostgreSQL server for a test and stops it when the
// test ends. When the server binaries are missing, it fails the test under
// CI (CI set in the environment) and skips it otherwise; any other failure
// to start fails the test.
func NewPostgres(t testing.TB, opts ...Option) *Postgres {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p, err := StartPostgres(ctx, append([]Option{WithLogger(testLogger(t))}, opts...)...)
	if errors.Is(err, ErrNoPostgres) {
		if ci := os.Getenv("CI"); ci != "" {
			t.Fatalf("CI=%s and PostgreSQL cannot run: %v", ci, err)
		}
		t.Skipf("%v (under CI this fails)", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Error(err)
		}
	})
	return p
}

// StartPostgres finds the PostgreSQL binaries (see postgresBinDir), makes a
// cluster with initdb, starts postgres on a free port and waits until it
// accepts connections. Only the Processes provider is supported; the
// size option is ignored (one server).
func StartPostgres(ctx context.Context, opts ...Option) (*Postgres, error) {
	cfg := newConfig(opts)
	if cfg.provider != Processes {
		return nil, fmt.Errorf("integration: PostgreSQL runs only as processes, not %v", cfg.provider)
	}
	bin, err := postgresBinDir()
	if err != nil {
		return nil, err
	}
	cred, err := postgresCredential()
	if err != nil {
		return nil, err
	}
	return startWithRetry(ctx, cfg, "postgres", func() (*Postgres, error) {
		dir, err := makeTempDir("pg")
		if err != nil {
			return nil, err
		}
		p := &Postgres{dir: dir, log: cfg.logger}
		if err := p.start(ctx, bin, cred); err != nil {
			p.Close()
			return nil, err
		}
		return p, nil
	})
}

// DSN returns the connection string of the server's "postgres" database,
// for the pgx driver (or any libpq-style client).
func (p *Postgres) DSN() string { return p.dsn }

// Addr returns the server's address, host:port.
func (p *Postgres) Addr() string { return p.addr }

// DB returns a connection pool to the server's "postgres" database
// through the pgx driver, closed by Close.
func (p *Postgres) DB() *sql.DB { return p.db }

// Dir returns the server's temporary directory (data/, postgres.log).
func (p *Postgres) Dir() string { return p.dir }

func (p *Postgres) start(ctx context.Context, bin string, cred *syscall.Credential) error {
	if cred != nil {
		// The directory is made 0700 for the harness's user; the server's
		// user needs to own it to create data/ and its socket there.
		if err := os.Chown(p.dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return fmt.Errorf("integration: hand %s to the postgres user: %w", p.dir, err)
		}
	}
	data := filepath.Join(p.dir, "data")
	logPath := filepath.Join(p.dir, "postgres.log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close() // the child has its own descriptor once started

	command := func(name string, args ...string) *exec.Cmd {
		cmd := exec.Command(filepath.Join(bin, name), args...)
		cmd.Dir = p.dir
		cmd.Env = append(os.Environ(), "LC_ALL=C", "PGTZ=UTC", "TZ=UTC")
		cmd.Stdout, cmd.Stderr = logf, logf
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL, Credential: cred}
		return cmd
	}

	initdb := command("initdb", "-D", data, "-U", "postgres", "--auth=trust",
		"-E", "UTF8", "--no-locale", "--no-sync", "--no-instructions")
	// initdb has no place to stop early: a context end kills it.
	if err := runCtx(ctx, initdb); err != nil {
		return fmt.Errorf("integration: initdb: %w\n%s", err, tailFile(logPath))
	}

	l, err := serverListener()
	if err != nil {
		return err
	}
	p.addr = l.Addr().String()
	host, port, _ := net.SplitHostPort(p.addr)
	l.Close()
	p.dsn = fmt.Sprintf("postgres://postgres@%s/postgres?sslmode=disable", p.addr)

	p.cmd = command("postgres", "-D", data,
		"-c", "listen_addresses="+host,
		"-p", port,
		"-c", "unix_socket_directories="+p.dir,
		"-c", "max_connections=100",
		// Tests need no durability: a killed server's cluster is thrown
		// away with its directory.
		"-c", "fsync=off",
		"-c", "synchronous_commit=off",
		"-c", "full_page_writes=off",
		"-c", "log_min_messages=warning",
		"-c", "log_connections=off",
	)
	if err := p.cmd.Start(); err != nil {
		p.cmd = nil
		return fmt.Errorf("integration: start postgres: %w", err)
	}
	p.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) {
		cmd.Wait()
		close(done)
	}(p.cmd, p.done)
	p.log.Info("integration: started", "node", "postgres", "pid", p.cmd.Process.Pid, "addr", p.addr, "dir", p.dir)

	p.db, err = sql.Open("pgx", p.dsn)
	if err != nil {
		return err
	}
	wctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		select {
		case <-p.done:
			cancel(errors.New("integration: postgres exited during startup"))
		case <-wctx.Done():
		}
	}()
	err = poll(wctx, 50*time.Millisecond, func(ctx context.Context) error {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		return p.db.PingContext(cctx)
	})
	if err != nil {
		return fmt.Errorf("integration: postgres at %s does not answer: %w\n%s", p.addr, err, tailFile(logPath))
	}
	p.log.Info("integration: PostgreSQL ready", "addr", p.addr)
	return nil
}

// Close stops the server (a fast shutdown, then SIGKILL if it lingers)
// and removes its directory.
func (p *Postgres) Close() error {
	p.closeOnce.Do(func() { p.closeErr = p.close() })
	return p.closeErr
}

func (p *Postgres) close() error {
	var errs []error
	if p.db != nil {
		p.db.Close()
	}
	if p.cmd != nil {
		pid := p.cmd.Process.Pid
		// SIGINT is PostgreSQL's fast shutdown: sessions are ended and
		// the shared memory is released, which SIGKILL would leave behind.
		syscall.Kill(pid, syscall.SIGINT)
		select {
		case <-p.done:
		case <-time.After(20 * time.Second):
			p.log.Warn("integration: postgres ignores the shutdown; killing it", "pid", pid)
			syscall.Kill(-pid, syscall.SIGKILL)
			select {
			case <-p.done:
			case <-time.After(30 * time.Second):
				errs = append(errs, fmt.Errorf("integration: postgres (pid %d) did not exit after SIGKILL", pid))
			}
		}
		// Backends exit on their own once the postmaster is gone; make
		// sure none outlives the test.
		syscall.Kill(-pid, syscall.SIGKILL)
		p.log.Info("integration: stopped", "node", "postgres", "pid", pid)
	}
	if p.dir != "" {
		if err := os.RemoveAll(p.dir); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// runCtx runs cmd, killing its process group if ctx ends first.
func runCtx(ctx context.Context, cmd *exec.Cmd) error {
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		return context.Cause(ctx)
	}
}

func tailFile(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// postgresBinDir returns the directory holding initdb and postgres:
// $PG_BINDIR if set, else the newest /usr/lib/postgresql/<major>/bin
// (Debian's layout), else the directory of initdb on PATH. The error wraps
// ErrNoPostgres when none has them.
func postgresBinDir() (string, error) {
	has := func(dir string) bool {
		return fileExists(filepath.Join(dir, "initdb")) && fileExists(filepath.Join(dir, "postgres"))
	}
	if d := os.Getenv("PG_BINDIR"); d != "" {
		if has(d) {
			return d, nil
		}
		return "", fmt.Errorf("%w (PG_BINDIR=%s holds no initdb and postgres)", ErrNoPostgres, d)
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return pgMajor(dirs[i]) > pgMajor(dirs[j]) })
	for _, d := range dirs {
		if has(d) {
			return d, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil && has(filepath.Dir(p)) {
		return filepath.Dir(p), nil
	}
	return "", fmt.Errorf("%w (no /usr/lib/postgresql/*/bin/initdb, none on PATH)", ErrNoPostgres)
}

// pgMajor returns the major version in /usr/lib/postgresql/<major>/bin.
func pgMajor(binDir string) float64 {
	v, _ := strconv.ParseFloat(filepath.Base(filepath.Dir(binDir)), 64)
	return v
}

// postgresCredential returns the credential the server runs with: nil (the
// harness's own user) unless the harness runs as root, which PostgreSQL
// refuses; then the OS user "postgres".
func postgresCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("integration: running as root, and PostgreSQL refuses root: no OS user postgres to run it as "+
			"(Debian's `postgresql` package creates it): %w", err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("integration: user postgres has uid %q gid %q", u.Uid, u.Gid)
	}
	// No supplementary groups: the server needs none.
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}, nil
}

// quoteIdent quotes a PostgreSQL identifier.
func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

// CreateDatabase creates a database on the server and returns its DSN,
// for tests that want a database of their own on a shared server.
func (p *Postgres) CreateDatabase(ctx context.Context, name string) (string, error) {
	if _, err := p.db.ExecContext(ctx, "CREATE DATABASE "+quoteIdent(name)); err != nil {
		return "", fmt.Errorf("integration: create database %s: %w", name, err)
	}
	return fmt.Sprintf("postgres://postgres@%s/%s?sslmode=disable", p.addr, url.PathEscape(name)), nil
}
