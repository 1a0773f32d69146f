package etcdlock

import (
	"strings"

	"github.com/distlock/distlock/internal/qlock"
)

// MultiMutex is a lock on several names at once, on etcd: it holds all of
// them or none. Its entries are one key per name, put by one Txn at one
// revision, in the queues of the Mutexes of the same names; every
// acquisition's tokens (one per name) carry that revision.
//
// Taking several Mutexes one after another deadlocks unless every caller
// agrees on one order; a MultiMutex cannot deadlock, whatever order its
// callers list the names in, and mixes freely with the Mutexes of its
// names (see Lock). It is a handle, safe for concurrent use, and not
// reentrant, like a Mutex. zklock.MultiMutex has the same methods.
type MultiMutex struct{ q *qlock.MultiMutex }

// NewMultiMutex returns the lock on names (each valid, see
// distlock.ValidateName; none twice; at most distlock.MaxMultiNames; in any
// order) on the session's client.
func NewMultiMutex(s *Session, names ...string) (*MultiMutex, error) {
	e, err := s.engine("multi-mutex", strings.Join(names, "+"))
	if err != nil {
		return nil, err
	}
	q, err := qlock.NewMultiMutex(e, names...)
	if err != nil {
		return nil, err
	}
	return &MultiMutex{q}, nil
}
