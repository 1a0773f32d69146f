package chaos

import (
	"context"
	"fmt"
)

// memberChanger is a cluster whose membership can change while it serves
// (*integration.EtcdCluster; *integration.ZooKeeperEnsemble, through
// dynamic reconfiguration): a server taken out of the configuration,
// stopped and wiped, and a fresh one added back in its place, with the
// same client addresses, so that the clients' endpoint lists stay valid.
type memberChanger interface {
	RemoveMember(ctx context.Context, i int) error
	AddMember(ctx context.Context, i int) error
	WaitFullMembership(ctx context.Context) error
}

// reconfigurable is a cluster that says whether it can change its
// membership (a ZooKeeper ensemble only with reconfiguration enabled).
type reconfigurable interface {
	CanChangeMembers() bool
}

// changesMembers says whether the member-change nemesis applies: the
// store's cluster can change its membership.
func changesMembers(env *Env) bool {
	mc, ok := env.Store.Faults().(memberChanger)
	if !ok {
		return false
	}
	if r, ok := mc.(reconfigurable); ok {
		return r.CanChangeMembers()
	}
	return true
}

// injectMemberChange removes a member from the cluster's configuration
// while the workers run — the leader or a follower, drawn at random —
// stops it and wipes its data, waits until the others agree on the smaller
// configuration and have a leader, then adds a fresh member back in its
// place and waits until it is a voting member that has caught up. The
// whole change happens before it returns (recorded as member-change/removed
// and member-change/added), so that no other fault of a combined schedule
// is injected in the middle of it; the heal only waits until the cluster
// is at full size and healthy. The harness refuses the change on a cluster
// that is not at full health (another fault active): removing a member
// then could leave it without a quorum.
func injectMemberChange(ctx context.Context, env *Env) (string, func(context.Context) error, error) {
	mc := env.Store.Faults().(memberChanger)
	n := env.Store.Size()
	leader := env.Rand(2) == 0
	k := env.Rand(n - 1)
	l, err := env.Store.Faults().Leader(ctx)
	if err != nil {
		return "", nil, err
	}
	i, role := l, "leader"
	if !leader {
		i, role = (l+1+k)%n, "follower"
	}
	node := env.Store.Node(i)
	target := fmt.Sprintf("%s (%s)", node, role)
	if err := mc.RemoveMember(ctx, i); err != nil {
		return target, nil, err
	}
	env.History.Event(Op{Process: "nemesis", Kind: KindFault, Fault: NemMemberChange + "/removed", Target: node, Outcome: OK})
	if err := mc.AddMember(ctx, i); err != nil {
		return target, nil, err
	}
	env.History.Event(Op{Process: "nemesis", Kind: KindFault, Fault: NemMemberChange + "/added", Target: node, Outcome: OK})
	return target, mc.WaitFullMembership, nil
}
