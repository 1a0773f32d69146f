package zklock

import "github.com/distlock/distlock/internal/qlock"

// Mutex is a fair FIFO lock on ZooKeeper: waiters acquire in the order they
// enqueued, each watching only the node just ahead of it. Every
// acquisition's fencing token is its node's czxid.
//
// Its methods: Lock enqueues and waits until every earlier entry is gone;
// TryLock acquires only if no other entry is queued (ZooKeeper cannot
// compare the children and create in one operation, so TryLock first syncs
// and lists the directory — a loss to a visible entry writes nothing, and
// a release that completed before the call is always seen — then creates
// its node and lists again; if an entry created meanwhile is ahead, it
// deletes its node before returning an error wrapping distlock.ErrLocked);
// Name and Dir (the lock's directory znode). A Lock that fails (ctx ended,
// session ended, its node deleted by someone else: distlock.ErrEntryGone)
// leaves no node behind.
//
// A Mutex is a handle, safe for concurrent use: each Lock call creates its
// own node, so goroutines sharing one Mutex (or one Session) exclude each
// other exactly like separate processes do. It is the same type as
// etcdlock.Mutex: one engine serves both stores.
type Mutex = qlock.Mutex

// NewMutex returns the lock called name (see distlock.ValidateName) on the
// session's connection.
func NewMutex(s *Session, name string) (*Mutex, error) {
	return qlock.NewMutex("zklock", s.driver(), name)
}
