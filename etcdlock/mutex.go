package etcdlock

import "github.com/distlock/distlock/internal/qlock"

// Mutex is a fair FIFO lock on etcd: waiters acquire in the order they
// enqueued, each watching only the key just ahead of it. Every
// acquisition's fencing token is its key's create revision.
//
// Lock enqueues and waits until every earlier entry is gone; TryLock
// acquires only if no entry at all is queued, in one Txn that writes
// nothing otherwise. A Lock that fails (ctx ended, session ended, its key
// deleted by someone else: distlock.ErrEntryGone) leaves no key behind.
//
// A Mutex is a handle, safe for concurrent use: each Lock call enqueues its
// own key, so goroutines sharing one Mutex (or one Session) exclude each
// other exactly like separate processes do. It is not reentrant: a
// holder's second Lock waits for its first Lease's Unlock, so a goroutine
// that locks twice waits for itself. zklock.Mutex has the same methods:
// code that must work on both takes a distlock.Locker.
type Mutex struct{ q *qlock.Mutex }

// NewMutex returns the lock called name (see distlock.ValidateName) on the
// session's client.
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
