package integration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/distlock/distlock/internal/proc"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Membership changes, made the way an operator makes them while clients
// keep working: RemoveMember takes a server out of the cluster's
// configuration, stops it and wipes its data; AddMember adds a fresh
// server back in its place (same name, same ports and proxies, so the
// clients' endpoint lists stay valid) and waits until it is a voting
// member that has caught up. WaitFullMembership waits until every server
// of the cluster is a voting member again and the cluster is healthy.
//
// A membership change is made only on a cluster at full health: every
// server running and not paused, no network fault set. On a degraded
// cluster it is refused (ErrDegraded) before anything changes, as an
// operator would refuse it: removing a member while another is down can
// leave the cluster without a quorum, and adding one back needs one.

// ErrDegraded is wrapped by the error of a membership change asked of a
// cluster that is not at full health; nothing was changed.
var ErrDegraded = errors.New("integration: cluster not at full health")

// memberChangeTimeout bounds each step of a membership change that waits
// for the cluster (a configuration change accepted, a member caught up).
const memberChangeTimeout = 60 * time.Second

// checkFullHealth returns an error wrapping ErrDegraded unless every
// server runs, none is paused and no network fault is set.
func (c *cluster) checkFullHealth() error {
	for _, n := range c.nodes {
		pid := n.srv.pid()
		if pid == 0 {
			return fmt.Errorf("%w: %s is not running", ErrDegraded, n.Name)
		}
		if st, _ := proc.State(pid); proc.IsStopped(st) {
			return fmt.Errorf("%w: %s is paused", ErrDegraded, n.Name)
		}
	}
	if fs := c.net.active(); len(fs) > 0 {
		return fmt.Errorf("%w: network faults on %s", ErrDegraded, strings.Join(fs, ", "))
	}
	return nil
}

// active returns the nodes that have a fault set.
func (n *Network) active() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []string
	for node := range n.faults {
		out = append(out, node)
	}
	sort.Strings(out)
	return out
}

// peerURL is the URL the other members reach the member at (through its
// peer proxy).
func (m *EtcdMember) peerURL() string { return m.c.scheme() + m.peerProxy.Addr() }

// newMemberServer makes the server of member m, which joins the cluster
// whose members are initial (name=peer URL) with --initial-cluster-state
// state: "new" when the cluster starts, "existing" for a member added to
// a running cluster.
func (c *EtcdCluster) newMemberServer(m *EtcdMember, initial []string, state string) (server, error) {
	data := m.DataDir()
	if err := os.MkdirAll(data, 0o755); err != nil {
		return nil, err
	}
	return c.cfg.newServer(serverSpec{
		name: m.Name,
		argv: append([]string{c.bin,
			"--name", m.Name,
			"--data-dir", data,
			"--listen-client-urls", c.scheme() + m.clientAddr,
			"--advertise-client-urls", m.ClientURL(),
			"--listen-peer-urls", c.scheme() + m.peerAddr,
			"--initial-advertise-peer-urls", m.peerURL(),
			"--initial-cluster", strings.Join(initial, ","),
			"--initial-cluster-state", state,
			"--initial-cluster-token", filepath.Base(c.dir),
			// Fast failure detection keeps fault tests short.
			"--heartbeat-interval", "50",
			"--election-timeout", "500",
			"--log-level", "warn",
		}, c.security...),
		log:  filepath.Join(c.dir, m.Name+".log"),
		dirs: append([]string{data}, c.securityDirs()...),
	})
}

// adminClient returns a client of every member but i, straight to their
// client ports (not through the proxies, like the harness's status reads).
func (c *EtcdCluster) adminClient(i int) (*clientv3.Client, error) {
	var eps []string
	for k, m := range c.Members {
		if k != i {
			eps = append(eps, c.scheme()+m.clientAddr)
		}
	}
	return clientv3.New(c.clientConfig(eps, 5*time.Second))
}

// etcdMemberList returns the cluster's members, as a quorum agrees on them.
func etcdMemberList(ctx context.Context, cli *clientv3.Client) ([]*etcdserverpb.Member, error) {
	lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := cli.MemberList(lctx)
	if err != nil {
		return nil, err
	}
	return resp.Members, nil
}

