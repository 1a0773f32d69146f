package recipe

import (
	"context"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/qlock"
)

var (
	_ distlock.Locker    = (*Mutex)(nil)
	_ distlock.Locker    = (*MultiMutex)(nil)
	_ distlock.Locker    = (*RWMutex)(nil)
	_ distlock.Elector   = (*Election)(nil)
	_ distlock.SlotMarks = (*Marks)(nil)
)

// Mutex is a fair FIFO lock: waiters acquire in the order they enqueued,
// each watching only the entry just ahead of it. Every acquisition's
// fencing token is its entry's position in the store's global order (etcd
// create revision, ZooKeeper czxid).
//
// Lock enqueues and waits until every earlier entry is gone; TryLock
// acquires only if no entry at all is queued, and writes nothing
// otherwise. A Lock that fails (ctx ended, session ended, its entry
// deleted by someone else: distlock.ErrEntryGone) leaves no entry behind.
//
// A Mutex is a handle, safe for concurrent use: each Lock call enqueues its
// own entry, so goroutines sharing one Mutex (or one Session) exclude each
// other exactly like separate processes do. It is not reentrant: a
// holder's second Lock waits for its first Lease's Unlock, so a goroutine
// that locks twice waits for itself.
type Mutex struct{ q *qlock.Mutex }

// NewMutex returns the lock called name (see distlock.ValidateName) on
// the session s. A nil s is an error wrapping distlock.ErrNilClient.
// distlock.WithCompat makes its entries another client's mutex's, so that
// the two exclude each other both ways (see distlock.Compat); a mode the
// store does not offer for a Mutex is an error wrapping
// errors.ErrUnsupported.
func NewMutex(s Backend, name string, opts ...distlock.LockOption) (*Mutex, error) {
	ss, err := session(s, "mutex", name)
	if err != nil {
		return nil, err
	}
	q, err := qlock.NewMutex(ss.e, name, distlock.NewLockConfig(opts...))
	if err != nil {
		return nil, err
	}
	return &Mutex{q}, nil
}

// Lock takes the lock, waiting in FIFO order behind every earlier
// acquisition: it enqueues an entry bound to the session and watches only
// the entry just ahead until every earlier one is gone. The returned
// Lease's fencing token is its entry's position.
//
// It fails, leaving no entry behind, when ctx ends (the error wraps ctx's
// cause), when the session ends (distlock.ErrSessionExpired or
// distlock.ErrSessionClosed; also when its client-side Deadline had passed
// by the time it could return, its process stopped while it waited) or
// when its entry is deleted by someone else (distlock.ErrEntryGone). Each
// call enqueues its own entry. The lock is not reentrant: a second Lock by
// a holder, on the same or another handle, waits for the first Lease's
// Unlock like any other caller's, so a goroutine that calls Lock again
// without unlocking waits for itself until ctx or the session ends.
func (m *Mutex) Lock(ctx context.Context) (*distlock.Lease, error) { return m.q.Lock(ctx) }

// TryLock takes the lock only if no entry at all is queued; otherwise it
// returns an error wrapping distlock.ErrLocked that names the entry
// ahead, and leaves nothing behind.
func (m *Mutex) TryLock(ctx context.Context) (*distlock.Lease, error) { return m.q.TryLock(ctx) }

// Name returns the lock's name, as given to NewMutex.
func (m *Mutex) Name() string { return m.q.Name() }

// Dir returns where the lock's entries are kept: on etcd the key prefix
// Session.Prefix() + name + "/@", on ZooKeeper the znode
// Session.Prefix() + "/" + name.
func (m *Mutex) Dir() string { return m.q.Dir() }

