package qlock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/distlock/distlock"
)

// The multi-lock: one acquisition of several locks, deadlock-free by
// construction.
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
// stays clear while the waiter waits for the others. It waits for them
// together.
//
// The entries are the Mutex's (Exclusive), in the Mutex's queues: a
// multi-lock and a Mutex of one of its names exclude each other.

// Multi is a store's part of the multi-lock.
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

// take is Lock and TryLock, traced and measured from start to end.
func (m *MultiMutex) take(ctx context.Context, try bool) (*distlock.Lease, error) {
	r := Request{Op: distlock.OpLock, Kind: Exclusive, Try: try, Value: []byte(m.e.st.holder)}
	if try {
		r.Op = distlock.OpTryLock
	}
	tctx, a := m.tel.begin(ctx, r.Op, r.Kind)
	ns, qs, err := m.e.acquireAll(tctx, m.label, m.names, r)
	if err == nil {
		if err = m.e.pastDeadline(); err != nil {
			for _, n := range ns {
				m.e.abandon(n, err)
			}
			err = m.e.fail(m.label, r.Op, err)
			ns = nil
		}
	}
	a.saw(qs)
	var first *Node
	if len(ns) > 0 {
		first = ns[0]
	}
	a.end(first, ctx.Err() != nil, err)
	if err != nil {
		return nil, err
	}
	return m.e.holdAll(ns, m.tel), nil
}

// entryLost says which name's entry ended a multi-lock's wait or hold.
func entryLost(name string, cause error) error {
	if errors.Is(cause, distlock.ErrReleased) {
		return cause
	}
	return fmt.Errorf("entry of lock %q: %w", name, cause)
}

