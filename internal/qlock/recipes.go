package qlock

import (
	"context"
	"fmt"

	"github.com/distlock/distlock"
)

// The recipes, written once for every store: the backend packages
// (etcdlock, zklock) name these types as their own and document what
// their store does underneath.

// lock is a named queue on one session's engine.
type lock struct {
	e    *Engine
	name string
	tel  *lockTel
}

// newRecipe returns the recipe (what: "mutex", "rwmutex", "election")
// made by wrap around lock name on d's session; pkg names the backend in
// errors.
func newRecipe[T any](pkg, what string, d Driver, name string, wrap func(lock) *T) (*T, error) {
	if d == nil {
		return nil, fmt.Errorf("%s: new %s %q: %w: *Session is nil", pkg, what, name, distlock.ErrNilClient)
	}
	if err := distlock.ValidateName(name); err != nil {
		return nil, err
	}
	return wrap(lock{e: New(d), name: name, tel: d.Shared().tel.forLock(name, what)}), nil
}

// Name returns the lock's name.
func (l *lock) Name() string { return l.name }

// Dir returns where the lock keeps its queue: the key prefix of its
// entries on etcd, its directory znode on ZooKeeper.
func (l *lock) Dir() string { return l.e.d.Dir(l.name) }

// acquire is Lock and TryLock for an entry of kind k.
func (l *lock) acquire(ctx context.Context, k Kind, try bool) (*distlock.Lease, error) {
	r := Request{Op: distlock.OpLock, Kind: k, Try: try, Value: []byte(l.e.d.Holder())}
	if try {
		r.Op = distlock.OpTryLock
	}
	_, lease, err := l.take(ctx, r)
	return lease, err
}

// take enqueues r, waits until its entry holds and returns the entry and
// its Lease: the one path of Lock, TryLock, RLock and Campaign, traced and
// measured here.
func (l *lock) take(ctx context.Context, r Request) (*Node, *distlock.Lease, error) {
	tctx, a := l.tel.begin(ctx, r.Op, r.Kind)
	n, err := l.e.acquire(tctx, l.name, r, a)
	a.end(n, ctx.Err() != nil, err)
	if err != nil {
		return nil, nil, err
	}
	return n, l.e.hold(n, l.tel), nil
}

// Mutex is a fair FIFO lock: waiters acquire in the order they enqueued,
// each watching only the entry just ahead of it. A Mutex is a handle, safe
// for concurrent use: each Lock call enqueues its own entry, so goroutines
// sharing one Mutex (or one session) exclude each other exactly like
// separate processes do.
type Mutex struct{ lock }

var _ distlock.Locker = (*Mutex)(nil)

// NewMutex returns the lock called name on d's session; pkg names the
// backend in errors.
func NewMutex(pkg string, d Driver, name string) (*Mutex, error) {
	return newRecipe(pkg, "mutex", d, name, func(l lock) *Mutex { return &Mutex{l} })
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

// NewRWMutex returns the readers-writer lock called name on d's session;
// pkg names the backend in errors.
func NewRWMutex(pkg string, d Driver, name string) (*RWMutex, error) {
	return newRecipe(pkg, "rwmutex", d, name, func(l lock) *RWMutex { return &RWMutex{l} })
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
