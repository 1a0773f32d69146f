package backend

import (
	"context"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/etcdlock"
	"github.com/distlock/distlock/zklock"
)

// Session is a lock session of either backend: an etcdlock.Session or a
// zklock.Session.
type Session struct {
	etcd *etcdlock.Session
	zk   *zklock.Session
}

// NewSession starts a lock session whose entries carry holder (what the
// lock's queue says about who holds or waits).
func (c *Client) NewSession(ctx context.Context, holder string) (*Session, error) {
	if c.etcd != nil {
		s, err := etcdlock.NewSession(ctx, c.etcd, etcdlock.WithTTL(c.cfg.TTL), etcdlock.WithPrefix(c.prefix), etcdlock.WithHolder(holder), etcdlock.WithLogger(c.cfg.Logger))
		if err != nil {
			return nil, err
		}
		return &Session{etcd: s}, nil
	}
	opts := []zklock.Option{zklock.WithPrefix(c.prefix), zklock.WithHolder(holder), zklock.WithACL(c.acl), zklock.WithLogger(c.cfg.Logger)}
	if c.cfg.TickTime > 0 {
		opts = append(opts, zklock.WithTickTime(c.cfg.TickTime))
	}
	s, err := zklock.NewSession(ctx, c.zk, opts...)
	if err != nil {
		return nil, err
	}
	return &Session{zk: s}, nil
}

// Done is closed when the session ends (closed, expired or lost).
func (s *Session) Done() <-chan struct{} {
	if s.etcd != nil {
		return s.etcd.Done()
	}
	return s.zk.Done()
}

// Err says why the session ended, nil while it lives.
func (s *Session) Err() error {
	if s.etcd != nil {
		return s.etcd.Err()
	}
	return s.zk.Err()
}

// TTL returns the etcd lease's TTL, or the ZooKeeper session timeout the
// servers granted: how long a holder that stopped keeps its locks.
func (s *Session) TTL() time.Duration {
	if s.etcd != nil {
		return s.etcd.TTL()
	}
	return s.zk.Timeout()
}

// Close ends the session; its entries go with it.
func (s *Session) Close(ctx context.Context) error {
	if s.etcd != nil {
		return s.etcd.Close(ctx)
	}
	return s.zk.Close(ctx)
}

// Mutex returns the exclusive lock called name.
func (s *Session) Mutex(name string) (distlock.Locker, error) {
	if s.etcd != nil {
		return etcdlock.NewMutex(s.etcd, name)
	}
	return zklock.NewMutex(s.zk, name)
}

// RWLocker is a readers-writer lock: Lock and TryLock take it exclusively,
// RLock and TryRLock shared.
type RWLocker interface {
	distlock.Locker
	RLock(ctx context.Context) (*distlock.Lease, error)
	TryRLock(ctx context.Context) (*distlock.Lease, error)
	// RLocker returns a Locker whose Lock and TryLock take the lock
	// shared.
	RLocker() distlock.Locker
}

// RWMutex returns the readers-writer lock called name.
func (s *Session) RWMutex(name string) (RWLocker, error) {
	if s.etcd != nil {
		return etcdlock.NewRWMutex(s.etcd, name)
	}
	return zklock.NewRWMutex(s.zk, name)
}

// Election returns the election called name.
func (s *Session) Election(name string) (distlock.Elector, error) {
	if s.etcd != nil {
		return etcdlock.NewElection(s.etcd, name)
	}
	return zklock.NewElection(s.zk, name)
}
