package integration

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
)

// Proxy forwards TCP connections from a loopback address to one server
// address, applying its Network's faults to the bytes. Every connection to
// a server in a harness cluster — clients' and the other servers' — goes
// through the server's proxy, so faults never need to reset a connection.
type Proxy struct {
	ln       net.Listener
	upstream string
	node     string
	net      *Network
	identify func(peer, self net.Addr) (node string, inode uint64, found bool)

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	links  map[*link]struct{} // accepted connections, for audits
}

// link is a connection the proxy accepted, and who it was attributed to.
type link struct {
	peer, self net.Addr // the accepted connection's remote and local addresses
	inode      uint64   // the connecting socket's inode when accepted (0: not found)
	found      bool     // whether the connecting socket was found at all
	// src is the node that opened it ("" for a client). The pumps read it
	// for every chunk, so that an audit that finds a server's connection
	// taken for a client's (CheckAttribution) puts it right at once.
	src atomic.Pointer[string]
}

func (l *link) source() string {
	if s := l.src.Load(); s != nil {
		return *s
	}
	return ""
}

func (l *link) setSource(node string) { l.src.Store(&node) }

// newProxy listens on a free loopback port for node's server at upstream.
// identify names the node a connection comes from ("" for clients; see
// procs.identify).
func newProxy(nw *Network, node, upstream string, identify func(peer, self net.Addr) (string, uint64, bool)) (*Proxy, error) {
	return newProxyOn(nw, "127.0.0.1:0", node, upstream, identify)
}

// newProxyOn is newProxy listening on the loopback address listen.
func newProxyOn(nw *Network, listen, node, upstream string, identify func(peer, self net.Addr) (string, uint64, bool)) (*Proxy, error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Proxy{ln: ln, upstream: upstream, node: node, net: nw, identify: identify,
		ctx: ctx, cancel: cancel, conns: map[net.Conn]struct{}{}, links: map[*link]struct{}{}}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

// Addr returns the proxy's listening address, host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Close stops listening and closes every connection through the proxy.
func (p *Proxy) Close() error {
	p.cancel()
	err := p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
	return err
}

func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ctx.Err() != nil {
		c.Close()
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.conns, c)
	c.Close()
}

func (p *Proxy) serve() {
	defer p.wg.Done()
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(in) {
			return
		}
		p.wg.Add(1)
		go p.handle(in)
	}
}

func (p *Proxy) handle(in net.Conn) {
	defer p.wg.Done()
	defer p.untrack(in)
	l := &link{peer: in.RemoteAddr(), self: in.LocalAddr()}
	if p.identify != nil {
		src, inode, found := p.identify(l.peer, l.self)
		l.setSource(src)
		l.inode, l.found = inode, found
	}
	p.mu.Lock()
	p.links[l] = struct{}{}
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.links, l)
		p.mu.Unlock()
	}()
	// A new connection is admitted like a byte: while the node is cut
	// off, it waits here (a real partition would leave the SYN unanswered).
	if ok, err := p.net.admit(p.ctx, l.source(), p.node); !ok || err != nil {
		return
	}
	out, err := (&net.Dialer{}).DialContext(p.ctx, "tcp", p.upstream)
	if err != nil {
		return
	}
	if !p.track(out) {
		return
	}
	defer p.untrack(out)
	done := make(chan struct{}, 2)
	go func() { p.pump(out, in, l, true); done <- struct{}{} }()
	go func() { p.pump(in, out, l, false); done <- struct{}{} }()
	// When either direction ends, end both: closing both sockets unblocks
	// the other pump.
	<-done
	in.Close()
	out.Close()
	<-done
}

// clientLinks returns the open connections the proxy treats as clients'.
func (p *Proxy) clientLinks() []*link {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []*link
	for l := range p.links {
		if l.source() == "" {
			out = append(out, l)
		}
	}
	return out
}

// pump copies bytes from r to w, one chunk at a time, as the network allows:
// the bytes go to the proxy's server (inbound) or from it, and come from
// or go to whoever opened l.
func (p *Proxy) pump(w io.Writer, r io.Reader, l *link, inbound bool) {
	ends := func() (src, dst string) {
		if inbound {
			return l.source(), p.node
		}
		return p.node, l.source()
	}
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			src, dst := ends()
			ok, aerr := p.net.admit(p.ctx, src, dst)
			if aerr != nil {
				return
			}
			if ok {
				if _, werr := w.Write(buf[:n]); werr != nil {
					return
				}
			}
		}
		if err != nil {
			// A close is news from the other end too: while the node is
			// held it must wait like bytes, or a partition would let
			// hang-ups through.
			src, dst := ends()
			if _, aerr := p.net.admit(p.ctx, src, dst); aerr != nil || !errors.Is(err, io.EOF) {
				return
			}
			if cw, ok := w.(interface{ CloseWrite() error }); ok {
				cw.CloseWrite()
			}
			return
		}
	}
}

// NewProxy returns a proxy, on a network of its own, in front of any TCP
// server at upstream (host:port) — e.g. a resource a Holder writes to —
// so that a test can hold, drop or delay the requests in flight:
// p.Network().Set(p.Node(), Fault{Hold: true}) holds every byte through
// it, Clear delivers them. Close it when done.
func NewProxy(upstream string) (*Proxy, error) {
	return newProxy(newNetwork(), "upstream", upstream, nil)
}

// Network returns the network whose faults the proxy applies.
func (p *Proxy) Network() *Network { return p.net }

// Node returns the name of the proxy's server in its Network.
func (p *Proxy) Node() string { return p.node }
