package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/etcdlock"
	"github.com/distlock/distlock/internal/backend"
	"github.com/distlock/distlock/zklock"
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

// open checks the flags and connects. Its errors carry exit codes.
func (c *connFlags) open(ctx context.Context) (*backend.Client, error) {
	switch {
	case c.etcd != "" && c.zk != "":
		return nil, usageErr("both --etcd and --zk given; choose one cluster")
	case c.etcd == "" && c.zk == "":
		return nil, usageErr("no cluster: pass --etcd host:port (or set ETCDCTL_ENDPOINTS) or --zk host:port (or set DISTLOCK_ZK)")
	case c.ttl <= 0:
		return nil, usageErr("--ttl %v: want a positive duration", c.ttl)
	}
	cfg := backend.Config{
		Kind: backend.Etcd, Endpoints: backend.SplitList(c.etcd),
		User: c.user, Password: c.password,
		ZKAuth: c.zkAuth, ZKChroot: c.zkChroot,
		Prefix: c.prefix, TTL: c.ttl, TickTime: c.zkTick, DialTimeout: c.timeout,
	}
	if c.zk != "" {
		cfg.Kind, cfg.Endpoints = backend.ZooKeeper, backend.SplitList(c.zk)
	} else {
		tc, err := backend.LoadTLS(c.cacert, c.cert, c.key)
		if err != nil {
			return nil, usageErr("%v", err)
		}
		cfg.TLS = tc
	}
	b, err := backend.Dial(ctx, cfg)
	var cerr *backend.ConfigError
	switch {
	case errors.As(err, &cerr):
		return nil, usageErr("%v", err)
	case err != nil:
		return nil, exit(exitUnreachable, err)
	}
	return b, nil
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
func mutex(s *backend.Session, name string) (distlock.Locker, error) {
	m, err := s.Mutex(name)
	if err != nil {
		return nil, usageErr("%v", err)
	}
	return m, nil
}

// semaphore returns the semaphore called name, of n permits, on s, as a
// Locker whose leases are its permits.
func semaphore(s *backend.Session, name string, n int) (distlock.Locker, error) {
	m, err := s.SemaphoreLocker(name, n)
	if err != nil {
		return nil, usageErr("%v", err)
	}
	return m, nil
}

// holderValue is what distlock's own lock entries carry: who and since
// when (etcd keys have no creation time of their own).
func holderValue(what string) string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s pid %d %s since %s", host, os.Getpid(), what, time.Now().UTC().Format(time.RFC3339))
}
