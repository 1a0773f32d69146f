package etcdlock

import (
	"context"
	"fmt"

	"github.com/distlock/distlock"
)

// Mutex is a fair FIFO lock on etcd: waiters acquire in the order they
// enqueued, each watching only the entry just ahead of it. Every
// acquisition's fencing token is its key's create revision.
//
// A Mutex is a handle, safe for concurrent use: each Lock call enqueues its
// own entry, so goroutines sharing one Mutex (or one Session) exclude each
// other exactly like separate processes do.
type Mutex struct {
	s    *Session
	name string
}

var _ distlock.Locker = (*Mutex)(nil)

// NewMutex returns the lock called name (see distlock.ValidateName) on the
// session's client.
func NewMutex(s *Session, name string) (*Mutex, error) {
	if s == nil {
		return nil, fmt.Errorf("etcdlock: new mutex %q: %w: *Session is nil", name, distlock.ErrNilClient)
	}
	if err := distlock.ValidateName(name); err != nil {
		return nil, err
	}
	return &Mutex{s: s, name: name}, nil
}

// Name returns the lock's name.
func (m *Mutex) Name() string { return m.name }

// Session returns the session the lock's entries are bound to.
func (m *Mutex) Session() *Session { return m.s }

// Lock enqueues and waits until every earlier entry is gone. It fails,
// leaving no key behind, when ctx ends (the error wraps ctx's cause), when
// the session ends (distlock.ErrSessionExpired or ErrSessionClosed) or when
// its key is deleted by someone else (distlock.ErrEntryGone).
func (m *Mutex) Lock(ctx context.Context) (*distlock.Lease, error) {
	return m.s.acquire(ctx, m.name, distlock.Exclusive, false)
}

// TryLock acquires the lock only if no entry at all is queued, in one Txn
// that writes nothing otherwise; then the error wraps distlock.ErrLocked and
// names the holder's entry.
func (m *Mutex) TryLock(ctx context.Context) (*distlock.Lease, error) {
	return m.s.acquire(ctx, m.name, distlock.Exclusive, true)
}
