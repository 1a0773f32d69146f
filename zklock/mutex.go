package zklock

import (
	"context"
	"fmt"

	"github.com/distlock/distlock"
)

// Mutex is a fair FIFO lock on ZooKeeper: waiters acquire in the order they
// enqueued, each watching only the node just ahead of it. Every
// acquisition's fencing token is its node's czxid.
//
// A Mutex is a handle, safe for concurrent use: each Lock call creates its
// own node, so goroutines sharing one Mutex (or one Session) exclude each
// other exactly like separate processes do.
type Mutex struct {
	s    *Session
	name string
}

var _ distlock.Locker = (*Mutex)(nil)

// NewMutex returns the lock called name (see distlock.ValidateName) on the
// session's connection.
func NewMutex(s *Session, name string) (*Mutex, error) {
	if s == nil {
		return nil, fmt.Errorf("zklock: new mutex %q: %w: *Session is nil", name, distlock.ErrNilClient)
	}
	if err := distlock.ValidateName(name); err != nil {
		return nil, err
	}
	return &Mutex{s: s, name: name}, nil
}

// Name returns the lock's name.
func (m *Mutex) Name() string { return m.name }

// Session returns the session the lock's nodes belong to.
func (m *Mutex) Session() *Session { return m.s }

// Dir returns the znode under which the lock keeps its queue.
func (m *Mutex) Dir() string { return m.s.dir(m.name) }

// Lock enqueues and waits until every earlier entry is gone. It fails,
// leaving no node behind, when ctx ends (the error wraps ctx's cause), when
// the session ends (distlock.ErrSessionExpired or ErrSessionClosed) or when
// its node is deleted by someone else (distlock.ErrEntryGone).
func (m *Mutex) Lock(ctx context.Context) (*distlock.Lease, error) {
	return m.s.acquire(ctx, m.name, distlock.Exclusive, false)
}

// TryLock acquires the lock only if no other entry is queued, and returns
// an error wrapping distlock.ErrLocked that names the holder's node
// otherwise. ZooKeeper cannot compare the children and create in one
// operation, so TryLock first syncs and lists the directory (a loss to a
// visible entry writes nothing; a release that completed before the call
// is always seen), then creates its node and lists again; if an entry
// created meanwhile is ahead, it deletes its node before returning.
func (m *Mutex) TryLock(ctx context.Context) (*distlock.Lease, error) {
	return m.s.acquire(ctx, m.name, distlock.Exclusive, true)
}
