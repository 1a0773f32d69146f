package integration

import (
	"context"
	"crypto/sha1"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/distlock/distlock/internal/zkctx"
	"github.com/go-zookeeper/zk"
)

// ZooKeeper's dynamic reconfiguration (3.5 and later): RemoveMember,
// AddMember and WaitFullMembership (see member.go) on an ensemble started
// WithReconfig.
//
// A reconfiguration replaces every server's list of servers by the one the
// leader commits, so the list must read right on every server. The
// harness's usual zoo.cfg cannot: each server lists its own entry with the
// ports it binds and the others' with their proxies' ports, a view of its
// own. WithReconfig lays the ensemble out so that one list fits all: each
// server is listed under a host name (zk1.distlock.invalid, ...) with the
// ports it binds, and every server's JVM resolves the names from a hosts
// file of its own (jdk.net.hosts.file): its own name to the loopback
// address it binds, the others' to the addresses of their proxies, which
// listen on the same ports as the servers behind them, on an address of
// their own (127.0.90.<id>). Every byte between two servers still crosses
// a proxy of the server it goes to, and a list the leader commits means
// the same on every server.

// WithReconfig starts a ZooKeeper ensemble whose membership can change
// while it serves (reconfigEnabled=true; the harness's admin connection
// authenticates as a digest superuser): RemoveMember and AddMember. See
// zkmember.go for how the ensemble is laid out then. No effect on etcd.
func WithReconfig() Option { return func(c *config) { c.reconfig = true } }

// The digest superuser the harness's reconfigurations authenticate as.
const (
	zkSuperUser     = "super"
	zkSuperPassword = "distlock-harness"
)

// zkPeerHost is server id's name in the ensemble's list of servers.
func zkPeerHost(id int) string { return fmt.Sprintf("zk%d.distlock.invalid", id) }

// zkPeerProxyIP is the loopback address server id's peer proxies listen
// on under WithReconfig (their ports are the server's own).
func zkPeerProxyIP(id int) string { return fmt.Sprintf("127.0.90.%d", id) }

// CanChangeMembers reports whether RemoveMember and AddMember work: the
// ensemble was started WithReconfig and has more than one server.
func (e *ZooKeeperEnsemble) CanChangeMembers() bool { return e.cfg.reconfig && len(e.Servers) > 1 }

// newPeerProxy makes the proxy of server s's peer port real (quorum or
// election), forwarding to upstream (its relay): on a free loopback port,
// or under WithReconfig on real's port at zkPeerProxyIP.
func (e *ZooKeeperEnsemble) newPeerProxy(s *ZooKeeperServer, real, upstream string) (*Proxy, error) {
	if !e.cfg.reconfig {
		return e.newProxy(s.Name, upstream)
	}
	p, err := newProxyOn(e.net, net.JoinHostPort(zkPeerProxyIP(s.ID), portOf(real)), s.Name, upstream, e.procs.identify)
	if err == nil {
		e.proxies = append(e.proxies, p)
	}
	return p, err
}

// serverLine is server o's entry in server s's zoo.cfg: with the ports o
// binds if it is s, else with its proxies'; under WithReconfig the same
// for every s, by name (see zkmember.go).
func (e *ZooKeeperEnsemble) serverLine(o, s *ZooKeeperServer) string {
	if e.cfg.reconfig {
		return o.reconfigLine("participant")
	}
	q, el := o.quorumProxy.Addr(), o.electionProxy.Addr()
	if o == s {
		q, el = o.quorumAddr, o.electionAddr
	}
	return fmt.Sprintf("server.%d=%s:%s", o.ID, q, portOf(el))
}

// reconfigLine is s's entry in the list of servers under WithReconfig,
// with the given role (participant or observer) and the client address it
// binds (a reconfiguration that adds a server requires one).
func (s *ZooKeeperServer) reconfigLine(role string) string {
	return fmt.Sprintf("server.%d=%s:%s:%s:%s;%s", s.ID, zkPeerHost(s.ID), portOf(s.quorumAddr), portOf(s.electionAddr), role, s.clientAddr)
}