// acquireAll is acquire for a multi-lock (label) of names: one EnqueueAll,
// then each name's wait in turn (steps 1 to 4 of lifecycle.go). Any
// entry's end ends the whole acquisition; on failure every entry is
// removed.
func (e *Engine) acquireAll(ctx context.Context, label string, names []string, r Request) (_ []*Node, qs queueStats, _ error) {
	ctx, done, fail, err := e.start(ctx, label, r.Op)
	defer done()
	if err != nil {
		return nil, qs, err
	}
	es, err := e.d.EnqueueAll(ctx, names, r)
	if err != nil {
		return nil, qs, fail(err)
	}
	qs.enqueued = true
	ns := make([]*Node, len(es))
	queues := make([]*Queue, len(es))
	// wctx ends when any entry does: a wait on one name must not go on
	// for an acquisition that lost another.
	wctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	for i, x := range es {
		n := x.Node
		n.Name = names[i]
		e.follow(n)
		ns[i], queues[i] = n, NewQueue(n.Entry, x.Ahead, x.More)
		qs.ahead += len(queues[i].ahead)
		qs.partial = qs.partial || x.More
		defer context.AfterFunc(n.alive, func() { cancel(entryLost(n.Name, context.Cause(n.alive))) })()
	}
	abandon := func(err error) error {
		for _, n := range ns {
			e.giveUp(n, err)
		}
		return fail(err)
	}
	// lost prefers the end of an entry to the wait's own error.
	lost := func(err error) error {
		for _, n := range ns {
			if n.alive.Err() != nil {
				return entryLost(n.Name, context.Cause(n.alive))
			}
		}
		return err
	}
	for i, n := range ns {
		w, waits := queues[i].Next()
		_, must := queues[i].MustRead()
		n.Waited = waits || must
		if r.Try && n.Waited {
			err := fmt.Errorf("%w (lock %q: entries ahead)", distlock.ErrLocked, n.Name)
			if waits {
				err = fmt.Errorf("%w (lock %q: entry %s)", distlock.ErrLocked, n.Name, w.Key)
			}
			return nil, qs, abandon(err)
		}
	}
	// The names are waited for together, one goroutine each: a handoff
	// then costs the acquisition one event on its last name, not a watch
	// set up after another name's wait. (Waiting one name after the other
	// would be as safe: waits never form a cycle either way.) The first
	// failure ends every wait.
	var (
		wg    sync.WaitGroup
		first error
		once  sync.Once
	)
	waited := make([]int, len(ns))
	for i, n := range ns {
		if !n.Waited {
			continue
		}
		e.st.log.Debug(e.st.backend.Pkg+": enqueued", "lock", n.Name, "key", n.Key, "ahead", len(queues[i].ahead))
		wg.Go(func() {
			k, err := e.wait(wctx, n, queues[i])
			waited[i] = k
			if err != nil {
				once.Do(func() { first = err })
				cancel(err)
			}
		})
	}
	wg.Wait()
	for i, k := range waited {
		qs.waitedOn += k
		qs.delayed = max(qs.delayed, ns[i].lockDelay)
	}
	if first != nil {
		return nil, qs, abandon(lost(first))
	}
	// The last looks go out together: one round trip, whatever the
	// number of names.
	errs := make([]error, len(ns))
	for i, n := range ns {
		wg.Go(func() { errs[i] = e.d.Confirm(wctx, n) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, qs, abandon(lost(err))
	}
	if err := lost(nil); err != nil {
		return nil, qs, abandon(err)
	}
	e.st.log.Debug(e.st.backend.Pkg+": acquired", "lock", label, "token", ns[0].Token)
	return ns, qs, nil
}

// holdAll turns a multi-lock's acquired entries into one Lease (step 5),
// lost as a whole when any entry is, with one token per name.
func (e *Engine) holdAll(ns []*Node, lt *lockTel) *distlock.Lease {
	ts := make([]distlock.Token, len(ns))
	for i, n := range ns {
		ts[i] = distlock.Token{Name: n.Name, Seq: n.Token, Owner: e.st.owner}
	}
	// alive ends with the first entry's end, naming its lock.
	alive, kill := context.WithCancelCause(context.Background())
	endWithFirst(ns, kill)
	first := ns[0]
	start := time.Now()
	var once sync.Once
	end := func(cause error) { once.Do(func() { lt.ended(first.Kind, start, first.Token, cause) }) }
	release := func(ctx context.Context) error {
		ctx, span := lt.release(ctx, distlock.OpUnlock, first.Kind, first.Token)
		defer span.End()
		cause := error(distlock.ErrReleased)
		if alive.Err() != nil {
			cause = context.Cause(alive) // lost before the Unlock
		}
		end(cause)
		// The deletes go out together: a handoff on one name need not wait
		// for the others'.
		errs := make([]error, len(ns))
		var wg sync.WaitGroup
		for i, n := range ns {
			wg.Go(func() {
				if err := e.release(ctx, n); err != nil {
					errs[i] = entryLost(n.Name, err)
				}
			})
		}
		wg.Wait()
		err := errors.Join(errs...)
		endSpan(span, err)
		return err
	}
	var delayed time.Duration // the names wait together: the longest
	for _, n := range ns {
		delayed = max(delayed, n.lockDelay)
	}
	l, lose := distlock.NewMultiLease(e.st.backend.Name, ts, release, e.st.Deadline, distlock.LeaseLockDelay(delayed))
	e.loseWith(alive, lose, end, strings.Join(names(ns), "+"), first.Token)
	for _, n := range ns {
		e.followRevoke(n, n.Name, lose)
	}
	return l
}

// endWithFirst calls kill with the end of the first of ns to end, naming
// its lock.
func endWithFirst(ns []*Node, kill context.CancelCauseFunc) {
	for _, n := range ns {
		context.AfterFunc(n.alive, func() { kill(entryLost(n.Name, context.Cause(n.alive))) })
	}
}

// names returns the lock names of ns.
func names(ns []*Node) []string {
	out := make([]string, len(ns))
	for i, n := range ns {
		out[i] = n.Name
	}
	return out
}
