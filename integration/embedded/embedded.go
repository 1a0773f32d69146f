// Package embedded starts a single etcd member inside the current process,
// on free loopback ports, with its data in a new temporary directory: a
// real etcd for examples, demos and quick tests, with nothing to install.
// StartZooKeeper does the same for ZooKeeper, as a Java process (it needs
// Java and ZooKeeper's jars: Debian's zookeeper package, or
// $ZOOKEEPER_HOME).
//
//	etcd, err := embedded.StartEtcd(ctx)
//	if err != nil {
//		return err
//	}
//	defer etcd.Close()
//	cli, err := clientv3.New(clientv3.Config{Endpoints: etcd.Endpoints()})
//
// In a test, NewEtcd does the same and stops the member when the test
// ends.
//
// One member in the test's own process cannot be paused, cut off or
// killed: it is not for tests of failures, and not for production. For
// those, package integration starts real multi-member etcd clusters and
// ZooKeeper ensembles as processes of their own and breaks them on purpose.
//
// # Why a package of its own
//
// distlock's example programs (the examples module) use this package
// when no cluster is given to them, and they must still build once copied
// into a module of yours: Go refuses imports of another module's internal
// packages, so the member cannot live under internal/. It is not a function
// of package integration either: importing that package would add its
// dependencies to your module's graph — testcontainers-go, the Docker
// client, pgx, go-zookeeper — for one function that needs none of them.
// This package imports etcd's server (go.etcd.io/etcd/server/v3/embed),
// etcd's client and zap, and nothing else outside the standard library
// and this module (the ZooKeeper server is a process, found and started
// with the standard library).
//
// etcd's server adds about 14 MB to a binary. A program that runs against a
// cluster of yours in production should not import this package; the
// examples take the cluster's endpoints from a flag and start a member only
// when none are given.
package embedded

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/distlock/distlock/internal/embedetcd"
)

// Etcd is a running etcd member in this process.
type Etcd struct {
	srv       *embedetcd.Server
	closeOnce sync.Once
	closeErr  error
}

// Option configures StartEtcd, NewEtcd, StartZooKeeper and NewZooKeeper.
type Option func(*options)

type options struct{ addr string }

// WithAddr makes the server serve clients on addr (host:port; for etcd the
// host is an IP address or localhost) rather than on a free loopback port:
// "localhost:2379" for etcd, "localhost:2181" for ZooKeeper, the clients'
// defaults. An address that is taken is an error.
func WithAddr(addr string) Option { return func(o *options) { o.addr = addr } }

func newOptions(opts []Option) options {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// StartEtcd starts an etcd member on free loopback ports (see WithAddr),
// with its data in a new temporary directory, and returns once it serves
// clients. A free port that another process takes between the probe and
// etcd's bind is retried with new ports. Close stops the member and
// removes the directory.
func StartEtcd(ctx context.Context, opts ...Option) (*Etcd, error) {
	srv, err := embedetcd.StartAt(ctx, newOptions(opts).addr)
	if err != nil {
		return nil, err
	}
	return &Etcd{srv: srv}, nil
}

// NewEtcd starts an etcd member for a test (as StartEtcd does) and stops
// it when the test ends. It fails the test if the member cannot start.
func NewEtcd(t testing.TB, opts ...Option) *Etcd {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	e, err := StartEtcd(ctx, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Error(err)
		}
	})
	return e
}

// Endpoints returns the member's client URL ("http://127.0.0.1:PORT"), as
// clientv3.Config's Endpoints wants it.
func (e *Etcd) Endpoints() []string { return []string{e.srv.Endpoint} }

// Close stops the member and removes its data directory. It is safe to
// call more than once; clients of the member see it gone.
func (e *Etcd) Close() error {
	e.closeOnce.Do(func() { e.closeErr = e.srv.Close() })
	return e.closeErr
}
