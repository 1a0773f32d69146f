package integration

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// EtcdCluster is a real etcd cluster run by the harness: N members, each
// behind two proxies (one for clients, one for the other members), so that
// a member can be cut off without resetting any connection.
type EtcdCluster struct {
	cluster
	Members []*EtcdMember

	mu      sync.Mutex
	clients []*clientv3.Client
	closed  bool

	// TLS are the cluster's certificates (nil without WithTLS).
	TLS     *TLSFiles
	tlsConf *tls.Config // the harness's clients' (see TLSConfig)
	authOn  bool        // WithAuth: authentication is enabled

	bin      string   // the etcd server binary
	security []string // the members' TLS flags (see securityArgs)
}

// EtcdMember is one member of an EtcdCluster.
type EtcdMember struct {
	node

	c           *EtcdCluster
	clientAddr  string // where the member really listens for clients
	peerAddr    string // where it really listens for its peers
	clientProxy *Proxy
	peerProxy   *Proxy
}

// ClientURL returns the URL clients use to reach the member (through its
// proxy).
func (m *EtcdMember) ClientURL() string { return m.c.scheme() + m.clientProxy.Addr() }

// NewEtcd starts an etcd cluster for a test and stops it when the test
// ends. It fails the test if the cluster cannot start: under CI a missing
// server is a failure, never a skip.
func NewEtcd(t testing.TB, opts ...Option) *EtcdCluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := StartEtcd(ctx, append([]Option{WithLogger(testLogger(t))}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	c.t = t
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Error(err)
		}
	})
	return c
}

// StartEtcd builds the etcd server (once per process, from the module
// proxy at the version this module requires), starts a cluster, and waits
// until a quorum has a leader. Close stops it and removes its files.
func StartEtcd(ctx context.Context, opts ...Option) (*EtcdCluster, error) {
	cfg := newConfig(opts)
	if cfg.size < 1 {
		return nil, fmt.Errorf("integration: etcd cluster of %d members", cfg.size)
	}
	bin, err := buildBinary(ctx, "integration/internal/etcdserver")
	if err != nil {
		return nil, err
	}
	return startWithRetry(ctx, cfg, "etcd", func() (*EtcdCluster, error) {
		dir, err := makeTempDir("etcd")
		if err != nil {
			return nil, err
		}
		c := &EtcdCluster{cluster: newCluster(cfg, dir)}
		c.isolated = c.memberIsolated
		if err := c.start(ctx, bin); err != nil {
			c.Close()
			return nil, err
		}
		return c, nil
	})
}

func (c *EtcdCluster) start(ctx context.Context, bin string) error {
	var initial []string
	for i := range c.cfg.size {
		name := fmt.Sprintf("etcd%d", i)
		cp, err := freeAddr()
		if err != nil {
			return err
		}
		pp, err := freeAddr()
		if err != nil {
			return err
		}
		m := &EtcdMember{node: node{Name: name, procs: c.procs}, c: c, clientAddr: cp, peerAddr: pp}
		if m.clientProxy, err = c.newProxy(name, cp); err != nil {
			return err
		}
		if m.peerProxy, err = c.newProxy(name, pp); err != nil {
			return err
		}
		c.Members = append(c.Members, m)
		c.nodes = append(c.nodes, &m.node)
		initial = append(initial, fmt.Sprintf("%s=%s%s", name, c.scheme(), m.peerProxy.Addr()))
	}
	security, err := c.securityArgs()
	if err != nil {
		return err
	}
	c.bin, c.security = bin, security
	for _, m := range c.Members {
		srv, err := c.newMemberServer(m, initial, "new")
		if err != nil {
			return err
		}
		m.srv = srv
	}
	for _, m := range c.Members {
		if err := m.run(); err != nil {
			return err
		}
	}
	c.cfg.logger.Info("integration: etcd cluster starting", "members", c.cfg.size, "dir", c.dir, "provider", c.cfg.provider)
	wctx, cancel := c.untilExit(ctx)
	defer cancel(nil)
	if err := c.WaitHealthy(wctx); err != nil {
		return err
	}
	return c.enableAuth(wctx)
}

