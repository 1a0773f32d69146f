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
// TryRLock wins while readers alone hold and loses while any writer holds
// or waits; RLocker is a distlock.Locker of the read side. Tokens and
// fencing are as for etcdlock.RWMutex: a reader's czxid is ordered against
// writers' only, so readers must not record their tokens in a writers'
// fence.
//
// Neither side is reentrant, and a holder cannot upgrade or downgrade in
// place: see Lock and RLock for how a second acquisition by a holder
// waits.
type RWMutex struct{ q *qlock.RWMutex }

// NewRWMutex returns the readers-writer lock called name (see
// distlock.ValidateName) on the session's connection.
func NewRWMutex(s *Session, name string) (*RWMutex, error) {
	e, err := s.engine("rwmutex", name)
	if err != nil {
		return nil, err
	}
	q, err := qlock.NewRWMutex(e, name)
	if err != nil {
		return nil, err
	}
	return &RWMutex{q}, nil
}
