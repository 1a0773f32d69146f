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
// An election's waiters differ from a Mutex's in one thing: a leader
// changes its node's data without leaving (Proclaim, a SetData with the
// version it last wrote), so a waiter that sees its predecessor's data
// change only learns that the predecessor led (nothing older is left) and
// reads it again to see whether it is gone. That is why candidates have a
// marker of their own: lock queues ignore them and elections ignore lock
// entries, even in a directory of the same name.
//
// Its methods: Campaign, Leader (the oldest node's data and czxid, read
// after a Sync), Observe (child and data watches, re-armed after each
// event; it needs only the connection, so it works after the session
// ended), Name and Dir.
type Election = qlock.Election

// NewElection returns the election called name (see distlock.ValidateName)
// on the session's connection.
func NewElection(s *Session, name string) (*Election, error) {
	return qlock.NewElection("zklock", s.driver(), name)
}
