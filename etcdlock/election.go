package etcdlock

import "github.com/distlock/distlock/internal/qlock"

// Election is leader election on etcd, on the same queue mechanism as
// Mutex: each Campaign puts one key "P" + name + "/@e" + lease + "_" +
// counter, bound to the session's lease, whose value is the candidate's
// value, and the oldest candidate leads with its key's create revision as
// its term's fencing token. Candidates are a queue of their own: an
// Election and a Mutex of the same name do not wait for each other.
//
// Campaign waits until the candidate leads (a candidate that waited
// confirms its key by one linearizable read before it returns, so there
// is no phantom leader); Leader is one linearizable read of the oldest
// candidate; Observe is a stream of leaders that survives compaction, "no
// leader" included. The Leadership's Proclaim is a Put guarded by the
// key's create revision, Resign the guarded delete.
//
// The package documentation ("Election") says how it compares with
// etcd's concurrency.Election.
type Election struct{ q *qlock.Election }

// NewElection returns the election called name (see distlock.ValidateName)
// on the session's client.
func NewElection(s *Session, name string) (*Election, error) {
	e, err := s.engine("election", name)
	if err != nil {
		return nil, err
	}
	q, err := qlock.NewElection(e, name)
	if err != nil {
		return nil, err
	}
	return &Election{q}, nil
}
