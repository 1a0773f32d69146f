package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/cmd/internal/backend"
	"github.com/distlock/distlock/diagnose"
	"github.com/distlock/distlock/etcdlock"
	"github.com/distlock/distlock/zklock"
)

// defaultTTL is --ttl's default. It is half the library's default
// (etcdlock.DefaultTTL, 30s) on purpose: the TTL is how long a holder
// that died without releasing (kill -9, a crashed host) keeps the lock
// from the next one, and how long a holder cut off from the cluster keeps
// it. A library user's service may hold a lock for hours and should ride
// out a long blip; distlock's holder is one COMMAND, which dies with
// distlock (see run --help), so a longer TTL would only make the next
// run wait longer after a crash. 15s still rides out an etcd leader
// election or a ZooKeeper server's restart, and fits ZooKeeper's default
// session timeout bounds (4s to 40s with the default tickTime).
const defaultTTL = 15 * time.Second

// connFlags are the flags that say which cluster to use and how to reach
// it (register: every command that connects), and those of the lock
// session (registerSession: run and once). Defaults come from the
// environment, as etcdctl's do.
type connFlags struct {
	etcd     string
	cacert   string
	cert     string
	key      string
	user     string
	password string

	zk       string
	zkAuth   string
	zkChroot string

	prefix  string
	timeout time.Duration

	// The session's flags; zero where the command has none (status,
	// revoke), and the backend's defaults apply.
	ttl      time.Duration
	zkTick   time.Duration
	logLevel string
	// logOut is where --log-level's lines go (default os.Stderr).
	logOut io.Writer

	// set are the flags given on the command line (see noteSet).
	set map[string]bool
}

func (c *connFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.etcd, "etcd", os.Getenv("ETCDCTL_ENDPOINTS"), "etcd endpoints, comma-separated: https://host:port, host:port (TLS when --cacert, --cert or --key is given) or http://host:port (default $ETCDCTL_ENDPOINTS)")
	fs.StringVar(&c.cacert, "cacert", os.Getenv("ETCDCTL_CACERT"), "etcd: CA bundle to verify the servers' certificates, PEM (default $ETCDCTL_CACERT; without it, the system's CAs)")
	fs.StringVar(&c.cert, "cert", os.Getenv("ETCDCTL_CERT"), "etcd: client certificate, PEM, for servers run with --client-cert-auth (default $ETCDCTL_CERT)")
	fs.StringVar(&c.key, "key", os.Getenv("ETCDCTL_KEY"), "etcd: the client certificate's key, PEM (default $ETCDCTL_KEY)")
	fs.StringVar(&c.user, "user", os.Getenv("ETCDCTL_USER"), "etcd: user name, or user:password (default $ETCDCTL_USER)")
	fs.StringVar(&c.password, "password", os.Getenv("ETCDCTL_PASSWORD"), "etcd: password (default $ETCDCTL_PASSWORD)")
	fs.StringVar(&c.zk, "zk", os.Getenv("DISTLOCK_ZK"), "ZooKeeper servers host:port, comma-separated (default $DISTLOCK_ZK); distlock talks to ZooKeeper without TLS")
	fs.StringVar(&c.zkAuth, "zk-auth", os.Getenv("DISTLOCK_ZK_AUTH"), "ZooKeeper: digest credentials user:password; the lock nodes get a creator-only ACL, and locks made with other credentials are refused (exit 69) (default $DISTLOCK_ZK_AUTH)")
	fs.StringVar(&c.zkChroot, "zk-chroot", os.Getenv("DISTLOCK_ZK_CHROOT"), "ZooKeeper: a path all lock nodes live under, e.g. /myapp (default $DISTLOCK_ZK_CHROOT)")
	fs.StringVar(&c.prefix, "prefix", "", "where the locks live: an etcd key prefix ending in \"/\" (default "+etcdlock.DefaultPrefix+") or an absolute znode path (default "+zklock.DefaultPrefix+")")
	fs.DurationVar(&c.timeout, "dial-timeout", 5*time.Second, "how long to try reaching the cluster; an endpoint that refuses the connection, whose host is unknown, or that is not etcd or ZooKeeper fails at once")
}

