package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/etcdlock"
	"github.com/distlock/distlock/zklock"
	"github.com/go-zookeeper/zk"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// connFlags are the flags that say which cluster to use and how to reach
// it. Defaults come from the environment, as etcdctl's do.
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
	ttl     time.Duration
	zkTick  time.Duration
	timeout time.Duration
}

func (c *connFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.etcd, "etcd", os.Getenv("ETCDCTL_ENDPOINTS"), "etcd endpoints, comma-separated: https://host:port, host:port (TLS when --cacert, --cert or --key is given) or http://host:port (default $ETCDCTL_ENDPOINTS)")
	fs.StringVar(&c.cacert, "cacert", os.Getenv("ETCDCTL_CACERT"), "etcd: CA bundle to verify the servers' certificates, PEM (default $ETCDCTL_CACERT; without it, the system's CAs)")
	fs.StringVar(&c.cert, "cert", os.Getenv("ETCDCTL_CERT"), "etcd: client certificate, PEM, for servers run with --client-cert-auth (default $ETCDCTL_CERT)")
	fs.StringVar(&c.key, "key", os.Getenv("ETCDCTL_KEY"), "etcd: the client certificate's key, PEM (default $ETCDCTL_KEY)")
	fs.StringVar(&c.user, "user", os.Getenv("ETCDCTL_USER"), "etcd: user name, or user:password (default $ETCDCTL_USER)")
	fs.StringVar(&c.password, "password", os.Getenv("ETCDCTL_PASSWORD"), "etcd: password (default $ETCDCTL_PASSWORD)")
	fs.StringVar(&c.zk, "zk", os.Getenv("DISTLOCK_ZK"), "ZooKeeper servers host:port, comma-separated (default $DISTLOCK_ZK)")
	fs.StringVar(&c.zkAuth, "zk-auth", os.Getenv("DISTLOCK_ZK_AUTH"), "ZooKeeper: digest credentials user:password; the lock nodes get a creator-only ACL, and locks made with other credentials are refused (exit 69) (default $DISTLOCK_ZK_AUTH)")
	fs.StringVar(&c.zkChroot, "zk-chroot", os.Getenv("DISTLOCK_ZK_CHROOT"), "ZooKeeper: a path all lock nodes live under, e.g. /myapp (default $DISTLOCK_ZK_CHROOT)")
	fs.StringVar(&c.prefix, "prefix", "", "where the locks live: an etcd key prefix (default "+etcdlock.DefaultPrefix+") or a znode path (default "+zklock.DefaultPrefix+")")
	fs.DurationVar(&c.ttl, "ttl", 15*time.Second, "etcd lease TTL / ZooKeeper session timeout: how long a crashed holder blocks the lock")
	fs.DurationVar(&c.zkTick, "zk-tick", 0, "ZooKeeper: the servers' tickTime, which the lost signal allows for (default: asked of the server with the conf four-letter word, else ZooKeeper's default 2s)")
	fs.DurationVar(&c.timeout, "dial-timeout", 5*time.Second, "how long to try reaching the cluster")
}

// backend is a connection to one cluster.
type backend struct {
	kind   string // "etcd" or "zk"
	etcd   *clientv3.Client
	zk     *zk.Conn
	prefix string
	acl    []zk.ACL
	c      *connFlags
}

// open checks the flags and connects. Its errors carry exit codes.
func (c *connFlags) open(ctx context.Context) (*backend, error) {
	switch {
	case c.etcd != "" && c.zk != "":
		return nil, usageErr("both --etcd and --zk given; choose one cluster")
	case c.etcd == "" && c.zk == "":
		return nil, usageErr("no cluster: pass --etcd host:port (or set ETCDCTL_ENDPOINTS) or --zk host:port (or set DISTLOCK_ZK)")
	case c.ttl <= 0:
		return nil, usageErr("--ttl %v: want a positive duration", c.ttl)
	case c.zkTick < 0:
		return nil, usageErr("--zk-tick %v: want a positive duration", c.zkTick)
	}
	if c.etcd != "" {
		return c.openEtcd(ctx)
	}
	return c.openZK(ctx)
}

func (c *connFlags) openEtcd(ctx context.Context) (*backend, error) {
	if c.ttl < etcdlock.MinTTL {
		return nil, usageErr("--ttl %v is below etcd's minimum of %v", c.ttl, etcdlock.MinTTL)
	}
	cfg := clientv3.Config{
		Endpoints:   splitList(c.etcd),
		DialTimeout: c.timeout,
		Logger:      zap.NewNop(),
		Username:    c.user,
		Password:    c.password,
	}
	if u, p, ok := strings.Cut(c.user, ":"); ok && c.password == "" {
		cfg.Username, cfg.Password = u, p
	}
	if c.cacert != "" || c.cert != "" || c.key != "" {
		tc, err := c.tlsConfig()
		if err != nil {
			return nil, usageErr("%v", err)
		}
		cfg.TLS = tc
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		if aerr := c.etcdAuthFailed(err, ""); aerr != nil {
			return nil, exit(exitUnreachable, aerr)
		}
		return nil, exit(exitUnreachable, fmt.Errorf("etcd %s: %w", c.etcd, err))
	}
	prefix := c.prefix
	if prefix == "" {
		prefix = etcdlock.DefaultPrefix
	}
	// The client dials lazily: ask once, so that an unreachable cluster
	// (or refused credentials) is told apart from a lock that is held.
	// The read is under the prefix: a user may read nothing else.
	if err := c.pingEtcd(ctx, cli, cfg.TLS, prefix+"distlock-ping"); err != nil {
		cli.Close()
		if errors.Is(err, errCredentials) {
			return nil, exit(exitUnreachable, err)
		}
		if aerr := c.etcdAuthFailed(err, prefix); aerr != nil {
			return nil, exit(exitUnreachable, aerr)
		}
		return nil, exit(exitUnreachable, fmt.Errorf("etcd %s unreachable: %w", c.etcd, err))
	}
	return &backend{kind: "etcd", etcd: cli, prefix: prefix, c: c}, nil
}

