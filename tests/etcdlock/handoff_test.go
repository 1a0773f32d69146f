package etcdlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/etcdlock"
	"github.com/distlock/distlock/integration"
	"github.com/distlock/distlock/integration/locktest"
	"github.com/distlock/distlock/recipe"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// ElectionWith makes etcdSession a locktest.ElectionOpener, for the
// contract's preemption cases.
func (s *etcdSession) ElectionWith(name string, opts ...distlock.ElectionOption) (locktest.Elector, error) {
	e, err := recipe.NewElection(s.s, name, opts...)
	if err != nil {
		return nil, err
	}
	return e, nil
}

// TestStoppedLeaderPreempted runs the contract's stopped leader's story
// on real etcd processes: a leader process stopped with a lease of 30 s,
// forced out by a candidate of higher priority long before the lease
// could expire (checked: the lease is alive when the preemptor leads).
func TestStoppedLeaderPreempted(t *testing.T) {
	c := integration.NewEtcd(t)
	cli, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	admin, err := etcdlock.NewAdmin(cli, etcdlock.DefaultPrefix)
	if err != nil {
		t.Fatal(err)
	}
	spec := integration.HolderSpec{Backend: "etcd", Endpoints: c.Endpoints(), TTL: 30 * time.Second}
	s := &etcdSession{s: newSession(t, cli, etcdlock.WithTTL(10*time.Second)), admin: cli}
	alive := func(ctx context.Context, owner uint64) (bool, error) {
		r, err := cli.TimeToLive(ctx, clientv3.LeaseID(owner))
		if err != nil {
			return false, err
		}
		return r.TTL > 0, nil
	}
	locktest.StoppedLeaderPreempted(t, spec, s, admin, alive)
}
