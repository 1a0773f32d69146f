package zklock

import "github.com/distlock/distlock/internal/qlock"

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
