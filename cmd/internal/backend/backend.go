// Package backend is the one place where distlock's programs (the distlock
// command, its demo worker, and the integration harness's lock holder)
// turn "etcd or ZooKeeper, these endpoints, these credentials" into a
// connected client, a lock session and its lockers. Everything that
// differs between the two lock services is decided here, once, so that
// the programs above it never switch on the backend kind to take a lock.
package backend

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/etcdlock"
	"github.com/distlock/distlock/fencing/etcdfence"
	"github.com/distlock/distlock/fencing/zkfence"
	"github.com/distlock/distlock/zklock"
	"github.com/go-zookeeper/zk"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Kind names a lock service.
type Kind string

// The lock services.
const (
	Etcd      Kind = "etcd"
	ZooKeeper Kind = "zk"
)

// ParseKind accepts "etcd" and "zk" (also "zookeeper").
func ParseKind(s string) (Kind, error) {
	switch s {
	case "etcd":
		return Etcd, nil
	case "zk", "zookeeper":
		return ZooKeeper, nil
	}
	return "", fmt.Errorf("unknown backend %q (want etcd or zk)", s)
}

// zkDefaultTimeout is the session timeout asked of ZooKeeper when Config
// gives none: short, as the tests that stop holders want it.
const zkDefaultTimeout = 4 * time.Second

// Config says which cluster to use, how to reach it and what sessions on
// it look like. The messages of its errors name the distlock command's
// flags (--ttl, --cacert, ...), which the lock holder's flags share.
type Config struct {
	Kind Kind
	// Endpoints: etcd client URLs or host:port (TLS when TLS is set);
	// ZooKeeper host:port.
	Endpoints []string

	// TLS is the etcd client's TLS configuration (see LoadTLS); nil for
	// plain connections.
	TLS *tls.Config
	// User and Password are etcd credentials; User may be "user:password".
	User, Password string
	// ZKAuth is ZooKeeper digest credentials, user:password: the lock
	// nodes then get a creator-only ACL.
	ZKAuth string
	// ZKChroot is a ZooKeeper path all lock nodes live under.
	ZKChroot string

	// Prefix is where the locks live (default: the backend's).
	Prefix string
	// TTL is the etcd lease TTL or the ZooKeeper session timeout asked for
	// (zero: etcdlock.MinTTL on etcd, 4s on ZooKeeper).
	TTL time.Duration
	// TickTime is the ZooKeeper servers' tickTime, if known (see
	// zklock.WithTickTime).
	TickTime time.Duration
	// DialTimeout bounds connecting (default 5s).
	DialTimeout time.Duration
	// Logger gets the sessions' logs and ZooKeeper's connection events
	// (silent if nil).
	Logger *slog.Logger
}

// ConfigError is a Config that cannot work (a usage error of the program
// that made it).
type ConfigError struct{ msg string }

func (e *ConfigError) Error() string { return e.msg }

func configErrorf(format string, args ...any) error {
	return &ConfigError{fmt.Sprintf(format, args...)}
}

// Client is a connection to one cluster of either kind, and its Admin.
type Client struct {
	Admin
	markers func(ctx context.Context, name string, n int) (int, []distlock.SlotMarker, error)
	cfg     Config
	prefix  string
	acl     []zk.ACL
	etcd    *clientv3.Client
	zk      *zk.Conn
}

// Dial checks cfg and connects: it returns once the cluster answered (an
// etcd read under the prefix, a ZooKeeper session), or fails within
// DialTimeout. Errors of cfg are *ConfigError; refused credentials match
// ErrCredentials.
func Dial(ctx context.Context, cfg Config) (*Client, error) {
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = 5 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	switch {
	case len(cfg.Endpoints) == 0:
		return nil, configErrorf("no endpoints")
	case cfg.TTL < 0:
		return nil, configErrorf("--ttl %v: want a positive duration", cfg.TTL)
	case cfg.TickTime < 0:
		return nil, configErrorf("--zk-tick %v: want a positive duration", cfg.TickTime)
	}
	switch cfg.Kind {
	case Etcd:
		return dialEtcd(ctx, cfg)
	case ZooKeeper:
		return dialZK(ctx, cfg)
	}
	return nil, configErrorf("unknown backend %q (want etcd or zk)", cfg.Kind)
}

