package zklock

import (
	"context"
	"fmt"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/qlock"
	"github.com/distlock/distlock/internal/qlock/zkq"
	"github.com/go-zookeeper/zk"
)

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

// RWMutex is a fair FIFO readers-writer lock on ZooKeeper: any number of
// readers may hold it together, a writer holds it alone. Readers ("@r-…"
// nodes) and writers ("@w-…") share one directory with the Mutex of the
// same name and acquire in the order they enqueued: a reader waits only on
// the nearest writer ahead of it (so a stream of new readers cannot starve
// a writer), a writer only on its immediate predecessor, each with one
// data watch.
//
// Its methods: RLock, TryRLock, Lock, TryLock (as Mutex's), RLocker (a
// distlock.Locker of the read side), Name and Dir. Tokens and fencing are
// as for etcdlock.RWMutex: a reader's czxid is ordered against writers'
// only, so readers must not record their tokens in a writers' fence.
type RWMutex = qlock.RWMutex

// NewRWMutex returns the readers-writer lock called name (see
// distlock.ValidateName) on the session's connection.
func NewRWMutex(s *Session, name string) (*RWMutex, error) {
	return qlock.NewRWMutex("zklock", s.driver(), name)
}

// Election is a leader election on ZooKeeper, on the same queue mechanism
// as Mutex: each Campaign creates one ephemeral sequential node
// "@e-<guid>-<seq>" in the election's directory, whose data is the
// candidate's value, and the oldest one leads. The leader's fencing token
// is its node's czxid. Uncontended, a Campaign costs what Mutex.Lock
// costs: the create, then the listing and the read of its own node's Stat,
// sent together.
//
// An election's waiters differ from a Mutex's in one thing: a leader
// changes its node's data without leaving (Proclaim, a SetData with the
// version it last wrote), so a waiter that sees its predecessor's data
// change only learns that the predecessor led (nothing older is left) and
// reads it again to see whether it is gone. That is why candidates have a
// marker of their own: lock queues ignore them and elections ignore lock
// entries, even in a directory of the same name.
//
// Its methods: Campaign, Leader (the oldest node's data and czxid, read
// after a Sync), Observe (child and data watches, re-armed after each
// event; it needs only the connection, so it works after the session
// ended), Name and Dir.
type Election = qlock.Election

// NewElection returns the election called name (see distlock.ValidateName)
// on the session's connection.
func NewElection(s *Session, name string) (*Election, error) {
	return qlock.NewElection("zklock", s.driver(), name)
}

// Inspect returns the queue of the lock called name under the znode prefix
// prefix (DefaultPrefix if empty), without joining it: the holder first,
// then the waiters in the order they will hold (QueueEntry.Holding says
// which hold). It syncs the lock's directory with the leader, lists it,
// and reads every entry (the reads go out together); entries deleted
// between the listing and their read are left out, and children that are
// not lock entries are ignored. An Election's candidates ("@e-…" nodes)
// are listed the same way, as exclusive entries whose Holder is the
// candidate's value; give a lock and an election different names, or
// their entries are listed together.
//
// Each entry's Token is the node's czxid (the fencing token it has or will
// have), Owner its ephemeral owner's session ID in hex, Holder its data,
// and Created its ctime.
func Inspect(ctx context.Context, conn *zk.Conn, prefix, name string) ([]distlock.QueueEntry, error) {
	if conn == nil {
		return nil, fmt.Errorf("zklock: inspect %q: %w: *zk.Conn is nil", name, distlock.ErrNilClient)
	}
	if err := distlock.ValidateName(name); err != nil {
		return nil, fmt.Errorf("zklock: inspect: %w", err)
	}
	if prefix == "" {
		prefix = DefaultPrefix
	}
	if err := zkq.CheckPrefix(prefix); err != nil {
		return nil, fmt.Errorf("zklock: inspect %q: %w", name, err)
	}
	q, err := zkq.Inspect(ctx, conn, prefix, name)
	if err != nil {
		return nil, fmt.Errorf("zklock: inspect %q: %w", name, err)
	}
	return q, nil
}
