package zklock

import (
	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/qlock"
)

// Election is a leader election on ZooKeeper: each Campaign creates one
// ephemeral sequential node "@e-<guid>-<seq>" in the election's
// directory, whose data is the candidate's value, and the directory's own
// data is the term record: the name of the leading candidate's node. The
// leader's fencing token is the directory's mzxid, the zxid of the write
// that began its term. A handoff deletes the leader's node and names the
// successor in one multi; after a leader's session ends, the next in line
// (highest priority, then oldest) claims the term with a multi that sets
// the directory's data at the version it read and checks its own node.
//
// Leader syncs and reads the record and the candidates; Observe keeps
// child and data watches, re-armed after each event, and needs only the
// connection, so it works after the session ended.
type Election struct{ q *qlock.Election }

// NewElection returns the election called name (see distlock.ValidateName)
// on the session's connection.
//
// opts set the Election's preempt grace (distlock.WithPreemptGrace).
func NewElection(s *Session, name string, opts ...distlock.ElectionOption) (*Election, error) {
	e, err := s.engine("election", name)
	if err != nil {
		return nil, err
	}
	q, err := qlock.NewElection(e, name, distlock.NewElectionConfig(opts...))
	if err != nil {
		return nil, err
	}
	return &Election{q}, nil
}
