package etcdlock

import (
	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/qlock"
)

// Election is leader election on etcd: each Campaign puts one key
// "P" + name + "/@e" + lease + "_" + counter, bound to the session's
// lease, whose value is the candidate's value, and the term record is the
// key "P" + name + "/@l", whose value is the leading candidate's key and
// whose mod revision is the leader's fencing token (the revision of the
// write that began its term). The record is bound to the leader's lease,
// so it goes with the leader's session. A handoff deletes the leader's
// key and puts the record naming the successor in one Txn; after a
// leader's session ends, the next in line (highest priority, then oldest)
// claims the term with a Txn guarded by the record's mod revision and its
// own key.
//
// Leader is one linearizable range read of the candidates and the
// record; Observe is one watch on them that survives compaction, "no
// leader" included. The Leadership's Proclaim is a Put guarded by the
// key's create revision.
//
// The package documentation ("Election") says how it compares with
// etcd's concurrency.Election.
type Election struct{ q *qlock.Election }

// NewElection returns the election called name (see distlock.ValidateName)
// on the session's client.
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