// reconfigJVMFlags writes server s's hosts file and returns the JVM flags
// that use it and name the digest superuser (none without WithReconfig).
func (e *ZooKeeperEnsemble) reconfigJVMFlags(s *ZooKeeperServer) ([]string, error) {
	if !e.cfg.reconfig || len(e.Servers) < 2 {
		return nil, nil
	}
	// Every name the JVM may look up: only the hosts file answers.
	local := []string{"localhost"}
	if h, err := os.Hostname(); err == nil && h != "" {
		local = append(local, h)
	}
	lines := []string{"127.0.0.1 " + strings.Join(local, " ")}
	for _, o := range e.Servers {
		ip := zkPeerProxyIP(o.ID)
		if o == s {
			ip, _, _ = net.SplitHostPort(o.quorumAddr)
		}
		lines = append(lines, ip+" "+zkPeerHost(o.ID))
	}
	hosts := filepath.Join(s.dir, "hosts")
	if err := os.WriteFile(hosts, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		return nil, err
	}
	sum := sha1.Sum([]byte(zkSuperUser + ":" + zkSuperPassword))
	return []string{
		"-Djdk.net.hosts.file=" + hosts,
		"-Dzookeeper.DigestAuthenticationProvider.superDigest=" + zkSuperUser + ":" + base64.StdEncoding.EncodeToString(sum[:]),
	}, nil
}

// adminConn connects straight to every server but except (not through
// the proxies), authenticated as the digest superuser.
func (e *ZooKeeperEnsemble) adminConn(ctx context.Context, except int) (*zk.Conn, error) {
	if !e.CanChangeMembers() {
		return nil, errors.New("integration: the ensemble cannot change its membership (start it WithReconfig, with several servers)")
	}
	var addrs []string
	for k, s := range e.Servers {
		if k != except {
			addrs = append(addrs, s.clientAddr)
		}
	}
	conn, _, err := zk.Connect(addrs, zkSessionTimeout, zk.WithLogger(zkNopLogger{}), zk.WithLogInfo(false))
	if err != nil {
		return nil, err
	}
	if _, err := zkctx.Call(ctx, func() (struct{}, error) {
		return struct{}{}, conn.AddAuth("digest", []byte(zkSuperUser+":"+zkSuperPassword))
	}); err != nil {
		conn.Close()
		return nil, fmt.Errorf("integration: ZooKeeper admin connection: %w", err)
	}
	return conn, nil
}

// zkMembers reads the ensemble's list of servers (/zookeeper/config, after
// a sync): each server's id and its entry's value.
func zkMembers(ctx context.Context, conn *zk.Conn) (map[int]string, error) {
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	data, err := zkctx.Call(qctx, func() ([]byte, error) {
		if _, err := conn.Sync("/zookeeper/config"); err != nil {
			return nil, err
		}
		b, _, err := conn.Get("/zookeeper/config")
		return b, err
	})
	if err != nil {
		return nil, err
	}
	out := map[int]string{}
	for _, l := range strings.Split(string(data), "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(l), "=")
		id, isServer := strings.CutPrefix(k, "server.")
		if !ok || !isServer {
			continue
		}
		n, err := strconv.Atoi(id)
		if err != nil {
			return nil, fmt.Errorf("integration: /zookeeper/config: %q", l)
		}
		out[n] = v
	}
	return out, nil
}

// zkReconfig asks for one incremental reconfiguration until done says it
// is in the list the ensemble agrees on, or ctx ends.
func zkReconfig(ctx context.Context, conn *zk.Conn, joining, leaving []string, done func(map[int]string) bool) error {
	return poll(ctx, 100*time.Millisecond, func(ctx context.Context) error {
		qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := zkctx.Call(qctx, func() (*zk.Stat, error) { return conn.IncrementalReconfig(joining, leaving, -1) })
		cancel()
		// A request that failed may still have been applied; and a
		// committed one is not always seen by the next read at once.
		ms, lerr := zkMembers(ctx, conn)
		if lerr == nil && done(ms) {
			return nil
		}
		if err == nil {
			err = lerr
		}
		if err == nil {
			err = fmt.Errorf("not in the configuration yet (%d servers)", len(ms))
		}
		return err
	})
}

// RemoveMember removes server i from the ensemble's configuration
// (reconfig -remove, asked of the other servers as the digest superuser),
// stops it and wipes its data directory, then waits until the remaining
// servers serve under one leader with the smaller configuration. Server i
// may be the leader. Bring it back with AddMember. It fails, wrapping
// ErrDegraded, without changing anything when the ensemble is not at full
// health.
func (e *ZooKeeperEnsemble) RemoveMember(ctx context.Context, i int) error {
	s := e.Servers[i]
	if err := e.checkFullHealth(); err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, memberChangeTimeout)
	defer cancel()
	conn, err := e.adminConn(rctx, i)
	if err != nil {
		return err
	}
	defer conn.Close()
	ms, err := zkMembers(rctx, conn)
	if err != nil {
		return fmt.Errorf("integration: remove %s: %w", s.Name, err)
	}
	if _, ok := ms[s.ID]; !ok {
		return fmt.Errorf("integration: remove %s: not in the configuration", s.Name)
	}
	gone := func(ms map[int]string) bool { _, in := ms[s.ID]; return !in && len(ms) == len(e.Servers)-1 }
	if err := zkReconfig(rctx, conn, nil, []string{strconv.Itoa(s.ID)}, gone); err != nil {
		return e.explain(fmt.Errorf("integration: remove %s: %w", s.Name, err))
	}
	e.cfg.logger.Info("integration: ZooKeeper server removed", "server", s.Name, "id", s.ID)
	if err := e.Kill(i); err != nil {
		return err
	}
	if err := os.RemoveAll(s.DataDir()); err != nil {
		return err
	}
	if _, err := e.Leader(rctx); err != nil {
		return e.explain(fmt.Errorf("integration: after removing %s: %w", s.Name, err))
	}
	return nil
}