// etcdMemberAt returns the member whose peer URL is url (nil if none).
func etcdMemberAt(ms []*etcdserverpb.Member, url string) *etcdserverpb.Member {
	for _, x := range ms {
		if slices.Contains(x.PeerURLs, url) {
			return x
		}
	}
	return nil
}

// etcdRetriable reports whether a membership request refused with err may
// succeed later: etcd refuses a change while a member has been connected
// for less than its health interval (5 s), and while a member is not
// started yet; a request that timed out may or may not have been applied
// (the caller looks).
func etcdRetriable(err error) bool {
	return !errors.Is(err, rpctypes.ErrPermissionDenied) && !errors.Is(err, rpctypes.ErrUserEmpty) &&
		!errors.Is(err, rpctypes.ErrInvalidAuthToken) && !errors.Is(err, rpctypes.ErrAuthNotEnabled)
}

// RemoveMember removes member i from the cluster's configuration
// (MemberRemove, asked of the other members), stops its process and wipes
// its data directory, then waits until the remaining members agree on the
// smaller configuration and have a leader. Member i may be the leader.
// Bring it back with AddMember. It fails, wrapping ErrDegraded, without
// changing anything when the cluster is not at full health.
func (c *EtcdCluster) RemoveMember(ctx context.Context, i int) error {
	m := c.Members[i]
	if err := c.checkFullHealth(); err != nil {
		return err
	}
	cli, err := c.adminClient(i)
	if err != nil {
		return err
	}
	defer cli.Close()
	ms, err := etcdMemberList(ctx, cli)
	if err != nil {
		return fmt.Errorf("integration: remove %s: member list: %w", m.Name, err)
	}
	me := etcdMemberAt(ms, m.peerURL())
	if me == nil {
		return fmt.Errorf("integration: remove %s: not a member", m.Name)
	}
	id := me.ID
	rctx, cancel := context.WithTimeout(ctx, memberChangeTimeout)
	defer cancel()
	err = poll(rctx, 100*time.Millisecond, func(ctx context.Context) error {
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := cli.MemberRemove(qctx, id)
		cancel()
		if err == nil || errors.Is(err, rpctypes.ErrMemberNotFound) {
			return nil
		}
		if !etcdRetriable(err) {
			return err
		}
		// A request that failed may still have been applied.
		if ms, lerr := etcdMemberList(ctx, cli); lerr == nil && etcdMemberAt(ms, m.peerURL()) == nil {
			return nil
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("integration: remove %s (member %x): %w", m.Name, id, err)
	}
	c.cfg.logger.Info("integration: etcd member removed", "member", m.Name, "id", fmt.Sprintf("%x", id))
	// A removed member stops by itself once it learns of its removal; it
	// may not have yet.
	if err := c.Kill(i); err != nil {
		return err
	}
	if err := os.RemoveAll(m.DataDir()); err != nil {
		return err
	}
	// The others agree on the configuration without it, and have a leader.
	err = poll(rctx, 50*time.Millisecond, func(ctx context.Context) error {
		ms, err := etcdMemberList(ctx, cli)
		if err != nil {
			return err
		}
		if len(ms) != len(c.Members)-1 || etcdMemberAt(ms, m.peerURL()) != nil {
			return fmt.Errorf("%d members", len(ms))
		}
		return nil
	})
	if err == nil {
		_, err = c.Leader(rctx)
	}
	if err != nil {
		return c.explain(fmt.Errorf("integration: after removing %s: %w", m.Name, err))
	}
	return nil
}

// AddMember adds member i, removed by RemoveMember, back to the cluster as
// a new member (MemberAdd: a new member ID, fresh data, the same name and
// URLs), starts it with --initial-cluster-state existing, and waits until
// it answers as a voting member that has applied everything committed
// when it was added, and the cluster is healthy.
func (c *EtcdCluster) AddMember(ctx context.Context, i int) error {
	m := c.Members[i]
	if m.srv.pid() != 0 {
		return fmt.Errorf("integration: add %s: it runs (remove it first)", m.Name)
	}
	cli, err := c.adminClient(i)
	if err != nil {
		return err
	}
	defer cli.Close()
	actx, cancel := context.WithTimeout(ctx, memberChangeTimeout)
	defer cancel()
	var id uint64
	var members []*etcdserverpb.Member
	err = poll(actx, 100*time.Millisecond, func(ctx context.Context) error {
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		resp, err := cli.MemberAdd(qctx, []string{m.peerURL()})
		cancel()
		if err == nil {
			id, members = resp.Member.ID, resp.Members
			return nil
		}
		if !etcdRetriable(err) {
			return err
		}
		// A request that failed may still have been applied: the
		// member is there, not started yet.
		if ms, lerr := etcdMemberList(ctx, cli); lerr == nil {
			if x := etcdMemberAt(ms, m.peerURL()); x != nil {
				if x.Name != "" {
					return fmt.Errorf("a started member already has its peer URL: %w", err)
				}
				id, members = x.ID, ms
				return nil
			}
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("integration: add %s: %w", m.Name, err)
	}
	byURL := map[string]string{}
	for _, o := range c.Members {
		byURL[o.peerURL()] = o.Name
	}
	var initial []string
	for _, x := range members {
		if len(x.PeerURLs) == 0 {
			continue
		}
		name := x.Name
		if x.ID == id {
			name = m.Name
		}
		if name == "" {
			name = byURL[x.PeerURLs[0]]
		}
		initial = append(initial, name+"="+x.PeerURLs[0])
	}
	// What the new member must have applied to have caught up: the
	// cluster's commit index once it was added.
	var target uint64
	for k := range c.Members {
		if k == i {
			continue
		}
		if st, err := c.Members[k].status(actx); err == nil {
			target = max(target, st.RaftIndex)
		}
	}
	c.cfg.logger.Info("integration: etcd member added", "member", m.Name, "id", fmt.Sprintf("%x", id), "initial-cluster", strings.Join(initial, ","))
	if err := os.RemoveAll(m.DataDir()); err != nil {
		return err
	}
	srv, err := c.newMemberServer(m, initial, "existing")
	if err != nil {
		return err
	}
	m.srv = srv
	if err := m.run(); err != nil {
		return err
	}
	err = poll(actx, 50*time.Millisecond, func(ctx context.Context) error {
		st, err := m.status(ctx)
		switch {
		case err != nil:
			return err
		case st.Header.MemberId != id:
			return fmt.Errorf("answers as member %x, not %x", st.Header.MemberId, id)
		case st.IsLearner:
			return errors.New("is a learner")
		case st.RaftAppliedIndex < target:
			return fmt.Errorf("applied index %d < %d", st.RaftAppliedIndex, target)
		}
		return nil
	})
	if err == nil {
		err = c.WaitFullMembership(actx)
	}
	if err != nil {
		return c.explain(fmt.Errorf("integration: add %s (member %x): %w", m.Name, id, err))
	}
	return nil
}

// WaitFullMembership waits until every member of the harness is a
// started voting member of the cluster's configuration, and the cluster
// is healthy (WaitHealthy).
func (c *EtcdCluster) WaitFullMembership(ctx context.Context) error {
	cli, err := c.adminClient(-1)
	if err != nil {
		return err
	}
	defer cli.Close()
	err = poll(ctx, 50*time.Millisecond, func(ctx context.Context) error {
		ms, err := etcdMemberList(ctx, cli)
		if err != nil {
			return err
		}
		if len(ms) != len(c.Members) {
			return fmt.Errorf("%d members, not %d", len(ms), len(c.Members))
		}
		for _, o := range c.Members {
			x := etcdMemberAt(ms, o.peerURL())
			switch {
			case x == nil:
				return fmt.Errorf("%s is not a member", o.Name)
			case x.Name == "":
				return fmt.Errorf("%s has not started", o.Name)
			case x.IsLearner:
				return fmt.Errorf("%s is a learner", o.Name)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("integration: etcd membership: %w", err)
	}
	return c.WaitHealthy(ctx)
}
