package zklock

import (
	"context"
	"fmt"

	"github.com/distlock/distlock"
)

// RWMutex is a fair FIFO readers-writer lock on ZooKeeper: any number of readers
// may hold it together, a writer holds it alone. Readers and writers share
// one queue under the lock's name and acquire in the order they enqueued:
// a reader waits only on the nearest writer ahead of it (and so passes no
// waiting writer: a stream of new readers cannot starve a writer), a
// writer waits only on its immediate predecessor, and each waiter watches
// that one node only, so a writer releasing into many readers wakes each of
// them on its own watch: a writer that had waited releases with the
// set-data + delete transaction, whose data change tells each reader that
// no older writer is left, with no request. A writer behind readers learns of each reader's
// plain deletion and checks the older readers still ahead (see the package
// documentation).
//
// An RWMutex shares its queue with the Mutex of the same name: a Mutex's
// Lock is an RWMutex's Lock.
//
// # Tokens and fencing
//
// Every acquisition's token is its node's czxid, as for Mutex.
// Readers that hold together hold distinct tokens that say nothing about
// exclusivity among themselves: a reader's token is only ordered against
// writers'. A writer's token exceeds the token of every reader and writer
// that acquired before it (tokens are creation order, and a writer holds
// only once every older entry is gone), and every reader or writer that
// acquires after it has a larger token still. So a fence that admits
// writers' tokens (package fencing keeps the newest token it admitted and
// refuses older ones) refuses any writer, and any reader, older than the
// newest writer it admitted: a paused reader that wakes after a writer
// took over is told so. Readers should not pass their own tokens through
// such a fence to write, though: a reader's token admitted there would
// refuse the older readers still holding beside it. A reader that must
// be fenced compares its token with the newest writer's token the
// resource recorded, without recording its own.
//
// An RWMutex is a handle, safe for concurrent use: each call enqueues its
// own node.
type RWMutex struct {
	s    *Session
	name string
}

// NewRWMutex returns the readers-writer lock called name (see
// distlock.ValidateName) on the session's connection.
func NewRWMutex(s *Session, name string) (*RWMutex, error) {
	if s == nil {
		return nil, fmt.Errorf("zklock: new rwmutex %q: %w: *Session is nil", name, distlock.ErrNilClient)
	}
	if err := distlock.ValidateName(name); err != nil {
		return nil, err
	}
	return &RWMutex{s: s, name: name}, nil
}

// Name returns the lock's name.
func (m *RWMutex) Name() string { return m.name }

// Session returns the session the lock's nodes belong to.
func (m *RWMutex) Session() *Session { return m.s }

// Dir returns the znode under which the lock keeps its queue.
func (m *RWMutex) Dir() string { return m.s.dir(m.name) }

// RLock enqueues a reader and waits until no writer is ahead of it. It
// fails, leaving no node behind, as Mutex.Lock does.
func (m *RWMutex) RLock(ctx context.Context) (*distlock.Lease, error) {
	return m.s.acquire(ctx, m.name, distlock.Shared, false)
}

// TryRLock acquires a read lock only if no writer holds or waits; then the
// error wraps distlock.ErrLocked and names a writer's node. Like
// Mutex.TryLock it lists the directory first (a loss to a visible writer
// writes nothing), then creates its node and lists again.
func (m *RWMutex) TryRLock(ctx context.Context) (*distlock.Lease, error) {
	return m.s.acquire(ctx, m.name, distlock.Shared, true)
}

// Lock enqueues a writer and waits until every earlier entry, reader or
// writer, is gone. It fails, leaving no node behind, as Mutex.Lock does.
func (m *RWMutex) Lock(ctx context.Context) (*distlock.Lease, error) {
	return m.s.acquire(ctx, m.name, distlock.Exclusive, false)
}

// TryLock acquires the write lock only if no entry at all is queued, as
// Mutex.TryLock does.
func (m *RWMutex) TryLock(ctx context.Context) (*distlock.Lease, error) {
	return m.s.acquire(ctx, m.name, distlock.Exclusive, true)
}

// RLocker returns a distlock.Locker whose Lock and TryLock are m's RLock
// and TryRLock, for code (distlock.Do among it) that takes a Locker.
func (m *RWMutex) RLocker() distlock.Locker { return rlocker{m} }

var (
	_ distlock.Locker = (*RWMutex)(nil)
	_ distlock.Locker = rlocker{}
)

type rlocker struct{ m *RWMutex }

func (r rlocker) Lock(ctx context.Context) (*distlock.Lease, error)    { return r.m.RLock(ctx) }
func (r rlocker) TryLock(ctx context.Context) (*distlock.Lease, error) { return r.m.TryRLock(ctx) }
