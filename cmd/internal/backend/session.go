package backend

import (
	"context"
	"errors"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/etcdlock"
	"github.com/distlock/distlock/recipe"
	"github.com/distlock/distlock/zklock"
)

// Session is a lock session of either backend: an etcdlock.Session or a
// zklock.Session, which share recipe.Session (Done, Err, TTL: the etcd
// lease's TTL, or the ZooKeeper session timeout the servers granted;
// Close) and take the same recipes.
type Session struct {
	session
	mutex    func(name string, opts ...distlock.LockOption) (distlock.Locker, error)
	multi    func(names []string) (distlock.Locker, error)
	rwmutex  func(name string) (RWLocker, error)
	election func(name string) (distlock.Elector, error)
	sem      func(name string, n int) (semaphore, error)
	marks    func(name string) (distlock.SlotMarks, error)
}

// semaphore is what both backends' semaphores have.
type semaphore interface {
	Acquire(ctx context.Context) (*distlock.Permit, error)
	TryAcquire(ctx context.Context) (*distlock.Permit, error)
}

// session is what both backends' sessions have.
type session interface {
	Done() <-chan struct{}
	Err() error
	TTL() time.Duration
	Close(ctx context.Context) error
}

// SessionOption changes a session NewSession starts.
type SessionOption func(*sessionOptions)

type sessionOptions struct {
	revocable bool
}

// Revocable makes the session's holders revocable (etcdlock.WithRevocable,
// zklock.WithRevocable): when an operator revokes a lock one of them
// holds (Client.Revoke, distlock revoke), its Lease's Done closes with a
// *distlock.RevokedError while the lock is still held; the holder is
// expected to finish and Unlock within the revocation's grace period.
// It costs each held lock one watch (etcd) or one read (ZooKeeper).
func Revocable() SessionOption { return func(o *sessionOptions) { o.revocable = true } }

// NewSession starts a lock session whose entries carry holder (what the
// lock's queue says about who holds or waits).
func (c *Client) NewSession(ctx context.Context, holder string, opts ...SessionOption) (*Session, error) {
	var so sessionOptions
	for _, o := range opts {
		o(&so)
	}
	if c.etcd != nil {
		eopts := []recipe.Option{etcdlock.WithTTL(c.cfg.TTL), recipe.WithPrefix(c.prefix), recipe.WithHolder(holder), recipe.WithLogger(c.cfg.Logger)}
		if so.revocable {
			eopts = append(eopts, recipe.WithRevocable())
		}
		s, err := etcdlock.NewSession(ctx, c.etcd, eopts...)
		if err != nil {
			return nil, err
		}
		return &Session{session: s,
			mutex: func(name string, opts ...distlock.LockOption) (distlock.Locker, error) {
				m, err := recipe.NewMutex(s, name, opts...)
				if err != nil {
					return nil, err // not a nil *Mutex in the interface
				}
				return m, nil
			},
			multi: func(names []string) (distlock.Locker, error) {
				m, err := recipe.NewMultiMutex(s, names...)
				if err != nil {
					return nil, err // not a nil *MultiMutex in the interface
				}
				return m, nil
			},
			rwmutex:  func(name string) (RWLocker, error) { return recipe.NewRWMutex(s, name) },
			election: func(name string) (distlock.Elector, error) { return recipe.NewElection(s, name) },
			sem:      func(name string, n int) (semaphore, error) { return recipe.NewSemaphore(s, name, n) },
			marks: func(name string) (distlock.SlotMarks, error) {
				m, err := recipe.NewMarks(s, name)
				if err != nil {
					return nil, err // not a nil *Marks in the interface
				}
				return m, nil
			},
		}, nil
	}
	zopts := []recipe.Option{recipe.WithPrefix(c.prefix), recipe.WithHolder(holder), zklock.WithACL(c.acl), recipe.WithLogger(c.cfg.Logger)}
	if c.cfg.TickTime > 0 {
		zopts = append(zopts, zklock.WithTickTime(c.cfg.TickTime))
	}
	if so.revocable {
		zopts = append(zopts, recipe.WithRevocable())
	}
	s, err := zklock.NewSession(ctx, c.zk, zopts...)
	for try := 0; errors.Is(err, distlock.ErrSessionExpired) && try < 3 && ctx.Err() == nil; try++ {
		// The connection's ZooKeeper session expired while the Session
		// was being made (a loaded machine, a server that restarted):
		// the connection has a new one, which a new Session follows.
		s, err = zklock.NewSession(ctx, c.zk, zopts...)
	}
	if err != nil {
		return nil, err
	}
	return &Session{session: s,
		mutex: func(name string, opts ...distlock.LockOption) (distlock.Locker, error) {
			m, err := recipe.NewMutex(s, name, opts...)
			if err != nil {
				return nil, err // not a nil *Mutex in the interface
			}
			return m, nil
		},
		multi: func(names []string) (distlock.Locker, error) {
			m, err := recipe.NewMultiMutex(s, names...)
			if err != nil {
				return nil, err // not a nil *MultiMutex in the interface
			}
			return m, nil
		},
		rwmutex:  func(name string) (RWLocker, error) { return recipe.NewRWMutex(s, name) },
		election: func(name string) (distlock.Elector, error) { return recipe.NewElection(s, name) },
		sem:      func(name string, n int) (semaphore, error) { return recipe.NewSemaphore(s, name, n) },
		marks: func(name string) (distlock.SlotMarks, error) {
			m, err := recipe.NewMarks(s, name)
			if err != nil {
				return nil, err // not a nil *Marks in the interface
			}
			return m, nil
		},
	}, nil
}

