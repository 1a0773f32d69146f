package qlock

import (
	"context"
	"strings"

	"github.com/distlock/distlock"
)

// The multi-lock: one acquisition of several locks, deadlock-free by
// construction. It is the one acquisition path (lifecycle.go) over an
// entry set of one entry per name: this file only says how its entries
// are made and why waiting for them cannot deadlock.
//
// Its entries, one per name, are made in one atomic write (one etcd Txn,
// one ZooKeeper multi), so they share one position in the store's global
// order: one create revision, one czxid. Every entry another acquisition
// waits on is older than its own entries, in every queue, because a queue
// is ordered by creation. Waits therefore always point from a newer
// acquisition to a strictly older one, and no cycle of waits can form,
// whatever order callers list the names in and however multi-locks and
// plain Mutexes of the same names mix. So the waiter can wait for its
// names in any way, each exactly as a Mutex waits (one predecessor at a
// time): a queue's view only shrinks, so a name whose queue is clear
// stays clear while the waiter waits for the others. It waits on the
// newest entry ahead of any of its own (on ZooKeeper, whose positions are
// per queue, a guess as good as any), and after each wait refreshes all
// its views with one read (see the engine's wait).
//
// The entries are the Mutex's (Exclusive), in the Mutex's queues: a
// multi-lock and a Mutex of one of its names exclude each other.

// Multi is how a store makes an entry set: the engine makes every
// acquisition's entries with it (a Mutex's, a set of one, too), so a
// multi-lock's differ from a Mutex's only in number.
type Multi interface {
	// EnqueueAll creates r's entries, one in the queue of each of names,
	// in one atomic write, so that they share one position in the store's
	// global order (and one Token), and returns them in names' order, each
	// with the entries of its queue as Enqueue returns them. A driver
	// whose store can compare and create at once refuses a Try request
	// that would wait on any name with an error wrapping
	// distlock.ErrLocked, and writes nothing. On failure nothing is left
	// behind.
	EnqueueAll(ctx context.Context, names []string, r Request) ([]Enqueued, error)
}

// Enqueued is one entry of an EnqueueAll, with what its queue showed.
type Enqueued struct {
	Node  *Node
	Ahead []Entry
	More  bool
}

// MultiMutex is a lock on several names at once: it holds all of them or
// none, and waits without ever deadlocking (see above).
type MultiMutex struct {
	e     *Engine
	names []string // sorted
	label string   // the names joined by "+", as errors name the lock
	tel   *lockTel
}

var _ distlock.Locker = (*MultiMutex)(nil)

// NewMultiMutex returns the multi-lock of names on e's session: one to
// distlock.MaxMultiNames valid names, none twice, in any order.
func NewMultiMutex(e *Engine, names ...string) (*MultiMutex, error) {
	sorted, err := distlock.ValidateNames(names)
	if err != nil {
		return nil, e.st.backend.named(err)
	}
	label := strings.Join(sorted, "+")
	return &MultiMutex{e: e, names: sorted, label: label, tel: e.st.tel.forLock(label, "multimutex")}, nil
}

// Names returns the lock's names, sorted.
func (m *MultiMutex) Names() []string { return append([]string(nil), m.names...) }

// Dirs returns where the lock's entries are kept, one place per name, in
// Names' order.
func (m *MultiMutex) Dirs() []string {
	out := make([]string, len(m.names))
	for i, n := range m.names {
		out[i] = m.e.d.Dir(n)
	}
	return out
}

// Lock enqueues one entry per name in one write and waits until, in every
// name's queue, no earlier entry is left.
func (m *MultiMutex) Lock(ctx context.Context) (*distlock.Lease, error) {
	return m.take(ctx, false)
}

// TryLock takes the lock only if no name has an entry queued; otherwise
// it returns an error wrapping distlock.ErrLocked that names the entry
// ahead, leaving nothing behind.
func (m *MultiMutex) TryLock(ctx context.Context) (*distlock.Lease, error) {
	return m.take(ctx, true)
}

// take is Lock and TryLock: the one acquisition path (lifecycle.go) over
// one entry per name.
func (m *MultiMutex) take(ctx context.Context, try bool) (*distlock.Lease, error) {
	r := Request{Op: distlock.OpLock, Kind: Exclusive, Try: try, Value: []byte(m.e.st.holder)}
	if try {
		r.Op = distlock.OpTryLock
	}
	_, lease, err := m.e.take(ctx, m.tel, m.label, r, hooks{}, func(ctx context.Context) ([]*Node, queueStats, error) {
		return m.e.acquire(ctx, m.label, m.names, r, hooks{})
	})
	return lease, err
}
