package interop

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/recipe"
	"github.com/go-zookeeper/zk"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	recipes "go.etcd.io/etcd/client/v3/experimental/recipes"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3election/v3electionpb"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3lock/v3lockpb"
	"go.uber.org/zap"
)

// acquireFunc asks for a lock, blocking until it is held, and returns
// how to release it. ctx ends with the holder (Close).
type acquireFunc func(ctx context.Context) (release func(ctx context.Context) error, err error)

// funcHolder runs an in-process client's acquire in a goroutine.
type funcHolder struct {
	state
	acquire acquireFunc
	cleanup func()

	ctx     context.Context
	cancel  context.CancelFunc
	mu      sync.Mutex
	release func(ctx context.Context) error
	done    chan struct{}
}

func newFunc(name string, acquire acquireFunc, cleanup func()) *funcHolder {
	return &funcHolder{state: newState(name), acquire: acquire, cleanup: cleanup, done: make(chan struct{})}
}

// Start calls acquire in the background: the request goes out at once.
func (f *funcHolder) Start(ctx context.Context) error {
	f.ctx, f.cancel = context.WithCancel(context.Background())
	go func() {
		defer close(f.done)
		rel, err := f.acquire(f.ctx)
		if err != nil {
			f.failWith(err)
			return
		}
		at := time.Now()
		f.mu.Lock()
		f.release = rel
		f.mu.Unlock()
		f.grant(at)
	}()
	return nil
}

// Release gives a held lock back.
func (f *funcHolder) Release(ctx context.Context) error {
	if err := WaitGranted(ctx, f); err != nil {
		return err
	}
	f.mu.Lock()
	rel := f.release
	f.mu.Unlock()
	if err := rel(ctx); err != nil {
		return fmt.Errorf("interop: %s: release: %w", f.name, err)
	}
	f.markReleased()
	return nil
}

// Close abandons a pending request and closes the client.
func (f *funcHolder) Close() error {
	if f.cancel != nil {
		f.cancel()
		<-f.done
	}
	if f.cleanup != nil {
		f.cleanup()
	}
	return nil
}

// GoZK returns a go-zookeeper zk.Lock holder on the znode path, on a
// connection of its own to servers.
func GoZK(servers []string, path string) Holder {
	var conn *zk.Conn
	return newFunc("go-zookeeper Lock", func(ctx context.Context) (func(context.Context) error, error) {
		c, err := connectZK(ctx, servers)
		if err != nil {
			return nil, err
		}
		conn = c
		// zk.Lock takes no context: closing the connection when the
		// holder closes ends a pending Lock.
		go func() {
			<-ctx.Done()
			c.Close()
		}()
		l := zk.NewLock(c, path, zk.WorldACL(zk.PermAll))
		if err := l.Lock(); err != nil {
			return nil, err
		}
		return func(context.Context) error { return l.Unlock() }, nil
	}, func() {
		if conn != nil {
			conn.Close()
		}
	})
}

func connectZK(ctx context.Context, servers []string) (*zk.Conn, error) {
	c, events, err := zk.Connect(servers, 30*time.Second, zk.WithLogger(quiet{}))
	if err != nil {
		return nil, err
	}
	for {
		select {
		case ev := <-events:
			if ev.State == zk.StateHasSession {
				go func() {
					for range events {
					}
				}()
				return c, nil
			}
		case <-ctx.Done():
			c.Close()
			return nil, ctx.Err()
		}
	}
}

type quiet struct{}

func (quiet) Printf(string, ...any) {}

// etcdFunc is an etcd client's holder: a client and a session of its
// own, closed with the holder.
func etcdFunc(name string, endpoints []string, acquire func(ctx context.Context, cli *clientv3.Client, s *concurrency.Session) (func(context.Context) error, error)) Holder {
	var cli *clientv3.Client
	var s *concurrency.Session
	return newFunc(name, func(ctx context.Context) (func(context.Context) error, error) {
		var err error
		if cli, err = clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 10 * time.Second, Logger: zap.NewNop()}); err != nil {
			return nil, err
		}
		if s, err = concurrency.NewSession(cli, concurrency.WithTTL(10), concurrency.WithContext(context.Background())); err != nil {
			return nil, err
		}
		return acquire(ctx, cli, s)
	}, func() {
		if s != nil {
			s.Close()
		}
		if cli != nil {
			cli.Close()
		}
	})
}

// EtcdMutex returns an etcd concurrency.Mutex holder of pfx.
func EtcdMutex(endpoints []string, pfx string) Holder {
	return etcdFunc("etcd concurrency.Mutex", endpoints, func(ctx context.Context, _ *clientv3.Client, s *concurrency.Session) (func(context.Context) error, error) {
		m := concurrency.NewMutex(s, pfx)
		if err := m.Lock(ctx); err != nil {
			return nil, err
		}
		return m.Unlock, nil
	})
}

// EtcdElection returns an etcd concurrency.Election candidate of pfx.
func EtcdElection(endpoints []string, pfx string) Holder {
	return etcdFunc("etcd concurrency.Election", endpoints, func(ctx context.Context, _ *clientv3.Client, s *concurrency.Session) (func(context.Context) error, error) {
		e := concurrency.NewElection(s, pfx)
		if err := e.Campaign(ctx, "concurrency"); err != nil {
			return nil, err
		}
		return e.Resign, nil
	})
}