func dialEtcd(ctx context.Context, cfg Config) (*Client, error) {
	if cfg.TTL == 0 {
		cfg.TTL = etcdlock.MinTTL
	}
	if cfg.TTL < etcdlock.MinTTL {
		return nil, configErrorf("--ttl %v is below etcd's minimum of %v", cfg.TTL, etcdlock.MinTTL)
	}
	ec := clientv3.Config{
		Endpoints:   cfg.Endpoints,
		DialTimeout: cfg.DialTimeout,
		Logger:      zap.NewNop(),
		Username:    cfg.User,
		Password:    cfg.Password,
		TLS:         cfg.TLS,
	}
	if u, p, ok := strings.Cut(cfg.User, ":"); ok && cfg.Password == "" {
		ec.Username, ec.Password = u, p
	}
	c := &Client{cfg: cfg, prefix: cfg.Prefix}
	if c.prefix == "" {
		c.prefix = etcdlock.DefaultPrefix
	}
	if !strings.HasSuffix(c.prefix, "/") {
		// etcdlock.NewSession refuses it too: prefix "my" and lock "appx"
		// would share keys with prefix "myapp" and lock "x".
		return nil, configErrorf("--prefix %q: an etcd key prefix must end in \"/\": write %q", c.prefix, c.prefix+"/")
	}
	cli, err := clientv3.New(ec)
	if err != nil {
		if aerr := c.etcdAuthFailed(err, ""); aerr != nil {
			return nil, aerr
		}
		return nil, fmt.Errorf("etcd %s: %w", c.endpoints(), err)
	}
	// The client dials lazily: ask once, so that an unreachable cluster
	// (or refused credentials) is told apart from a lock that is held.
	// The read is under the prefix: a user may read nothing else.
	if err := c.pingEtcd(ctx, cli, c.prefix+"distlock-ping"); err != nil {
		cli.Close()
		if errors.Is(err, ErrCredentials) {
			return nil, err
		}
		if aerr := c.etcdAuthFailed(err, c.prefix); aerr != nil {
			return nil, aerr
		}
		return nil, fmt.Errorf("etcd %s unreachable: %w", c.endpoints(), err)
	}
	c.etcd = cli
	a, err := etcdlock.NewAdmin(cli, c.prefix)
	if err != nil {
		cli.Close()
		return nil, err
	}
	c.Admin = a
	c.markers = markersOf(a.Marks)
	return c, nil
}

type zkNopLogger struct{}

func (zkNopLogger) Printf(string, ...any) {}

func dialZK(ctx context.Context, cfg Config) (*Client, error) {
	if cfg.TTL == 0 {
		cfg.TTL = zkDefaultTimeout
	}
	c := &Client{cfg: cfg, acl: zk.WorldACL(zk.PermAll)}
	user, pass, ok := strings.Cut(cfg.ZKAuth, ":")
	if cfg.ZKAuth != "" && (!ok || user == "") {
		return nil, configErrorf("--zk-auth: want user:password")
	}
	conn, events, err := zk.Connect(cfg.Endpoints, cfg.TTL, zk.WithLogger(zkNopLogger{}), zk.WithLogInfo(false))
	if err != nil {
		return nil, fmt.Errorf("zookeeper %s: %w", c.endpoints(), err)
	}
	go func() {
		for ev := range events {
			cfg.Logger.Debug("backend: zookeeper event", "type", ev.Type.String(), "state", ev.State.String())
		}
	}()
	wctx, cancel := context.WithTimeout(ctx, cfg.DialTimeout)
	defer cancel()
	// go-zookeeper reports the session only through its event channel,
	// which the goroutine above owns: poll the state.
	for conn.State() != zk.StateHasSession {
		select {
		case <-wctx.Done():
			conn.Close()
			return nil, fmt.Errorf("zookeeper %s unreachable: no session within %v (state %v)", c.endpoints(), cfg.DialTimeout, conn.State())
		case <-time.After(10 * time.Millisecond):
		}
	}
	if cfg.ZKAuth != "" {
		if err := conn.AddAuth("digest", []byte(cfg.ZKAuth)); err != nil {
			conn.Close()
			return nil, fmt.Errorf("zookeeper %s: add digest auth: %w", c.endpoints(), err)
		}
		c.acl = zk.DigestACL(zk.PermAll, user, pass)
	}
	c.prefix = cfg.Prefix
	if c.prefix == "" {
		c.prefix = zklock.DefaultPrefix
	}
	if cfg.ZKChroot != "" {
		// go-zookeeper has no chroot; distlock puts its own paths under it.
		c.prefix = "/" + strings.Trim(cfg.ZKChroot, "/") + c.prefix
	}
	c.zk = conn
	a, err := zklock.NewAdmin(conn, c.prefix, c.acl...)
	if err != nil {
		conn.Close()
		return nil, configErrorf("--prefix: %v", err)
	}
	c.Admin = a
	c.markers = markersOf(a.Marks)
	return c, nil
}

// Kind returns the client's lock service.
func (c *Client) Kind() Kind { return c.cfg.Kind }

// Prefix returns where the locks live: the etcd key prefix, or the znode
// path (below the chroot).
func (c *Client) Prefix() string { return c.prefix }

