package recipe

import (
	"context"
	"strings"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/qlock"
)

// MultiMutex is a lock on several names at once: it holds all of them or
// none. Its entries are one per name, made in one write (one etcd Txn at
// one revision, one ZooKeeper multi), in the queues of the Mutexes of the
// same names.
//
// Taking several Mutexes one after another deadlocks unless every caller
// agrees on one order; a MultiMutex cannot deadlock, whatever order its
// callers list the names in, and mixes freely with the Mutexes of its
// names (see Lock). It is a handle, safe for concurrent use, and not
// reentrant, like a Mutex.
type MultiMutex struct{ q *qlock.MultiMutex }

// NewMultiMutex returns the lock on names (each valid, see
// distlock.ValidateName; none twice; at most distlock.MaxMultiNames; in
// any order) on the session s.
func NewMultiMutex(s Backend, names ...string) (*MultiMutex, error) {
	ss, err := session(s, "multi-mutex", strings.Join(names, "+"))
	if err != nil {
		return nil, err
	}
	q, err := qlock.NewMultiMutex(ss.e, names...)
	if err != nil {
		return nil, err
	}
	return &MultiMutex{q}, nil
}

// Lock takes every one of the lock's names, waiting in FIFO order behind
// the earlier acquisitions of each: it makes one entry per name in one
// write and waits in every name's queue at once, watching only the entry
// just ahead in each. Its entries are a Mutex's: a Mutex of one of the
// names waits for it, and it for the Mutex, in one queue.
//
// Waiting cannot deadlock, whatever order callers list the names in:
// entries made in one write are ordered as one in the store's global
// order, so every acquisition waits only on strictly older ones.
//
// The returned Lease holds one token per name (Lease.Tokens, sorted by
// name) and is lost as a whole: when any entry is lost, Done closes with
// the cause and the name. Unlock deletes every entry. It fails, leaving no
// entry behind, as Mutex.Lock does, and is not reentrant.
func (m *MultiMutex) Lock(ctx context.Context) (*distlock.Lease, error) { return m.q.Lock(ctx) }

// TryLock takes the lock only if no name has an entry queued; otherwise it
// returns an error wrapping distlock.ErrLocked that names the entry
// ahead, and leaves nothing behind.
func (m *MultiMutex) TryLock(ctx context.Context) (*distlock.Lease, error) { return m.q.TryLock(ctx) }

// Names returns the lock's names, sorted.
func (m *MultiMutex) Names() []string { return m.q.Names() }

// Dirs returns where its entries are kept, one place per name in Names'
// order, as Mutex.Dir.
func (m *MultiMutex) Dirs() []string { return m.q.Dirs() }
