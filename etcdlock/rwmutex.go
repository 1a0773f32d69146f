package etcdlock

import "github.com/distlock/distlock/internal/qlock"

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