// RWMutex is a fair FIFO readers-writer lock: any number of readers may
// hold it together, a writer holds it alone. Readers and writers share one
// queue with the Mutex of the same name and acquire in the order they
// enqueued: a reader waits only on the nearest writer ahead of it (so a
// stream of new readers cannot starve a writer), a writer only on its
// immediate predecessor, each watching that one entry.
//
// TryRLock wins while readers alone hold and loses, writing nothing, while
// any writer holds or waits; RLocker is a distlock.Locker of the read
// side. A reader's token is ordered against writers' only: see "Readers
// and writers" in the README before fencing with it.
//
// Neither side is reentrant, and a holder cannot upgrade or downgrade in
// place: see Lock and RLock for how a second acquisition by a holder
// waits.
type RWMutex struct{ q *qlock.RWMutex }

// NewRWMutex returns the readers-writer lock called name (see
// distlock.ValidateName) on the session s. distlock.WithCompat makes its
// entries another client's readers-writer lock's (see distlock.Compat).
func NewRWMutex(s Backend, name string, opts ...distlock.LockOption) (*RWMutex, error) {
	ss, err := session(s, "rwmutex", name)
	if err != nil {
		return nil, err
	}
	q, err := qlock.NewRWMutex(ss.e, name, distlock.NewLockConfig(opts...))
	if err != nil {
		return nil, err
	}
	return &RWMutex{q}, nil
}

// RLock takes the lock shared, as a reader: it enqueues a reader and
// waits until no writer is ahead of it, watching only the nearest writer
// ahead. Readers between two writers hold together; a reader that comes
// while a writer waits queues behind that writer, so readers cannot
// starve writers.
//
// The returned Lease's fencing token is its entry's position: ordered
// against writers' tokens only, not against the other readers'. It fails,
// leaving no entry behind, as Mutex.Lock does.
//
// Read locks are not reentrant either: a second RLock by a reader shares
// the lock with its first only while no writer waits; once a writer has
// queued between them, the second waits behind the writer, which waits for
// the first, so a goroutine that read-locks twice can wait for itself (as
// with sync.RWMutex). A Lock by a holder of a read lock waits for that
// read lock's Unlock: a reader cannot upgrade in place.
func (m *RWMutex) RLock(ctx context.Context) (*distlock.Lease, error) { return m.q.RLock(ctx) }

// TryRLock takes the lock shared only if no writer holds or waits: it wins
// while readers alone hold. Otherwise it returns an error wrapping
// distlock.ErrLocked that names the writer's entry, leaving nothing
// behind.
func (m *RWMutex) TryRLock(ctx context.Context) (*distlock.Lease, error) { return m.q.TryRLock(ctx) }

// Lock takes the lock exclusively, as a writer (the kind of entry a Mutex
// of the same name makes): it waits, watching only its immediate
// predecessor, until every earlier entry, reader or writer, is gone. Its
// fencing token exceeds every earlier reader's and writer's. It fails,
// leaving no entry behind, as Mutex.Lock does, and is not reentrant: a
// second Lock by a holder waits for the first Lease's Unlock. An RLock by
// a holder of the write lock waits for it too: a writer cannot downgrade
// in place.
func (m *RWMutex) Lock(ctx context.Context) (*distlock.Lease, error) { return m.q.Lock(ctx) }

// TryLock takes the lock exclusively only if no entry at all, reader or
// writer, is queued; otherwise it returns an error wrapping
// distlock.ErrLocked that names the entry ahead, leaving nothing behind.
func (m *RWMutex) TryLock(ctx context.Context) (*distlock.Lease, error) { return m.q.TryLock(ctx) }

// RLocker returns a distlock.Locker whose Lock and TryLock are m's RLock
// and TryRLock, for code that takes a Locker (distlock.Do among it).
func (m *RWMutex) RLocker() distlock.Locker { return m.q.RLocker() }

// Name returns the lock's name, as given to NewRWMutex.
func (m *RWMutex) Name() string { return m.q.Name() }

// Dir returns where the lock's entries are kept, as Mutex.Dir.
func (m *RWMutex) Dir() string { return m.q.Dir() }
