package etcdlock

import (
	"context"
	"fmt"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/qlock"
	"github.com/distlock/distlock/internal/qlock/etcdq"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Mutex is a fair FIFO lock on etcd: waiters acquire in the order they
// enqueued, each watching only the key just ahead of it. Every
// acquisition's fencing token is its key's create revision.
//
// Its methods: Lock enqueues and waits until every earlier entry is gone;
// TryLock acquires only if no entry at all is queued, in one Txn that
// writes nothing otherwise (the error then wraps distlock.ErrLocked and
// names the holder's key); Name and Dir (the key prefix of its entries).
// A Lock that fails (ctx ended, session ended, its key deleted by someone
// else: distlock.ErrEntryGone) leaves no key behind.
//
// A Mutex is a handle, safe for concurrent use: each Lock call enqueues its
// own key, so goroutines sharing one Mutex (or one Session) exclude each
// other exactly like separate processes do. It is the same type as
// zklock.Mutex: one engine serves both stores.
type Mutex = qlock.Mutex

// NewMutex returns the lock called name (see distlock.ValidateName) on the
// session's client.
func NewMutex(s *Session, name string) (*Mutex, error) {
	return qlock.NewMutex("etcdlock", s.driver(), name)
}

// RWMutex is a fair FIFO readers-writer lock on etcd: any number of readers
// may hold it together, a writer holds it alone. Readers ("@r" keys) and
// writers ("@w") share one queue with the Mutex of the same name and
// acquire in the order they enqueued: a reader waits only on the nearest
// writer ahead of it (so a stream of new readers cannot starve a writer),
// a writer only on its immediate predecessor, each watching that one key.
//
// Its methods: RLock, TryRLock (wins while readers alone hold; loses,
// writing nothing, while any writer holds or waits), Lock, TryLock (as
// Mutex's), RLocker (a distlock.Locker of the read side), Name and Dir.
//
// # Tokens and fencing
//
// Every acquisition's token is its key's create revision. Readers that
// hold together hold distinct tokens that say nothing about exclusivity
// among themselves: a reader's token is only ordered against writers'. A
// writer's token exceeds the token of every reader and writer that
// acquired before it, so a fence that admits writers' tokens refuses any
// writer, and any reader, older than the newest writer it admitted.
// Readers should not pass their own tokens through such a fence to write:
// a reader's token admitted there would refuse the older readers still
// holding beside it. A reader that must be fenced compares its token with
// the newest writer's token the resource recorded, without recording its
// own.
type RWMutex = qlock.RWMutex

// NewRWMutex returns the readers-writer lock called name (see
// distlock.ValidateName) on the session's client.
func NewRWMutex(s *Session, name string) (*RWMutex, error) {
	return qlock.NewRWMutex("etcdlock", s.driver(), name)
}

// Election is leader election on etcd, on the same queue mechanism as
// Mutex: each Campaign puts one key "P" + name + "/@e" + lease + "_" +
// counter, bound to the session's lease, whose value is the candidate's
// value, and the oldest candidate leads with its key's create revision as
// its term's fencing token. Candidates are a queue of their own: an
// Election and a Mutex of the same name do not wait for each other.
//
// Its methods: Campaign (waits until the candidate leads; a candidate
// that waited confirms its key by one linearizable read before it
// returns, so there is no phantom leader), Leader (one linearizable read
// of the oldest candidate), Observe (a stream of leaders that survives
// compaction, "no leader" included), Name and Dir. The Leadership's
// Proclaim is a Put guarded by the key's create revision, Resign the
// guarded delete.
//
// Compared with etcd's concurrency.Election: an uncontended Campaign is one
// write round trip, where etcd's needs two; a waiting candidate watches
// only its predecessor, from the current revision (no 100 ms catch-up
// delay at handover); a Campaign that fails or is cancelled deletes its
// key before returning (or keeps trying in the background while the
// session lives); Observe reports "no leader" too.
type Election = qlock.Election

// NewElection returns the election called name (see distlock.ValidateName)
// on the session's client.
func NewElection(s *Session, name string) (*Election, error) {
	return qlock.NewElection("etcdlock", s.driver(), name)
}

// Inspect returns the queue of the lock called name under the key prefix
// prefix (DefaultPrefix if empty), without joining it: the holder first,
// then the waiters in the order they will hold (QueueEntry.Holding says
// which hold). It is one linearizable range read sorted by create
// revision, so the entries are a consistent snapshot. An Election's
// candidates of the same name ("@e" keys, a queue of their own) are listed
// too, as exclusive entries; other keys under the lock's queue are
// ignored. An empty result means nobody holds or waits.
//
// Each entry's Token is the key's create revision (the fencing token it
// has or will have), Owner the lease ID in hex, Holder the key's value;
// Created is zero, since etcd keeps no creation time (distlock's command
// line puts one in the value).
func Inspect(ctx context.Context, cli *clientv3.Client, prefix, name string) ([]distlock.QueueEntry, error) {
	if cli == nil {
		return nil, fmt.Errorf("etcdlock: inspect %q: %w: *clientv3.Client is nil", name, distlock.ErrNilClient)
	}
	if err := distlock.ValidateName(name); err != nil {
		return nil, fmt.Errorf("etcdlock: inspect: %w", err)
	}
	if prefix == "" {
		prefix = DefaultPrefix
	}
	q, err := etcdq.Inspect(ctx, cli, prefix, name)
	if err != nil {
		return nil, fmt.Errorf("etcdlock: inspect %q: %w", name, err)
	}
	return q, nil
}