func (c *connFlags) tlsConfig() (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if c.cacert != "" {
		pem, err := os.ReadFile(c.cacert)
		if err != nil {
			return nil, fmt.Errorf("--cacert: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--cacert %s: no PEM certificate in it", c.cacert)
		}
		tc.RootCAs = pool
	}
	if (c.cert == "") != (c.key == "") {
		return nil, errors.New("--cert and --key go together")
	}
	if c.cert != "" {
		kp, err := tls.LoadX509KeyPair(c.cert, c.key)
		if err != nil {
			return nil, fmt.Errorf("--cert/--key: %w", err)
		}
		tc.Certificates = []tls.Certificate{kp}
	}
	return tc, nil
}

type zkNopLogger struct{}

func (zkNopLogger) Printf(string, ...any) {}

func (c *connFlags) openZK(ctx context.Context) (*backend, error) {
	conn, events, err := zk.Connect(splitList(c.zk), c.ttl, zk.WithLogger(zkNopLogger{}), zk.WithLogInfo(false))
	if err != nil {
		return nil, exit(exitUnreachable, fmt.Errorf("zookeeper %s: %w", c.zk, err))
	}
	go func() {
		for range events {
		}
	}()
	wctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	for conn.State() != zk.StateHasSession {
		select {
		case <-wctx.Done():
			conn.Close()
			return nil, exit(exitUnreachable, fmt.Errorf("zookeeper %s unreachable: no session within %v (state %v)", c.zk, c.timeout, conn.State()))
		case <-time.After(10 * time.Millisecond):
		}
	}
	b := &backend{kind: "zk", zk: conn, acl: zk.WorldACL(zk.PermAll), c: c}
	if c.zkAuth != "" {
		user, pass, ok := strings.Cut(c.zkAuth, ":")
		if !ok || user == "" {
			conn.Close()
			return nil, usageErr("--zk-auth: want user:password")
		}
		if err := conn.AddAuth("digest", []byte(c.zkAuth)); err != nil {
			conn.Close()
			return nil, exit(exitUnreachable, fmt.Errorf("zookeeper %s: add digest auth: %w", c.zk, err))
		}
		b.acl = zk.DigestACL(zk.PermAll, user, pass)
	}
	b.prefix = c.prefix
	if b.prefix == "" {
		b.prefix = zklock.DefaultPrefix
	}
	if c.zkChroot != "" {
		// go-zookeeper has no chroot; distlock puts its own paths under it.
		root := "/" + strings.Trim(c.zkChroot, "/")
		b.prefix = root + b.prefix
	}
	return b, nil
}

// lockSession is a session of either backend.
type lockSession interface {
	Done() <-chan struct{}
	Err() error
	Close(ctx context.Context) error
}

// session starts a lock session whose entries carry holder.
func (b *backend) session(ctx context.Context, holder string, log *slog.Logger) (lockSession, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	switch b.kind {
	case "etcd":
		s, err := etcdlock.NewSession(ctx, b.etcd, etcdlock.WithTTL(b.c.ttl), etcdlock.WithPrefix(b.prefix), etcdlock.WithHolder(holder), etcdlock.WithLogger(log))
		if err != nil {
			return nil, exit(exitUnreachable, err)
		}
		return s, nil
	default:
		opts := []zklock.Option{zklock.WithPrefix(b.prefix), zklock.WithHolder(holder), zklock.WithACL(b.acl), zklock.WithLogger(log)}
		if b.c.zkTick > 0 {
			opts = append(opts, zklock.WithTickTime(b.c.zkTick))
		}
		s, err := zklock.NewSession(ctx, b.zk, opts...)
		if err != nil {
			return nil, exit(exitUnreachable, err)
		}
		return s, nil
	}
}

// mutex returns the lock called name on s.
func (b *backend) mutex(s lockSession, name string) (distlock.Locker, error) {
	var m distlock.Locker
	var err error
	switch s := s.(type) {
	case *etcdlock.Session:
		m, err = etcdlock.NewMutex(s, name)
	case *zklock.Session:
		m, err = zklock.NewMutex(s, name)
	}
	if err != nil {
		return nil, usageErr("%v", err)
	}
	return m, nil
}

// Close closes the connection.
func (b *backend) Close() {
	if b.etcd != nil {
		b.etcd.Close()
	}
	if b.zk != nil {
		b.zk.Close()
	}
}

// holderValue is what distlock's own lock entries carry: who and since
// when (etcd keys have no creation time of their own).
func holderValue(what string) string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s pid %d %s since %s", host, os.Getpid(), what, time.Now().UTC().Format(time.RFC3339))
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
