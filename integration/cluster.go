package integration

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/distlock/distlock/internal/proc"
)

// cluster is what an EtcdCluster and a ZooKeeperEnsemble share: their
// configuration and directory, the faults among their servers, the process
// table their proxies consult, and the faults that work the same on any
// server. The two types embed it, so those methods are written once.
//
// Every fault it injects is verified before the method returns, and a
// fault that did not take effect is an error (see Cut, Pause, Kill): a
// partition test whose partition partitioned nothing must fail, not pass.
type cluster struct {
	cfg     config
	net     *Network
	procs   *procs
	dir     string
	nodes   []*node
	proxies []*Proxy

	// t, when the cluster was made for a test (NewEtcd, NewZooKeeper),
	// is marked failed by a fault that did not take effect, so that a
	// caller that drops the error still fails.
	t testing.TB
	// isolated probes whether server i, cut off, has noticed it: ok when
	// it has lost its leader (etcd) or stopped serving (ZooKeeper); saw
	// says what it reports instead.
	isolated func(ctx context.Context, i int) (ok bool, saw string, err error)
}

func newCluster(cfg config, dir string) cluster {
	return cluster{cfg: cfg, net: newNetwork(), procs: newProcs(cfg.logger), dir: dir}
}

// newProxy makes a proxy for node's server at upstream on the cluster's
// network, and keeps it for the audits of Cut.
func (c *cluster) newProxy(node, upstream string) (*Proxy, error) {
	p, err := newProxy(c.net, node, upstream, c.procs.identify)
	if err == nil {
		c.proxies = append(c.proxies, p)
	}
	return p, err
}

// node is one server as the shared methods see it.
type node struct {
	// Name is the server's name, also its name in the cluster's Network.
	Name string

	srv   server
	procs *procs
}

// PID returns the server's process ID (0 when it is not running). For a
// container it is the container's main process as the host sees it.
func (n *node) PID() int { return n.srv.pid() }

// run starts the server and tells the proxies its PID.
func (n *node) run() error {
	if err := n.srv.start(); err != nil {
		return err
	}
	n.procs.set(n.Name, n.srv.pid())
	return nil
}

// Network returns the faults the cluster's proxies apply, for faults
// beyond Cut and Heal (dropping or delaying bytes, one direction only).
// Faults set there directly are not verified; CheckAttribution at least
// audits that they apply to every connection of their server.
func (c *cluster) Network() *Network { return c.net }

// verifyTimeout is how long the harness waits for a fault to show its
// effect before it reports that the fault did not take effect. Generous:
// on a loaded machine an election timeout can stretch to seconds.
const verifyTimeout = 30 * time.Second

// ErrFaultNotVerified is wrapped by every error of a fault that the
// harness could not see take effect (a cut the server did not notice, a
// pause that left the process running, a kill that left it alive).
var ErrFaultNotVerified = errors.New("integration: fault not verified")

// fail reports a fault that did not take effect: it returns err (wrapping
// ErrFaultNotVerified) and, for a cluster made for a running test, marks
// the test failed as well.
func (c *cluster) fail(err error) error {
	if err == nil {
		return nil
	}
	err = fmt.Errorf("%w: %w", ErrFaultNotVerified, err)
	if c.t != nil && c.t.Context().Err() == nil {
		c.t.Errorf("%v", err)
	}
	return err
}

// Kill sends SIGKILL to server i and waits until it is gone: it fails if
// the process still exists after verifyTimeout. Its data stays for Restart.
func (c *cluster) Kill(i int) error {
	n := c.nodes[i]
	pid := n.srv.pid()
	err := n.srv.kill()
	c.procs.set(n.Name, 0)
	if err != nil {
		return c.fail(err)
	}
	if pid != 0 {
		if err := waitProcState(pid, func(st byte) bool { return st == 0 || st == 'Z' || st == 'X' }); err != nil {
			return c.fail(fmt.Errorf("integration: kill %s: process %d is not gone: %w", n.Name, pid, err))
		}
	}
	return nil
}