// freeAddr returns a loopback address with a port that is free now, for a
// server to bind (see serverListener).
func freeAddr() (string, error) {
	l, err := serverListener()
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// Endpoints returns every member's client URL (through the proxies).
func (c *EtcdCluster) Endpoints() []string {
	eps := make([]string, len(c.Members))
	for i, m := range c.Members {
		eps[i] = m.ClientURL()
	}
	return eps
}

// Client returns a client of the given members (all when none are given),
// closed with the cluster.
func (c *EtcdCluster) Client(members ...int) (*clientv3.Client, error) {
	eps := c.Endpoints()
	if len(members) > 0 {
		eps = nil
		for _, i := range members {
			eps = append(eps, c.Members[i].ClientURL())
		}
	}
	cli, err := clientv3.New(c.clientConfig(eps, 5*time.Second))
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.clients = append(c.clients, cli)
	return cli, nil
}

// status asks member m directly (not through its proxy, so faults do not
// blind the harness) for its status.
func (m *EtcdMember) status(ctx context.Context) (*clientv3.StatusResponse, error) {
	url := m.c.scheme() + m.clientAddr
	cli, err := clientv3.New(m.c.statusConfig(url))
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	sctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	return cli.Status(sctx, url)
}

// memberIsolated reports whether member i, cut off, has noticed: it
// reports no leader. A follower that hears no leader for an election
// timeout starts an election (pre-vote) and forgets its leader; a leader
// that hears no quorum for one steps down (etcd runs raft with
// CheckQuorum). A member that still names a leader long after the cut
// still hears from one: the cut leaks.
func (c *EtcdCluster) memberIsolated(ctx context.Context, i int) (bool, string, error) {
	st, err := c.Members[i].status(ctx)
	if err != nil {
		return false, "", err
	}
	if st.Leader == 0 {
		return true, "", nil
	}
	return false, fmt.Sprintf("reports leader %x at raft term %d (applied index %d)", st.Leader, st.RaftTerm, st.RaftAppliedIndex), nil
}

// Status asks member i for its status directly, bypassing its proxy: what
// the member itself has (its raft indexes, its view of the leader), even
// while it is cut off.
func (c *EtcdCluster) Status(ctx context.Context, i int) (*clientv3.StatusResponse, error) {
	return c.Members[i].status(ctx)
}

// Leader returns the index of the member that a majority of the members
// report as leader; it waits until there is one.
func (c *EtcdCluster) Leader(ctx context.Context) (int, error) {
	var lead int
	err := poll(ctx, 50*time.Millisecond, func(ctx context.Context) error {
		votes := map[uint64]int{}
		ids := map[uint64]int{}
		for i, m := range c.Members {
			st, err := m.status(ctx)
			if err != nil {
				continue
			}
			ids[st.Header.MemberId] = i
			if st.Leader != 0 {
				votes[st.Leader]++
			}
		}
		for id, n := range votes {
			if i, ok := ids[id]; ok && n > len(c.Members)/2 {
				lead = i
				return nil
			}
		}
		return errors.New("no leader agreed on by a majority of the members")
	})
	if err != nil {
		return -1, fmt.Errorf("integration: etcd leader: %w", err)
	}
	return lead, nil
}

// WaitHealthy waits until a majority agrees on a leader and every running
// member answers.
func (c *EtcdCluster) WaitHealthy(ctx context.Context) error {
	if _, err := c.Leader(ctx); err != nil {
		return c.explain(err)
	}
	for _, m := range c.Members {
		if m.srv.pid() == 0 {
			continue
		}
		if err := poll(ctx, 50*time.Millisecond, func(ctx context.Context) error {
			_, err := m.status(ctx)
			return err
		}); err != nil {
			return c.explain(fmt.Errorf("integration: %s not answering: %w", m.Name, err))
		}
	}
	c.cfg.logger.Info("integration: etcd cluster healthy")
	return nil
}

// Restart starts a killed member again with its data and waits until it
// answers.
func (c *EtcdCluster) Restart(ctx context.Context, i int) error {
	m := c.Members[i]
	if err := m.run(); err != nil {
		return err
	}
	return poll(ctx, 50*time.Millisecond, func(ctx context.Context) error {
		_, err := m.status(ctx)
		return err
	})
}

// StopLeader kills the current leader and returns its index.
func (c *EtcdCluster) StopLeader(ctx context.Context) (int, error) {
	i, err := c.Leader(ctx)
	if err != nil {
		return -1, err
	}
	return i, c.Kill(i)
}

// Close stops every member, closes the clients and proxies, and removes the
// cluster's files. It is safe to call more than once.
func (c *EtcdCluster) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	clients := c.clients
	c.mu.Unlock()
	for _, cli := range clients {
		cli.Close()
	}
	var errs []error
	for _, m := range c.Members {
		if m.srv != nil {
			errs = append(errs, m.srv.kill())
		}
	}
	for _, m := range c.Members {
		if m.clientProxy != nil {
			m.clientProxy.Close()
		}
		if m.peerProxy != nil {
			m.peerProxy.Close()
		}
	}
	errs = append(errs, os.RemoveAll(c.dir))
	return errors.Join(errs...)
}
