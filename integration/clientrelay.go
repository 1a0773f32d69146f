package integration

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// ClientRelay stands between one client and a cluster's servers: one
// loopback listener per server, each forwarding every connection to that
// server's address (for a harness cluster, the server's client proxy, so
// that the cluster's own faults still apply). Its faults hit this one
// client only — the servers keep talking to each other and to every other
// client —, which the cluster's faults, set per server, cannot do:
//
//   - HoldReplies holds what the servers send the client on the
//     connections open now, while its requests still reach them and are
//     applied; release delivers what was held, in order.
//   - Cut holds every byte both ways on every connection of the client,
//     those it opens meanwhile included (a partition between the client
//     and all the servers); heal delivers what was held, or Reset closes
//     the connections and what was held is lost.
//
// Each fault is verified before its method returns: no chunk it must
// hold is still on its way through the relay.
type ClientRelay struct {
	log *slog.Logger
	lns []net.Listener
	ups []string

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every change below
	links   map[*relayLink]struct{}
	cuts    int // Cuts in force: every byte both ways is held
}

// Directions through a ClientRelay.
const (
	toServer = 0
	toClient = 1
)

// relayLink is one connection through a ClientRelay.
type relayLink struct {
	client, server net.Conn
	done           chan struct{} // closed when the link ends
	// guarded by the relay's mu
	holds    int    // HoldReplies in force on this link
	inflight [2]int // chunks past the gate, not yet written, per direction
}

// NewClientRelay listens on a free loopback port for each of upstreams
// (host:port); Addrs lists them in the same order. Close it when done.
func NewClientRelay(upstreams []string, log *slog.Logger) (*ClientRelay, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &ClientRelay{log: log, ups: upstreams, ctx: ctx, cancel: cancel,
		changed: make(chan struct{}), links: map[*relayLink]struct{}{}}
	for _, up := range upstreams {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			r.Close()
			return nil, err
		}
		r.lns = append(r.lns, ln)
		r.wg.Add(1)
		go r.serve(ln, up)
	}
	return r, nil
}

// Addrs returns the relay's addresses, host:port, one per upstream.
func (r *ClientRelay) Addrs() []string {
	out := make([]string, len(r.lns))
	for i, ln := range r.lns {
		out[i] = ln.Addr().String()
	}
	return out
}

// Close stops listening and closes every connection through the relay.
func (r *ClientRelay) Close() error {
	r.cancel()
	var errs []error
	for _, ln := range r.lns {
		errs = append(errs, ln.Close())
	}
	r.mu.Lock()
	for l := range r.links {
		l.client.Close()
		if l.server != nil {
			l.server.Close()
		}
	}
	r.mu.Unlock()
	r.wg.Wait()
	return errors.Join(errs...)
}

// notify wakes the gates and the waiters; the caller holds mu.
func (r *ClientRelay) notify() {
	close(r.changed)
	r.changed = make(chan struct{})
}

func (r *ClientRelay) serve(ln net.Listener, upstream string) {
	defer r.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		l := &relayLink{client: c, done: make(chan struct{})}
		r.mu.Lock()
		if r.ctx.Err() != nil {
			r.mu.Unlock()
			c.Close()
			return
		}
		r.links[l] = struct{}{}
		r.mu.Unlock()
		r.wg.Add(1)
		go r.handle(l, upstream)
	}
}

func (r *ClientRelay) handle(l *relayLink, upstream string) {
	defer r.wg.Done()
	defer func() {
		r.mu.Lock()
		delete(r.links, l)
		r.notify()
		r.mu.Unlock()
		l.client.Close()
	}()
	server, err := (&net.Dialer{}).DialContext(r.ctx, "tcp", upstream)
	if err != nil {
		return
	}
	r.mu.Lock()
	l.server = server
	closed := r.ctx.Err() != nil
	r.mu.Unlock()
	if closed {
		server.Close()
		return
	}
	ended := make(chan struct{}, 2)
	go func() { r.pump(l, toServer, server, l.client); ended <- struct{}{} }()
	go func() { r.pump(l, toClient, l.client, server); ended <- struct{}{} }()
	// When either direction ends, end both: the other pump is in a Read
	// (closing the sockets ends it) or held at the gate (done ends it).
	<-ended
	close(l.done)
	l.client.Close()
	server.Close()
	<-ended
}

// pump copies bytes from src to dst, one chunk at a time, each through the
// gate of its direction.
func (r *ClientRelay) pump(l *relayLink, dir int, dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !r.pass(l, dir) {
				return
			}
			_, werr := dst.Write(buf[:n])
			r.passed(l, dir)
			if werr != nil {
				return
			}
		}
		if err != nil {
			// A hang-up is news from the other end too: while held it
			// waits like bytes, or a cut would let it through.
			if !errors.Is(err, io.EOF) || !r.pass(l, dir) {
				return
			}
			if cw, ok := dst.(interface{ CloseWrite() error }); ok {
				cw.CloseWrite()
			}
			r.passed(l, dir)
			return
		}
	}
}

// held reports whether l's bytes in direction dir are held; the caller
// holds mu.
func (r *ClientRelay) held(l *relayLink, dir int) bool {
	return r.cuts > 0 || dir == toClient && l.holds > 0
}