// Pause stops server i with SIGSTOP: it keeps its connections but answers
// nothing, like a process in a long GC pause. It returns once the kernel
// reports the process stopped (state T in /proc/PID/stat), and fails if it
// does not within verifyTimeout.
func (c *cluster) Pause(i int) error {
	n := c.nodes[i]
	pid := n.srv.pid()
	if err := n.srv.signal(syscall.SIGSTOP); err != nil {
		return err
	}
	if err := waitProcState(pid, proc.IsStopped); err != nil {
		return c.fail(fmt.Errorf("integration: pause %s: process %d did not stop: %w", n.Name, pid, err))
	}
	return nil
}

// Resume continues a paused server with SIGCONT, and returns once the
// process is no longer stopped.
func (c *cluster) Resume(i int) error {
	n := c.nodes[i]
	pid := n.srv.pid()
	if err := n.srv.signal(syscall.SIGCONT); err != nil {
		return err
	}
	if err := waitProcState(pid, func(st byte) bool { return st != 'T' && st != 't' }); err != nil {
		return c.fail(fmt.Errorf("integration: resume %s: process %d is still stopped: %w", n.Name, pid, err))
	}
	return nil
}

// Cut partitions server i from clients and the other servers: its proxies
// hold every byte to and from it, connections stay open, and Heal delivers
// what was held.
//
// Cut returns once the cut has taken effect, and fails (returns an error,
// and marks the test failed for a cluster made by NewEtcd or NewZooKeeper)
// when it has not within verifyTimeout. It checks two things. First, that
// no open connection of server i goes unheld: every connection the
// proxies treat as a client's is looked up again, and one that belongs to
// a server is attributed to it (CheckAttribution). Second, that the
// server noticed: an etcd member reports no leader, a ZooKeeper server
// stops serving (it leaves the quorum and looks for a leader). The second check is skipped, and
// only the first made, when it cannot apply: a cluster of one server
// (which leads itself, cut or not), or a server that is not running or is
// paused (it cannot notice anything until it runs again).
func (c *cluster) Cut(i int) error {
	n := c.nodes[i]
	c.cfg.logger.Info("integration: cut", "node", n.Name)
	c.net.Set(n.Name, Fault{Hold: true})
	return c.fail(c.verifyCut(i))
}

func (c *cluster) verifyCut(i int) error {
	n := c.nodes[i]
	start := time.Now()
	if err := c.CheckAttribution(); err != nil {
		return fmt.Errorf("integration: cut %s did not take effect: %w", n.Name, err)
	}
	if len(c.nodes) < 2 || c.isolated == nil {
		return nil
	}
	pid := n.srv.pid()
	if pid == 0 {
		c.cfg.logger.Info("integration: cut of a server that is not running; its effect is not verified", "node", n.Name)
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), verifyTimeout)
	defer cancel()
	var saw string
	err := poll(ctx, 50*time.Millisecond, func(ctx context.Context) error {
		if n.srv.pid() != pid {
			return nil // killed meanwhile: nothing left to verify
		}
		if st, _ := proc.State(pid); proc.IsStopped(st) {
			saw = "paused"
			return nil // a paused server notices nothing until resumed
		}
		ok, s, err := c.isolated(ctx, i)
		switch {
		case err != nil:
			saw = "could not be asked: " + err.Error()
			return err
		case !ok:
			saw = "still " + s
			return fmt.Errorf("%s %s", n.Name, s)
		}
		return nil
	})
	if err != nil {
		aerr := c.CheckAttribution()
		return fmt.Errorf("integration: cut %s did not take effect within %v: it %s (%v); audit: %v; connections:\n%s",
			n.Name, verifyTimeout, saw, err, aerr, c.describeLinks())
	}
	if saw == "paused" {
		c.cfg.logger.Info("integration: cut of a paused server; only its connections are verified", "node", n.Name)
		return nil
	}
	c.cfg.logger.Info("integration: cut took effect", "node", n.Name, "after", time.Since(start).Round(time.Millisecond))
	return nil
}

