package zklock_test

import (
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/integration"
	"github.com/distlock/distlock/integration/locktest"
	"github.com/distlock/distlock/recipe"
)

// ElectionWith makes zkSession a locktest.ElectionOpener, for the
// contract's preemption cases.
func (s *zkSession) ElectionWith(name string, opts ...distlock.ElectionOption) (locktest.Elector, error) {
	e, err := recipe.NewElection(s.s, name, opts...)
	if err != nil {
		return nil, err
	}
	return e, nil
}

// CoalescesTerms makes zkBackend a locktest.TermCoalescer: Observe's
// watches fire once and are set again by a read, which may find a term
// that began since already over.
func (b *zkBackend) CoalescesTerms() bool { return true }

// TestStoppedLeaderPreempted runs the contract's stopped leader's story
// on a real ensemble: a leader process stopped with a session timeout of
// 30 s, forced out by a candidate of higher priority.
func TestStoppedLeaderPreempted(t *testing.T) {
	ens := integration.NewZooKeeper(t)
	admin, events := connect(t, ens)
	drain(events)
	b := newBackend(t, ens, admin)
	spec := integration.HolderSpec{Backend: "zk", Endpoints: ens.Addrs(), Prefix: b.prefix, TTL: 30 * time.Second}
	locktest.StoppedLeaderPreempted(t, spec, b.Session(t), b, nil)
}