// Mutex returns the exclusive lock called name, its entries in the
// compatibility mode opts set (distlock.WithCompat).
func (s *Session) Mutex(name string, opts ...distlock.LockOption) (distlock.Locker, error) {
	return s.mutex(name, opts...)
}

// MultiMutex returns the lock on all of names at once (etcdlock and
// zklock NewMultiMutex): one acquisition that holds every name or none,
// and cannot deadlock whatever order callers give the names in. Its
// Lease holds one token per name (Lease.Tokens, sorted by name); its
// errors name the lock as the names joined by "+". Its entries are
// ordinary Mutex entries, one in each name's queue, so it excludes (and
// is excluded by) the Mutex of each of its names.
func (s *Session) MultiMutex(names ...string) (distlock.Locker, error) { return s.multi(names) }

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
func (s *Session) RWMutex(name string) (RWLocker, error) { return s.rwmutex(name) }

// Election returns the election called name.
func (s *Session) Election(name string) (distlock.Elector, error) { return s.election(name) }

// Marks returns the done-markers of lock name's slots (see
// distlock.Once), on the session's client, prefix and ACL.
func (s *Session) Marks(name string) (distlock.SlotMarks, error) { return s.marks(name) }

// SemaphoreLocker returns the semaphore called name, of n permits, as a
// Locker whose Lock and TryLock are Acquire and TryAcquire, and whose
// leases are the permits' (Token is the slot's; see distlock.Permit):
// for code that takes a Locker (distlock run --permits, the harness's
// holder process).
func (s *Session) SemaphoreLocker(name string, n int) (distlock.Locker, error) {
	m, err := s.sem(name, n)
	if err != nil {
		return nil, err
	}
	return permitLocker{m}, nil
}

type permitLocker struct{ s semaphore }

func (p permitLocker) Lock(ctx context.Context) (*distlock.Lease, error) {
	return leaseOf(p.s.Acquire(ctx))
}

func (p permitLocker) TryLock(ctx context.Context) (*distlock.Lease, error) {
	return leaseOf(p.s.TryAcquire(ctx))
}

func leaseOf(p *distlock.Permit, err error) (*distlock.Lease, error) {
	if err != nil {
		return nil, err
	}
	return p.Lease, nil
}
