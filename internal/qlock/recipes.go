package qlock

import (
	"context"

	"github.com/distlock/distlock"
)

// The recipes' engine side, once for every store: package recipe's
// public types wrap these and document them for users; the store
// packages' docs say what each store does underneath.

// lock is a named queue on one session's engine.
type lock struct {
	e      *Engine
	name   string
	tel    *lockTel
	compat distlock.Compat
	rw     bool // an RWMutex's (Request.RW)
}

// newRecipe returns the recipe (what: "mutex", "rwmutex", "election",
// "semaphore") made by wrap around lock name on e's session. e must not be
// nil: the backend packages refuse a nil session, naming themselves.
func newRecipe[T any](what string, e *Engine, name string, compat distlock.Compat, wrap func(lock) *T) (*T, error) {
	if err := e.st.backend.ValidateName(name); err != nil {
		return nil, err
	}
	if err := e.st.backend.CheckCompat(compat, what, name); err != nil {
		return nil, err
	}
	return wrap(lock{e: e, name: name, tel: e.st.tel.forLock(name, what), compat: compat}), nil
}

// Name returns the lock's name.
func (l *lock) Name() string { return l.name }

// Dir returns where the lock keeps its queue: the key prefix of its
// entries on etcd, its directory znode on ZooKeeper.
func (l *lock) Dir() string { return l.e.d.Dir(l.name) }

// acquire is Lock and TryLock for an entry of kind k.
func (l *lock) acquire(ctx context.Context, k Kind, try bool) (*distlock.Lease, error) {
	r := Request{Op: distlock.OpLock, Kind: k, Try: try, Value: []byte(l.e.st.holder), Compat: l.compat, RW: l.rw}
	if try {
		r.Op = distlock.OpTryLock
	}
	_, lease, err := l.take(ctx, r)
	return lease, err
}

// take enqueues r, waits until its entry holds and returns the entry and
// its Lease: Lock, TryLock, RLock.
func (l *lock) take(ctx context.Context, r Request) (*Node, *distlock.Lease, error) {
	return l.takeWith(ctx, r, hooks{}, func(ctx context.Context) (*Node, queueStats, error) {
		ns, qs, err := l.e.acquire(ctx, l.name, []string{l.name}, r, hooks{})
		if err != nil {
			return nil, qs, err
		}
		return ns[0], qs, nil
	})
}

// takeWith is take of one entry with the recipe's hooks h and its own
// acquire (a campaign's): see Engine.take.
func (l *lock) takeWith(ctx context.Context, r Request, h hooks, acquire func(ctx context.Context) (*Node, queueStats, error)) (*Node, *distlock.Lease, error) {
	ns, lease, err := l.e.take(ctx, l.tel, l.name, r, h, func(ctx context.Context) ([]*Node, queueStats, error) {
		n, qs, err := acquire(ctx)
		if err != nil {
			return nil, qs, err
		}
		return []*Node{n}, qs, nil
	})
	if err != nil {
		return nil, nil, err
	}
	return ns[0], lease, nil
}