// registerSession adds the lock session's flags. --log-level is off by
// default: distlock's stderr is COMMAND's too (what cron mails), and
// distlock says every outcome that matters in one line of its own (lost,
// not acquired, a failed unlock); the library's lines are for diagnosis.
func (c *connFlags) registerSession(fs *flag.FlagSet) {
	fs.DurationVar(&c.ttl, "ttl", defaultTTL, fmt.Sprintf("etcd lease TTL / ZooKeeper session timeout: how long a holder that died without releasing (kill -9, a crashed host) blocks the lock, and how long one cut off from the cluster keeps it. The default is half the library's %v: COMMAND dies with distlock, so a crashed holder has nothing left to protect and the next run should not wait longer (ZooKeeper bounds it by the servers' min and max session timeout)", etcdlock.DefaultTTL))
	fs.DurationVar(&c.zkTick, "zk-tick", 0, "ZooKeeper: the servers' tickTime, which the lost signal allows for (default: asked of the server with the conf four-letter word, else ZooKeeper's default 2s)")
	fs.StringVar(&c.logLevel, "log-level", "off", "the library's log lines (sessions, keepalives, waits, losses) on stderr, from this level up: debug, info, warn, error or off")
}

// noteSet records which flags of fs were given on the command line.
func (c *connFlags) noteSet(fs *flag.FlagSet) {
	c.set = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { c.set[f.Name] = true })
}

// logLevels are --log-level's values.
var logLevels = map[string]slog.Level{"debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn, "error": slog.LevelError}

// checkSession checks the session's flags.
func (c *connFlags) checkSession() error {
	_, known := logLevels[c.logLevel]
	switch {
	case c.ttl <= 0:
		return usageErr("--ttl %v: want a positive duration", c.ttl)
	case c.zkTick < 0:
		return usageErr("--zk-tick %v: want a positive duration", c.zkTick)
	case !known && c.logLevel != "off" && c.logLevel != "":
		return usageErr("--log-level %q: want debug, info, warn, error or off", c.logLevel)
	}
	return nil
}

// logger is the library's logger --log-level asks for, nil for off.
func (c *connFlags) logger() *slog.Logger {
	lvl, ok := logLevels[c.logLevel]
	if !ok {
		return nil
	}
	out := c.logOut
	if out == nil {
		out = os.Stderr
	}
	return slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: lvl}))
}

// open checks the flags and connects. Its errors carry exit codes; when
// the cluster cannot be reached, the error says why (see diagnose.go)
// and matches the verdicts' sentinels.
func (c *connFlags) open(ctx context.Context) (*backend.Client, error) {
	tlsGiven := c.set["cacert"] || c.set["cert"] || c.set["key"]
	switch {
	case c.etcd != "" && c.zk != "":
		return nil, usageErr("both --etcd and --zk given; choose one cluster")
	case c.etcd == "" && c.zk == "":
		return nil, usageErr("no cluster: pass --etcd host:port (or set ETCDCTL_ENDPOINTS) or --zk host:port (or set DISTLOCK_ZK)")
	case c.timeout <= 0:
		return nil, usageErr("--dial-timeout %v: want a positive duration", c.timeout)
	case c.ttl < 0:
		return nil, usageErr("--ttl %v: want a positive duration", c.ttl)
	case c.zk != "" && tlsGiven:
		return nil, usageErr("--cacert, --cert and --key are for etcd: distlock talks to ZooKeeper without TLS (give the servers' plain clientPort in --zk)")
	}
	cfg := backend.Config{
		Kind: backend.Etcd, Endpoints: backend.SplitList(c.etcd),
		User: c.user, Password: c.password,
		ZKAuth: c.zkAuth, ZKChroot: c.zkChroot,
		Prefix: c.prefix, TTL: c.ttl, TickTime: c.zkTick, DialTimeout: c.timeout,
		Logger: c.logger(),
	}
	st := store{name: "etcd", flag: "--etcd", etcd: true}
	if c.zk != "" {
		cfg.Kind, cfg.Endpoints = backend.ZooKeeper, backend.SplitList(c.zk)
		st = store{name: "ZooKeeper", flag: "--zk"}
	} else {
		tc, err := backend.LoadTLS(c.cacert, c.cert, c.key)
		if err != nil {
			return nil, usageErr("%v", err)
		}
		cfg.TLS, st.tls, st.tlsFlags = tc, tc, tc != nil
	}
	if len(cfg.Endpoints) == 0 {
		return nil, usageErr("%s %q: no endpoint in it", st.flag, map[bool]string{true: c.etcd, false: c.zk}[st.etcd])
	}
	return dial(ctx, cfg, st)
}