// pass waits until l's bytes in direction dir may go, and counts one
// chunk in flight; false when the link or the relay ended first.
func (r *ClientRelay) pass(l *relayLink, dir int) bool {
	r.mu.Lock()
	for r.held(l, dir) {
		ch := r.changed
		r.mu.Unlock()
		select {
		case <-ch:
		case <-l.done:
			return false
		case <-r.ctx.Done():
			return false
		}
		r.mu.Lock()
	}
	l.inflight[dir]++
	r.mu.Unlock()
	return true
}

// passed ends a chunk's flight.
func (r *ClientRelay) passed(l *relayLink, dir int) {
	r.mu.Lock()
	l.inflight[dir]--
	r.notify()
	r.mu.Unlock()
}

// quiet waits until no chunk that busy says is held is in flight, i.e.
// every one of them waits at its gate or has been written already.
func (r *ClientRelay) quiet(busy func(l *relayLink) bool) error {
	t := time.NewTimer(verifyTimeout)
	defer t.Stop()
	for {
		r.mu.Lock()
		n := 0
		for l := range r.links {
			if busy(l) {
				n++
			}
		}
		ch := r.changed
		r.mu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-ch:
		case <-t.C:
			return fmt.Errorf("%w: client relay: %d connection(s) still passing bytes after %v", ErrFaultNotVerified, n, verifyTimeout)
		case <-r.ctx.Done():
			return errors.New("integration: client relay closed")
		}
	}
}

// HoldReplies holds what the servers send the client on its connections
// open now: once it returns, nothing more arriving on them reaches the
// client, while its requests still go out and are applied. Connections
// the client opens later are not held. release delivers what was held, in
// order, and lets the connections run on; a connection closed first (by
// the client giving up on it, or Reset) loses what it held, which is how
// a client learns nothing of requests that were applied. Calling release
// again does nothing.
func (r *ClientRelay) HoldReplies() (release func(), err error) {
	r.mu.Lock()
	var held []*relayLink
	for l := range r.links {
		l.holds++
		held = append(held, l)
	}
	r.notify()
	r.mu.Unlock()
	r.log.Info("integration: client relay: hold replies", "connections", len(held))
	var once sync.Once
	release = func() {
		once.Do(func() {
			r.mu.Lock()
			for _, l := range held {
				l.holds--
			}
			r.notify()
			r.mu.Unlock()
			r.log.Info("integration: client relay: release replies", "connections", len(held))
		})
	}
	if err := r.quiet(func(l *relayLink) bool { return l.holds > 0 && l.inflight[toClient] > 0 }); err != nil {
		release()
		return nil, err
	}
	return release, nil
}

// Cut holds every byte between the client and the servers, both ways, on
// every connection, those the client opens meanwhile included: to both
// ends a partition, connections stay open and nothing arrives. It returns
// once no chunk is in flight either way. heal delivers what was held, in
// order, unless Reset closed the connections first; calling it again does
// nothing.
func (r *ClientRelay) Cut() (heal func(), err error) {
	r.mu.Lock()
	r.cuts++
	r.notify()
	n := len(r.links)
	r.mu.Unlock()
	r.log.Info("integration: client relay: cut", "connections", n)
	var once sync.Once
	heal = func() {
		once.Do(func() {
			r.mu.Lock()
			r.cuts--
			r.notify()
			r.mu.Unlock()
			r.log.Info("integration: client relay: heal")
		})
	}
	if err := r.quiet(func(l *relayLink) bool { return l.inflight[toServer]+l.inflight[toClient] > 0 }); err != nil {
		heal()
		return nil, err
	}
	return heal, nil
}

// Reset closes every connection through the relay, as a network that lost
// their state would: what they held is lost, and the client must connect
// again.
func (r *ClientRelay) Reset() {
	r.mu.Lock()
	n := len(r.links)
	for l := range r.links {
		l.client.Close()
		if l.server != nil {
			l.server.Close()
		}
	}
	r.mu.Unlock()
	r.log.Info("integration: client relay: reset", "connections", n)
}

// RelayedClient returns a client of every member that reaches them
// through a ClientRelay of its own (in front of the members' client
// proxies), and the relay, for faults on this one client's connections.
// The client is closed with the cluster, and the relay with the client.
func (c *EtcdCluster) RelayedClient() (*clientv3.Client, *ClientRelay, error) {
	var ups []string
	for _, m := range c.Members {
		ups = append(ups, m.clientProxy.Addr())
	}
	r, err := NewClientRelay(ups, c.cfg.logger)
	if err != nil {
		return nil, nil, err
	}
	var eps []string
	for _, a := range r.Addrs() {
		eps = append(eps, c.scheme()+a)
	}
	cli, err := clientv3.New(c.clientConfig(eps, 5*time.Second))
	if err != nil {
		r.Close()
		return nil, nil, err
	}
	// The relay goes with the client, which the cluster closes.
	go func() {
		<-cli.Ctx().Done()
		r.Close()
	}()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		cli.Close()
		return nil, nil, errors.New("integration: etcd cluster closed")
	}
	c.clients = append(c.clients, cli)
	return cli, r, nil
}