// take is the one path of every acquisition (a Mutex's, a multi-lock's, a
// semaphore's Acquire, a Campaign), traced and measured by lt from its
// start to its end: acquire makes the entries of lock label and waits
// until they hold, saying what it saw of the queues, and the held entries
// become one Lease with the recipe's hooks h.
func (e *Engine) take(ctx context.Context, lt *lockTel, label string, r Request, h hooks, acquire func(ctx context.Context) ([]*Node, queueStats, error)) ([]*Node, *distlock.Lease, error) {
	tctx, a := lt.begin(ctx, r.Op, r.Kind)
	ns, qs, err := acquire(tctx)
	if err == nil {
		if err = e.pastDeadline(); err != nil {
			e.abandonAll(ns, err, h)
			err = e.fail(label, r.Op, err)
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
		return nil, nil, err
	}
	return ns, e.hold(label, ns, lt, h), nil
}

// Mutex is a fair FIFO lock: waiters acquire in the order they enqueued,
// each watching only the entry just ahead of it. A Mutex is a handle, safe
// for concurrent use: each Lock call enqueues its own entry, so goroutines
// sharing one Mutex (or one session) exclude each other exactly like
// separate processes do.
type Mutex struct{ lock }

var _ distlock.Locker = (*Mutex)(nil)

// NewMutex returns the lock called name on e's session, its entries in
// cfg's compatibility mode.
func NewMutex(e *Engine, name string, cfg distlock.LockConfig) (*Mutex, error) {
	return newRecipe("mutex", e, name, cfg.Compat, func(l lock) *Mutex { return &Mutex{l} })
}

// Lock enqueues and waits until every earlier entry is gone. It fails,
// leaving no entry behind, when ctx ends (the error wraps ctx's cause), when
// the session ends (distlock.ErrSessionExpired or ErrSessionClosed) or when
// its entry is deleted by someone else (distlock.ErrEntryGone).
func (m *Mutex) Lock(ctx context.Context) (*distlock.Lease, error) {
	return m.acquire(ctx, Exclusive, false)
}

// TryLock acquires the lock only if no other entry is queued; otherwise it
// returns an error wrapping distlock.ErrLocked that names the entry ahead,
// leaving nothing behind.
func (m *Mutex) TryLock(ctx context.Context) (*distlock.Lease, error) {
	return m.acquire(ctx, Exclusive, true)
}

// RWMutex is a fair FIFO readers-writer lock: any number of readers may
// hold it together, a writer holds it alone. Readers and writers share one
// queue (the Mutex's of the same name) and acquire in the order they
// enqueued: a reader waits only on the nearest writer ahead of it (and so
// passes no waiting writer), a writer only on its immediate predecessor.
type RWMutex struct{ lock }

var (
	_ distlock.Locker = (*RWMutex)(nil)
	_ distlock.Locker = rlocker{}
)

// NewRWMutex returns the readers-writer lock called name on e's session,
// its entries in cfg's compatibility mode.
func NewRWMutex(e *Engine, name string, cfg distlock.LockConfig) (*RWMutex, error) {
	return newRecipe("rwmutex", e, name, cfg.Compat, func(l lock) *RWMutex {
		l.rw = true
		return &RWMutex{l}
	})
}

// RLock enqueues a reader and waits until no writer is ahead of it. It
// fails, leaving no entry behind, as Mutex.Lock does.
func (m *RWMutex) RLock(ctx context.Context) (*distlock.Lease, error) {
	return m.acquire(ctx, Shared, false)
}

// TryRLock acquires a read lock only if no writer holds or waits;
// otherwise the error wraps distlock.ErrLocked and names the writer's
// entry.
func (m *RWMutex) TryRLock(ctx context.Context) (*distlock.Lease, error) {
	return m.acquire(ctx, Shared, true)
}

// Lock enqueues a writer and waits until every earlier entry, reader or
// writer, is gone. It fails, leaving no entry behind, as Mutex.Lock does.
func (m *RWMutex) Lock(ctx context.Context) (*distlock.Lease, error) {
	return m.acquire(ctx, Exclusive, false)
}

// TryLock acquires the write lock only if no entry at all is queued, as
// Mutex.TryLock does.
func (m *RWMutex) TryLock(ctx context.Context) (*distlock.Lease, error) {
	return m.acquire(ctx, Exclusive, true)
}

// RLocker returns a distlock.Locker whose Lock and TryLock are m's RLock
// and TryRLock, for code (distlock.Do among it) that takes a Locker.
func (m *RWMutex) RLocker() distlock.Locker { return rlocker{m} }

type rlocker struct{ m *RWMutex }

func (r rlocker) Lock(ctx context.Context) (*distlock.Lease, error)    { return r.m.RLock(ctx) }
func (r rlocker) TryLock(ctx context.Context) (*distlock.Lease, error) { return r.m.TryRLock(ctx) }
