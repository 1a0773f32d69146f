package bench

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/etcdlock"
	"github.com/distlock/distlock/integration"
	"github.com/distlock/distlock/recipe"
	"github.com/distlock/distlock/zklock"
	"github.com/go-zookeeper/zk"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// The many-locks contenders on each store. Every contender gets clients of
// its own (client i on member i mod the cluster's size, so that the load
// is spread over the members whichever is the leader) and sessions of its
// own, closed when the store's run ends.

const (
	manyOursName   = "bench-many-%04d"         // our lock names (under the default prefix)
	manyTheirsPath = "/bench-many-theirs/%04d" // the anchors' lock prefixes
	manyRawDir     = "/bench-many-raw/%04d"    // the raw writes' parents
)

// etcdManyImpls starts an etcd cluster for b and returns raw, ours and
// theirs on it, and what stops it (once done with it, so that it does not
// share the machine with the next store's servers).
func etcdManyImpls(b *testing.B) ([]manyImpl, func() error) {
	clus := integration.NewEtcd(b)
	// clients opens one client per contender's client, each with the
	// session newSession makes on it, and returns what closes them all.
	clients := func(ctx context.Context, mk func(ctx context.Context, cli *clientv3.Client) (pairer, func(), error)) ([]pairer, func(), error) {
		return openPairers(func(i int) (pairer, func(), error) {
			cli, err := clus.Client(i % len(clus.Members))
			if err != nil {
				return nil, nil, err
			}
			return withClose(mk(ctx, cli))(func() { cli.Close() })
		})
	}
	ourSession := func(ctx context.Context, cli *clientv3.Client) (*etcdlock.Session, func(), error) {
		s, err := etcdlock.NewSession(ctx, cli, etcdlock.WithTTL(sessionTTL))
		if err != nil {
			return nil, nil, err
		}
		return s, func() { s.Close(context.Background()) }, nil
	}
	return []manyImpl{
		{impl: "raw", name: "put+delete", open: func(ctx context.Context) ([]pairer, func(), error) {
			return clients(ctx, func(ctx context.Context, cli *clientv3.Client) (pairer, func(), error) {
				// The lease is an etcdlock session's, so that raw pays
				// for the same keepalives as ours.
				s, c, err := ourSession(ctx, cli)
				if err != nil {
					return nil, nil, err
				}
				return &etcdRawPairer{cli: cli, lease: s.ID()}, c, nil
			})
		}},
		{impl: "ours", name: "recipe.Mutex", excludes: true, open: func(ctx context.Context) ([]pairer, func(), error) {
			return clients(ctx, func(ctx context.Context, cli *clientv3.Client) (pairer, func(), error) {
				s, c, err := ourSession(ctx, cli)
				if err != nil {
					return nil, nil, err
				}
				return &oursPairer{ms: map[int]distlock.Locker{}, newMutex: func(name string) (distlock.Locker, error) {
					return recipe.NewMutex(s, name)
				}}, c, nil
			})
		}},
		{impl: "theirs", name: "concurrency.Mutex", excludes: true, open: func(ctx context.Context) ([]pairer, func(), error) {
			return clients(ctx, func(ctx context.Context, cli *clientv3.Client) (pairer, func(), error) {
				s, err := concurrency.NewSession(cli, concurrency.WithTTL(int(sessionTTL/time.Second)))
				if err != nil {
					return nil, nil, err
				}
				return &etcdTheirsPairer{s: s, ms: map[int]*concurrency.Mutex{}}, func() { s.Close() }, nil
			})
		}},
	}, clus.Close
}

// etcdRawPairer puts a key with the session's lease, then deletes it: the
// two writes every etcd lock needs, with nothing else.
type etcdRawPairer struct {
	cli   *clientv3.Client
	lease clientv3.LeaseID
}

func (p *etcdRawPairer) key(k int) string {
	return fmt.Sprintf(manyRawDir+"/%x", k, int64(p.lease))
}

func (p *etcdRawPairer) acquire(ctx context.Context, k int) error {
	_, err := p.cli.Put(ctx, p.key(k), "", clientv3.WithLease(p.lease))
	return err
}

func (p *etcdRawPairer) release(ctx context.Context, k int) error {
	_, err := p.cli.Delete(ctx, p.key(k))
	return err
}

// oursPairer locks our Mutexes, one per name, made on first use.
type oursPairer struct {
	newMutex func(name string) (distlock.Locker, error)
	ms       map[int]distlock.Locker
	held     *distlock.Lease
}

func (p *oursPairer) acquire(ctx context.Context, k int) error {
	m := p.ms[k]
	if m == nil {
		var err error
		if m, err = p.newMutex(fmt.Sprintf(manyOursName, k)); err != nil {
			return err
		}
		p.ms[k] = m
	}
	l, err := m.Lock(ctx)
	p.held = l
	return err
}

func (p *oursPairer) release(ctx context.Context, _ int) error {
	l := p.held
	p.held = nil
	return l.Unlock(ctx)
}

// etcdTheirsPairer locks concurrency.Mutexes, one per name, all on the
// client's one concurrency.Session.
type etcdTheirsPairer struct {
	s  *concurrency.Session
	ms map[int]*concurrency.Mutex
}

func (p *etcdTheirsPairer) mutex(k int) *concurrency.Mutex {
	m := p.ms[k]
	if m == nil {
		m = concurrency.NewMutex(p.s, fmt.Sprintf(manyTheirsPath, k))
		p.ms[k] = m
	}
	return m
}

func (p *etcdTheirsPairer) acquire(ctx context.Context, k int) error {
	return p.mutex(k).Lock(ctx)
}

