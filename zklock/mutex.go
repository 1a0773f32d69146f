package zklock

import "github.com/distlock/distlock/internal/qlock"

// Mutex is a fair FIFO lock on ZooKeeper: waiters acquire in the order they
// enqueued, each watching only the node just ahead of it. Every
// acquisition's fencing token is its node's czxid.
//
// Lock enqueues and waits until every earlier entry is gone; TryLock
// acquires only if no other entry is queued (ZooKeeper cannot compare the
// children and create in one operation: see TryLock). A Lock that fails
// (ctx ended, session ended, its node deleted by someone else:
// distlock.ErrEntryGone) leaves no node behind.
//
// A Mutex is a handle, safe for concurrent use: each Lock call creates its
// own node, so goroutines sharing one Mutex (or one Session) exclude each
// other exactly like separate processes do. It is not reentrant: a
// holder's second Lock waits for its first Lease's Unlock, so a goroutine
// that locks twice waits for itself. etcdlock.Mutex has the same methods:
// code that must work on both takes a distlock.Locker.
type Mutex struct{ q *qlock.Mutex }

// NewMutex returns the lock called name (see distlock.ValidateName) on the
// session's connection.
func NewMutex(s *Session, name string) (*Mutex, error) {
	e, err := s.engine("mutex", name)
	if err != nil {
		return nil, err
	}
	q, err := qlock.NewMutex(e, name)
	if err != nil {
		return nil, err
	}
	return &Mutex{q}, nil
}