// dial connects as cfg says, within cfg.DialTimeout. While the client
// dials, the endpoints are probed (after probeDelay, or at once when the
// client gives up early): if every one of them fails in a way that
// waiting cannot mend (refused, unknown host, not the store, TLS on one
// side only), dial reports it at once; if the client fails or the time is
// up, the probes' verdicts say why.
func dial(ctx context.Context, cfg backend.Config, st store) (*backend.Client, error) {
	deadline := time.Now().Add(cfg.DialTimeout)
	dctx, cancelDial := context.WithCancel(ctx)
	defer cancelDial()
	type dialed struct {
		b   *backend.Client
		err error
	}
	dch := make(chan dialed, 1)
	go func() {
		b, err := backend.Dial(dctx, cfg)
		dch <- dialed{b, err}
	}()
	// stopDial ends the client's dial and returns what it came to. A
	// client that does not stop at once (etcd's login with --user takes
	// no context) is closed whenever it is done, without waiting.
	stopDial := func() dialed {
		cancelDial()
		select {
		case d := <-dch:
			return d
		case <-time.After(100 * time.Millisecond):
			go func() {
				if d := <-dch; d.b != nil {
					d.b.Close()
				}
			}()
			return dialed{err: context.Canceled}
		}
	}

	pctx, cancelProbes := context.WithCancel(ctx)
	defer cancelProbes()
	var (
		vch      <-chan []verdict
		verdicts []verdict
		have     bool
	)
	probe := func() {
		if vch == nil {
			vch = st.diagnose(pctx, cfg.Endpoints, deadline)
		}
	}
	// awaitVerdicts waits for the probes (which end by the deadline).
	awaitVerdicts := func() {
		probe()
		if !have {
			select {
			case verdicts = <-vch:
				have = true
			case <-ctx.Done():
			}
		}
	}
	probeAt := time.NewTimer(min(probeDelay, cfg.DialTimeout/4))
	defer probeAt.Stop()
	timeUp := time.NewTimer(time.Until(deadline) + 100*time.Millisecond)
	defer timeUp.Stop()
	for {
		select {
		case d := <-dch:
			var cerr *backend.ConfigError
			switch {
			case d.err == nil:
				return d.b, nil
			case errors.As(d.err, &cerr):
				return nil, usageErr("%v", d.err)
			case ctx.Err() != nil:
				return nil, exit(exitUnreachable, d.err) // a signal: the caller says so
			}
			awaitVerdicts()
			return nil, exit(exitUnreachable, explain(st, verdicts, cfg.DialTimeout, d.err))
		case <-probeAt.C:
			probe()
		case verdicts = <-vch:
			have = true
			if allFast(verdicts) {
				if d := stopDial(); d.err == nil {
					return d.b, nil // it made it after all
				}
				return nil, exit(exitUnreachable, &connError{s: st, verdicts: verdicts, timeout: cfg.DialTimeout})
			}
		case <-timeUp.C:
			d := stopDial()
			if d.err == nil {
				return d.b, nil
			}
			awaitVerdicts()
			cause := fmt.Errorf("%s %s: no connection within --dial-timeout %v: %w", st.name, strings.Join(cfg.Endpoints, ","), cfg.DialTimeout, diagnose.ErrTimeout)
			switch {
			case errors.Is(d.err, backend.ErrCredentials):
				cause = d.err // it came with the time
			case have && !anyVerdict(verdicts):
				// Each endpoint answers like the store, yet no session.
				if st.etcd {
					cause = fmt.Errorf("etcd %s: the endpoints answer, but the cluster did not answer a read within --dial-timeout %v: has it lost its quorum (no leader)? 'etcdctl endpoint status' tells: %w", strings.Join(cfg.Endpoints, ","), cfg.DialTimeout, diagnose.ErrTimeout)
				} else {
					cause = fmt.Errorf("ZooKeeper %s: the servers answer, but none granted a session within --dial-timeout %v: has the ensemble lost its quorum? (echo srvr | nc HOST PORT tells): %w", strings.Join(cfg.Endpoints, ","), cfg.DialTimeout, diagnose.ErrTimeout)
				}
			}
			return nil, exit(exitUnreachable, explain(st, verdicts, cfg.DialTimeout, cause))
		case <-ctx.Done():
			if d := stopDial(); d.b != nil {
				d.b.Close()
			}
			return nil, exit(exitUnreachable, context.Cause(ctx))
		}
	}
}