func (p *etcdTheirsPairer) release(ctx context.Context, k int) error {
	return p.mutex(k).Unlock(ctx)
}

// zkManyImpls starts a ZooKeeper ensemble for b and returns raw, ours and
// theirs on it, and what stops it.
func zkManyImpls(b *testing.B) ([]manyImpl, func() error) {
	ens := integration.NewZooKeeper(b)
	conns := func(ctx context.Context, mk func(ctx context.Context, conn *zk.Conn) (pairer, func(), error)) ([]pairer, func(), error) {
		return openPairers(func(i int) (pairer, func(), error) {
			conn, _, err := ens.Connect(ctx, i%len(ens.Servers))
			if err != nil {
				return nil, nil, err
			}
			return withClose(mk(ctx, conn))(conn.Close)
		})
	}
	return []manyImpl{
		{impl: "raw", name: "create+delete", open: func(ctx context.Context) ([]pairer, func(), error) {
			ps, closeAll, err := conns(ctx, func(ctx context.Context, conn *zk.Conn) (pairer, func(), error) {
				return &zkRawPairer{conn: conn}, func() {}, nil
			})
			if err != nil {
				return nil, nil, err
			}
			// The parents exist beforehand: raw is the two writes of a
			// lock entry, nothing else.
			if err := zkManyParents(ps[0].(*zkRawPairer).conn); err != nil {
				closeAll()
				return nil, nil, err
			}
			return ps, closeAll, nil
		}},
		{impl: "ours", name: "recipe.Mutex", excludes: true, open: func(ctx context.Context) ([]pairer, func(), error) {
			return conns(ctx, func(ctx context.Context, conn *zk.Conn) (pairer, func(), error) {
				s, err := zklock.NewSession(ctx, conn, zklock.WithTickTime(integration.ZooKeeperTickTime))
				if err != nil {
					return nil, nil, err
				}
				return &oursPairer{ms: map[int]distlock.Locker{}, newMutex: func(name string) (distlock.Locker, error) {
					return recipe.NewMutex(s, name)
				}}, func() { s.Close(context.Background()) }, nil
			})
		}},
		{impl: "theirs", name: "zk.Lock", excludes: true, open: func(ctx context.Context) ([]pairer, func(), error) {
			return conns(ctx, func(ctx context.Context, conn *zk.Conn) (pairer, func(), error) {
				return &zkTheirsPairer{conn: conn, ls: map[int]*zk.Lock{}}, func() {}, nil
			})
		}},
	}, ens.Close
}

// zkManyParents creates the raw writes' parent znodes, persistent, once.
func zkManyParents(conn *zk.Conn) error {
	mk := func(path string) error {
		_, err := conn.Create(path, nil, 0, zk.WorldACL(zk.PermAll))
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("create %s: %w", path, err)
		}
		return nil
	}
	if err := mk("/bench-many-raw"); err != nil {
		return err
	}
	return parallel(manyNames, 16, func(k int) error { return mk(fmt.Sprintf(manyRawDir, k)) })
}

// zkRawPairer creates an ephemeral sequential znode under the name's
// parent, then deletes it: the two writes of a ZooKeeper lock entry.
// go-zookeeper's calls take no context; the connection's session timeout
// bounds them.
type zkRawPairer struct {
	conn *zk.Conn
	path string
}

func (p *zkRawPairer) acquire(_ context.Context, k int) error {
	path, err := p.conn.Create(fmt.Sprintf(manyRawDir, k)+"/n-", nil, zk.FlagEphemeralSequential, zk.WorldACL(zk.PermAll))
	p.path = path
	return err
}

func (p *zkRawPairer) release(context.Context, int) error {
	return p.conn.Delete(p.path, -1)
}

// zkTheirsPairer locks zk.Locks, one per name, made on first use.
type zkTheirsPairer struct {
	conn *zk.Conn
	ls   map[int]*zk.Lock
}

func (p *zkTheirsPairer) lock(k int) *zk.Lock {
	l := p.ls[k]
	if l == nil {
		l = zk.NewLock(p.conn, fmt.Sprintf(manyTheirsPath, k), zk.WorldACL(zk.PermAll))
		p.ls[k] = l
	}
	return l
}

func (p *zkTheirsPairer) acquire(_ context.Context, k int) error { return p.lock(k).Lock() }
func (p *zkTheirsPairer) release(_ context.Context, k int) error { return p.lock(k).Unlock() }

// openPairers opens one pairer per contender, open(i) making the i-th
// and what closes it, a few at a time; if any fails it closes those it
// opened. The returned function closes them all.
func openPairers(open func(i int) (pairer, func(), error)) ([]pairer, func(), error) {
	ps := make([]pairer, manyClients)
	closers := make([]func(), manyClients)
	closeAll := func() {
		parallel(manyClients, manyClients, func(i int) error {
			if closers[i] != nil {
				closers[i]()
			}
			return nil
		})
	}
	err := parallel(manyClients, 8, func(i int) error {
		p, c, err := open(i)
		ps[i], closers[i] = p, c
		return err
	})
	if err != nil {
		closeAll()
		return nil, nil, err
	}
	return ps, closeAll, nil
}

// withClose takes what a constructor on a connection returned and, given
// how to close the connection, returns it with a closer that closes the
// pairer and then the connection — or closes the connection at once if
// the constructor failed.
func withClose(p pairer, c func(), err error) func(closeConn func()) (pairer, func(), error) {
	return func(closeConn func()) (pairer, func(), error) {
		if err != nil {
			closeConn()
			return nil, nil, err
		}
		return p, func() { c(); closeConn() }, nil
	}
}
