package integration

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
)

// cluster is what an EtcdCluster and a ZooKeeperEnsemble share: their
// configuration and directory, the faults among their servers, the process
// table their proxies consult, and the faults that work the same on any
// server. The two types embed it, so those methods are written once.
type cluster struct {
	cfg   config
	net   *Network
	procs *procs
	dir   string
	nodes []*node
}

func newCluster(cfg config, dir string) cluster {
	return cluster{cfg: cfg, net: newNetwork(), procs: newProcs(), dir: dir}
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
func (c *cluster) Network() *Network { return c.net }

// Kill sends SIGKILL to server i and waits until it is gone. Its data stays
// for Restart.
func (c *cluster) Kill(i int) error {
	n := c.nodes[i]
	err := n.srv.kill()
	c.procs.set(n.Name, 0)
	return err
}

// Pause stops server i with SIGSTOP: it keeps its connections but answers
// nothing, like a process in a long GC pause.
func (c *cluster) Pause(i int) error { return c.nodes[i].srv.signal(syscall.SIGSTOP) }

// Resume continues a paused server with SIGCONT.
func (c *cluster) Resume(i int) error { return c.nodes[i].srv.signal(syscall.SIGCONT) }

// Cut partitions server i from clients and the other servers: its proxies
// hold every byte to and from it, connections stay open, and Heal delivers
// what was held.
func (c *cluster) Cut(i int) {
	c.cfg.logger.Info("integration: cut", "node", c.nodes[i].Name)
	c.net.Set(c.nodes[i].Name, Fault{Hold: true})
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
