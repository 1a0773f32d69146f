package zklock

import "github.com/distlock/distlock/internal/qlock"

// Election is a leader election on ZooKeeper, on the same queue mechanism
// as Mutex: each Campaign creates one ephemeral sequential node
// "@e-<guid>-<seq>" in the election's directory, whose data is the
// candidate's value, and the oldest one leads. The leader's fencing token
// is its node's czxid. Uncontended, a Campaign costs what Mutex.Lock
// costs: the create, then the listing and the read of its own node's Stat,
// sent together.
//
// Waiters take a predecessor's data change for "it led", not for a
// release (see "Election" in the package documentation).
//
// Leader reads the oldest node's data and czxid after a Sync; Observe
// keeps child and data watches, re-armed after each event, and needs only
// the connection, so it works after the session ended.
type Election struct{ q *qlock.Election }

// NewElection returns the election called name (see distlock.ValidateName)
// on the session's connection.
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