// EtcdRWMutex returns a recipes.RWMutex holder of pfx, a writer or a
// reader. The recipe takes no context and waits on watches of its own
// that only a closed client ends: closing the holder's client ends a
// pending request.
func EtcdRWMutex(endpoints []string, pfx string, write bool) Holder {
	name := "etcd recipes.RWMutex read"
	if write {
		name = "etcd recipes.RWMutex write"
	}
	return etcdFunc(name, endpoints, func(ctx context.Context, _ *clientv3.Client, s *concurrency.Session) (func(context.Context) error, error) {
		m := recipes.NewRWMutex(s, pfx)
		lock, unlock := m.RLock, m.RUnlock
		if write {
			lock, unlock = m.Lock, m.Unlock
		}
		errc := make(chan error, 1)
		go func() { errc <- lock() }()
		select {
		case err := <-errc:
			if err != nil {
				return nil, err
			}
		case <-ctx.Done():
			s.Client().Close()
			<-errc
			return nil, ctx.Err()
		}
		return func(context.Context) error { return unlock() }, nil
	})
}

// V3Lock returns a holder of name through etcd's v3lock gRPC service
// (the server-side concurrency.Mutex that etcdctl lock uses too).
func V3Lock(endpoints []string, name string) Holder {
	return etcdFunc("etcd v3lock", endpoints, func(ctx context.Context, cli *clientv3.Client, s *concurrency.Session) (func(context.Context) error, error) {
		lc := v3lockpb.NewLockClient(cli.ActiveConnection())
		resp, err := lc.Lock(ctx, &v3lockpb.LockRequest{Name: []byte(name), Lease: int64(s.Lease())})
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context) error {
			_, err := lc.Unlock(ctx, &v3lockpb.UnlockRequest{Key: resp.Key})
			return err
		}, nil
	})
}

// V3Election returns a candidate of name through etcd's v3election gRPC
// service.
func V3Election(endpoints []string, name string) Holder {
	return etcdFunc("etcd v3election", endpoints, func(ctx context.Context, cli *clientv3.Client, s *concurrency.Session) (func(context.Context) error, error) {
		ec := v3electionpb.NewElectionClient(cli.ActiveConnection())
		resp, err := ec.Campaign(ctx, &v3electionpb.CampaignRequest{Name: []byte(name), Lease: int64(s.Lease()), Value: []byte("v3election")})
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context) error {
			_, err := ec.Resign(ctx, &v3electionpb.ResignRequest{Leader: resp.Leader})
			return err
		}, nil
	})
}

// Kind is which of distlock's recipes a distlock holder uses.
type Kind string

// The recipes a distlock holder can use: a Mutex, an RWMutex's writer
// or reader, an Election's candidate.
const (
	KindMutex    Kind = "mutex"
	KindWrite    Kind = "write"
	KindRead     Kind = "read"
	KindElection Kind = "election"
)

// Distlock returns a distlock holder of the lock name in kind, on a
// session that newSession opens (and closes with the holder), so each
// holder is an owner of its own.
func Distlock(label string, kind Kind, name string, newSession func(ctx context.Context) (recipe.Backend, func(), error)) Holder {
	return DistlockCompat(label, kind, name, "", newSession)
}

// DistlockCompat is Distlock with the lock (or election) in compatibility
// mode c: its entries named as c's foreign recipe names its own.
func DistlockCompat(label string, kind Kind, name string, c distlock.Compat, newSession func(ctx context.Context) (recipe.Backend, func(), error)) Holder {
	var closeSession func()
	title := fmt.Sprintf("distlock %s %s", label, kind)
	var lockOpts []distlock.LockOption
	var electionOpts []distlock.ElectionOption
	if c != "" {
		title += " (compat " + c.String() + ")"
		lockOpts = append(lockOpts, distlock.WithCompat(c))
		electionOpts = append(electionOpts, distlock.WithElectionCompat(c))
	}
	return newFunc(title, func(ctx context.Context) (func(context.Context) error, error) {
		s, cl, err := newSession(ctx)
		if err != nil {
			return nil, err
		}
		closeSession = cl
		var lease *distlock.Lease
		switch kind {
		case KindMutex:
			m, err := recipe.NewMutex(s, name, lockOpts...)
			if err != nil {
				return nil, err
			}
			lease, err = m.Lock(ctx)
			if err != nil {
				return nil, err
			}
		case KindWrite, KindRead:
			m, err := recipe.NewRWMutex(s, name, lockOpts...)
			if err != nil {
				return nil, err
			}
			if kind == KindWrite {
				lease, err = m.Lock(ctx)
			} else {
				lease, err = m.RLock(ctx)
			}
			if err != nil {
				return nil, err
			}
		case KindElection:
			e, err := recipe.NewElection(s, name, electionOpts...)
			if err != nil {
				return nil, err
			}
			l, err := e.Campaign(ctx, "distlock")
			if err != nil {
				return nil, err
			}
			return l.Resign, nil
		default:
			return nil, errors.New("unknown kind " + string(kind))
		}
		return lease.Unlock, nil
	}, func() {
		if closeSession != nil {
			closeSession()
		}
	})
}