// CheckAttribution audits the cluster's open proxied connections: each
// one treated as a client's is looked up again, exactly (both addresses,
// a live socket), and if one of the cluster's servers opened it, it is
// attributed to that server from now on, so that faults on the server
// apply to it. That is expected, and only logged, for a connection made
// before the harness knew its server's PID (a container's process starts
// before the harness learns its PID) or whose socket was not listed yet
// when it was accepted. It is an error when the lookup at accept time had
// found another socket: the lookup is wrong, and faults set before this
// audit may have missed the connection. Cut calls it; call it after
// faults set on Network directly.
func (c *cluster) CheckAttribution() error {
	type entry struct {
		proxy string
		l     *link
	}
	var es []entry
	for _, p := range c.proxies {
		for _, l := range p.clientLinks() {
			es = append(es, entry{p.node, l})
		}
	}
	if len(es) == 0 {
		return nil
	}
	socks := liveSockets()
	inodes := map[uint64]bool{}
	ino := make([]uint64, len(es))
	for k, e := range es {
		local, ok1 := addrPort(e.l.peer)
		remote, ok2 := addrPort(e.l.self)
		if ok1 && ok2 {
			ino[k] = socks[[2]netip.AddrPort{local, remote}]
			if ino[k] != 0 {
				inodes[ino[k]] = true
			}
		}
	}
	owners := ownerOf(c.procs.snapshot(), inodes)
	var bad []string
	for k, e := range es {
		o := owners[ino[k]]
		if ino[k] == 0 || o == "" {
			continue
		}
		e.l.setSource(o)
		desc := fmt.Sprintf("%s -> %s's proxy at %s", e.l.peer, e.proxy, e.l.self)
		if !e.l.found || e.l.inode == ino[k] {
			c.cfg.logger.Warn("integration: a connection of "+o+" was taken for a client's; attributed now",
				"conn", desc, "listed when accepted", e.l.found)
			continue
		}
		bad = append(bad, fmt.Sprintf("%s: opened by %s (socket %d), but attributed when accepted by socket %d, owned by no server",
			desc, o, ino[k], e.l.inode))
	}
	if len(bad) > 0 {
		return fmt.Errorf("integration: %d proxied connection(s) of servers were attributed to no server, so faults on their server did not apply to them:\n  %s",
			len(bad), strings.Join(bad, "\n  "))
	}
	return nil
}

// describeLinks lists the open proxied connections and their attribution,
// for error messages.
func (c *cluster) describeLinks() string {
	var b strings.Builder
	for _, p := range c.proxies {
		p.mu.Lock()
		for l := range p.links {
			src := l.source()
			if src == "" {
				src = "client"
				if !l.found {
					src = "unattributed"
				}
			}
			fmt.Fprintf(&b, "  %s -> %s's proxy at %s: from %s\n", l.peer, p.node, l.self, src)
		}
		p.mu.Unlock()
	}
	return b.String()
}

// Heal ends any fault on server i's traffic.
func (c *cluster) Heal(i int) {
	c.cfg.logger.Info("integration: heal", "node", c.nodes[i].Name)
	c.net.Clear(c.nodes[i].Name)
}

// explain adds the servers' recent log output to an error.
func (c *cluster) explain(err error) error {
	var b strings.Builder
	for _, n := range c.nodes {
		if n.srv != nil {
			fmt.Fprintf(&b, "\n--- %s log:\n%s", n.Name, n.srv.tail())
		}
	}
	return fmt.Errorf("%w%s", err, b.String())
}

// startAttempts is how many times a cluster start is tried, each time on
// new ports and a new directory: a server whose port was taken between the
// harness choosing it and the server binding it dies at once.
const startAttempts = 3

// startWithRetry calls try until it returns a cluster or ctx ends,
// attempting startAttempts times.
func startWithRetry[C any](ctx context.Context, cfg config, kind string, try func() (C, error)) (C, error) {
	var errs []error
	for range startAttempts {
		c, err := try()
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
		cfg.logger.Warn("integration: start failed; retrying on new ports", "kind", kind, "err", err)
	}
	var zero C
	return zero, errors.Join(errs...)
}

// untilExit returns a context cancelled, with the reason, when ctx ends or
// any server exits, so that waiting for a healthy cluster fails at once
// instead of timing out.
func (c *cluster) untilExit(ctx context.Context) (context.Context, context.CancelCauseFunc) {
	wctx, cancel := context.WithCancelCause(ctx)
	for _, n := range c.nodes {
		exited := n.srv.exited()
		go func() {
			select {
			case <-exited:
				cancel(fmt.Errorf("integration: %s exited during startup", n.Name))
			case <-wctx.Done():
			}
		}()
	}
	return wctx, cancel
}