// ACL returns the ACL of the client's ZooKeeper nodes (nil on etcd).
func (c *Client) ACL() []zk.ACL { return c.acl }

// Etcd returns the etcd client, nil on ZooKeeper.
func (c *Client) Etcd() *clientv3.Client { return c.etcd }

// ZK returns the ZooKeeper connection, nil on etcd.
func (c *Client) ZK() *zk.Conn { return c.zk }

// Close closes the connection.
func (c *Client) Close() {
	if c.etcd != nil {
		c.etcd.Close()
	}
	if c.zk != nil {
		c.zk.Close()
	}
}

func (c *Client) endpoints() string { return strings.Join(c.cfg.Endpoints, ",") }

// Admin is what both backends' Admins do (recipe.Admin,
// recipe.Admin), on the client's prefix: read and watch a lock's queue,
// revoke its holders and list their revocations (on ZooKeeper the
// records get the client's ACL).
type Admin interface {
	Inspect(ctx context.Context, name string) ([]distlock.QueueEntry, error)
	WatchQueue(ctx context.Context, name string, f func([]distlock.QueueEntry) error) error
	Revoke(ctx context.Context, name string, r distlock.RevokeRequest) ([]distlock.Revocation, error)
	Revocations(ctx context.Context, name string) ([]distlock.Revocation, error)
}

// markersOf returns SlotMarkers on a backend Admin's Marks.
func markersOf[M interface {
	Markers(ctx context.Context, n int) (int, []distlock.SlotMarker, error)
}](marks func(name string) (M, error)) func(context.Context, string, int) (int, []distlock.SlotMarker, error) {
	return func(ctx context.Context, name string, n int) (int, []distlock.SlotMarker, error) {
		m, err := marks(name)
		if err != nil {
			return 0, nil, err
		}
		return m.Markers(ctx, n)
	}
}

// SlotMarkers returns how many done-markers lock name has and the newest
// n (see recipe.Marks.Markers and recipe.Marks.Markers).
func (c *Client) SlotMarkers(ctx context.Context, name string, n int) (int, []distlock.SlotMarker, error) {
	return c.markers(ctx, name, n)
}

// ErrFenceKey is wrapped by FenceNewest's error for a key that is no
// fence's (an empty key, a znode path that is not absolute, ...).
var ErrFenceKey = errors.New("not a fence key")

// FenceNewest returns the newest token the fence stored at key (an etcd
// key, a znode path) has admitted for lock, or the zero Token if none.
func (c *Client) FenceNewest(ctx context.Context, key, lock string) (distlock.Token, error) {
	if c.etcd != nil {
		f, err := etcdfence.New(c.etcd, key, lock)
		if err != nil {
			return distlock.Token{}, fmt.Errorf("%w: %w", ErrFenceKey, err)
		}
		return f.Newest(ctx)
	}
	f, err := zkfence.New(c.zk, key, lock)
	if err != nil {
		return distlock.Token{}, fmt.Errorf("%w: %w", ErrFenceKey, err)
	}
	return f.Newest(ctx)
}

// AuthHint explains a ZooKeeper NoAuth (nothing for other errors): the
// lock's znodes carry an ACL the client's ZKAuth credentials do not match.
func (c *Client) AuthHint(err error) string {
	if !errors.Is(err, zk.ErrNoAuth) {
		return ""
	}
	if c.cfg.ZKAuth == "" {
		return "; ZooKeeper refused access: the lock's znodes have an ACL that needs credentials, give them with --zk-auth user:password"
	}
	user, _, _ := strings.Cut(c.cfg.ZKAuth, ":")
	return fmt.Sprintf("; ZooKeeper refused access: the lock's znodes have an ACL that the --zk-auth credentials of user %q do not match (wrong user or password)", user)
}

// LoadTLS returns the etcd client TLS configuration of a CA bundle, a
// client certificate and its key (PEM files; each may be empty, but cert
// and key go together), or nil when all three are empty. Its errors are
// *ConfigError.
func LoadTLS(cacert, cert, key string) (*tls.Config, error) {
	if cacert == "" && cert == "" && key == "" {
		return nil, nil
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if cacert != "" {
		pem, err := os.ReadFile(cacert)
		if err != nil {
			return nil, configErrorf("--cacert: %v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, configErrorf("--cacert %s: no PEM certificate in it", cacert)
		}
		tc.RootCAs = pool
	}
	if (cert == "") != (key == "") {
		return nil, configErrorf("--cert and --key go together")
	}
	if cert != "" {
		kp, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, configErrorf("--cert/--key: %v", err)
		}
		tc.Certificates = []tls.Certificate{kp}
	}
	return tc, nil
}

// SplitList splits a comma-separated list, dropping empty items.
func SplitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