// explain returns the error that says why the client's dial failed with
// cause: the probes' verdicts where they have one, else cause. A refusal
// of the credentials stands unless the probes found the endpoints are not
// what the credentials were for.
func explain(st store, verdicts []verdict, timeout time.Duration, cause error) error {
	if !anyVerdict(verdicts) {
		return cause
	}
	if errors.Is(cause, backend.ErrCredentials) {
		for _, v := range verdicts {
			if v.Err == nil || errors.Is(v.Err, diagnose.ErrTimeout) {
				return cause // an endpoint the credentials are for: the refusal is the news
			}
		}
	}
	return &connError{s: st, verdicts: verdicts, timeout: timeout, cause: cause}
}

// session starts a lock session whose entries carry holder.
func session(ctx context.Context, b *backend.Client, holder string, opts ...backend.SessionOption) (*backend.Session, error) {
	s, err := b.NewSession(ctx, holder, opts...)
	if err != nil {
		return nil, exit(exitUnreachable, err)
	}
	return s, nil
}

// mutex returns the lock called name on s.
func mutex(s *backend.Session, name string, opts ...distlock.LockOption) (distlock.Locker, error) {
	m, err := s.Mutex(name, opts...)
	if err != nil {
		return nil, usageErr("--lock %q: %s", name, lockCause(err))
	}
	return m, nil
}

// multiMutex returns the lock on all of names at once (run with several
// --lock), on s.
func multiMutex(s *backend.Session, names []string) (distlock.Locker, error) {
	m, err := s.MultiMutex(names...)
	if err != nil {
		return nil, usageErr("--lock %s: %s", strings.Join(names, " --lock "), lockCause(err))
	}
	return m, nil
}

// semaphore returns the semaphore called name, of n permits, on s, as a
// Locker whose leases are its permits.
func semaphore(s *backend.Session, name string, n int) (distlock.Locker, error) {
	m, err := s.SemaphoreLocker(name, n)
	if err != nil {
		return nil, usageErr("--lock %q --permits %d: %s", name, n, lockCause(err))
	}
	return m, nil
}

// holderValue is what distlock's own lock entries carry: who and since
// when (etcd keys have no creation time of their own).
func holderValue(what string) string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s pid %d %s since %s", host, os.Getpid(), what, time.Now().UTC().Format(time.RFC3339))
}