// AddMember adds server i, removed by RemoveMember, back to the ensemble
// with fresh data, the way ZooKeeper documents it: the server starts with
// the current configuration and itself listed as an observer, joins the
// leader as a non-voting follower, and reconfig -add makes it a
// participant. It returns once the ensemble lists every server as a
// participant and all serve under one leader.
func (e *ZooKeeperEnsemble) AddMember(ctx context.Context, i int) error {
	s := e.Servers[i]
	if s.srv.pid() != 0 {
		return fmt.Errorf("integration: add %s: it runs (remove it first)", s.Name)
	}
	actx, cancel := context.WithTimeout(ctx, memberChangeTimeout)
	defer cancel()
	conn, err := e.adminConn(actx, i)
	if err != nil {
		return err
	}
	defer conn.Close()
	ms, err := zkMembers(actx, conn)
	if err != nil {
		return fmt.Errorf("integration: add %s: %w", s.Name, err)
	}
	if _, ok := ms[s.ID]; ok {
		return fmt.Errorf("integration: add %s: already in the configuration", s.Name)
	}
	// A fresh server: no data, and a zoo.cfg of the current configuration
	// and itself (ZooKeeper rewrote the old one into a dynamic file).
	old, _ := filepath.Glob(filepath.Join(s.dir, "zoo.cfg*"))
	for _, f := range old {
		if err := os.Remove(f); err != nil {
			return err
		}
	}
	data := s.DataDir()
	if err := os.RemoveAll(data); err != nil {
		return err
	}
	if err := os.MkdirAll(data, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(data, "myid"), []byte(strconv.Itoa(s.ID)+"\n"), 0o644); err != nil {
		return err
	}
	var lines []string
	for _, l := range strings.Split(e.zooCfg(s, data), "\n") {
		if l != "" && !strings.HasPrefix(l, "server.") {
			lines = append(lines, l)
		}
	}
	for id, v := range ms {
		lines = append(lines, fmt.Sprintf("server.%d=%s", id, v))
	}
	lines = append(lines, s.reconfigLine("observer"))
	if err := os.WriteFile(filepath.Join(s.dir, "zoo.cfg"), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		return err
	}
	if err := s.run(); err != nil {
		return err
	}
	// Synced with the leader (a non-voting follower serves).
	if err := s.waitServing(actx); err != nil {
		return e.explain(fmt.Errorf("integration: add %s: %w", s.Name, err))
	}
	in := func(ms map[int]string) bool { _, ok := ms[s.ID]; return ok }
	if err := zkReconfig(actx, conn, []string{s.reconfigLine("participant")}, nil, in); err != nil {
		return e.explain(fmt.Errorf("integration: add %s: %w", s.Name, err))
	}
	e.cfg.logger.Info("integration: ZooKeeper server added", "server", s.Name, "id", s.ID)
	return e.WaitFullMembership(actx)
}

// WaitFullMembership waits until the ensemble's configuration lists every
// server of the harness as a participant, and the ensemble is healthy
// (WaitHealthy).
func (e *ZooKeeperEnsemble) WaitFullMembership(ctx context.Context) error {
	conn, err := e.adminConn(ctx, -1)
	if err != nil {
		return err
	}
	defer conn.Close()
	err = poll(ctx, 50*time.Millisecond, func(ctx context.Context) error {
		ms, err := zkMembers(ctx, conn)
		if err != nil {
			return err
		}
		if len(ms) != len(e.Servers) {
			return fmt.Errorf("%d servers in the configuration, not %d", len(ms), len(e.Servers))
		}
		for _, s := range e.Servers {
			v, ok := ms[s.ID]
			switch {
			case !ok:
				return fmt.Errorf("%s is not in the configuration", s.Name)
			case !strings.Contains(v, ":participant"):
				return fmt.Errorf("%s is not a participant (%s)", s.Name, v)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("integration: ZooKeeper membership: %w", err)
	}
	return e.WaitHealthy(ctx)
}
