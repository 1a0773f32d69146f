package etcdlock

import "github.com/distlock/distlock/internal/qlock"

// RWMutex is a fair FIFO readers-writer lock on etcd: any number of readers
// may hold it together, a writer holds it alone. Readers ("@r" keys) and
// writers ("@w") share one queue with the Mutex of the same name and
// acquire in the order they enqueued: a reader waits only on the nearest
// writer ahead of it (so a stream of new readers cannot starve a writer),
// a writer only on its immediate predecessor, each watching that one key.
//
// TryRLock wins while readers alone hold and loses, writing nothing, while
// any writer holds or waits; RLocker is a distlock.Locker of the read
// side. A reader's token is ordered against writers' only: see "Readers
// and writers" in the package documentation before fencing with it.
//
// Neither side is reentrant, and a holder cannot upgrade or downgrade in
// place: see Lock and RLock for how a second acquisition by a holder
// waits.
type RWMutex struct{ q *qlock.RWMutex }

// NewRWMutex returns the readers-writer lock called name (see
// distlock.ValidateName) on the session's client.
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
