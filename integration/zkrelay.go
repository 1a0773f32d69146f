package integration

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// peerRelay stands between one of a server's peer proxies (quorum or
// election) and the port the server binds, and does two things a proxy
// does not.
//
// It waits for the port. A follower connects to its leader's quorum port
// the moment it learns who won, which can be before the leader binds it.
// Without proxies that connection is refused and the follower retries; the
// proxy instead accepts it and then, its dial refused, closes it, and the
// follower gives up (and the leader waits initLimit for it). So the relay
// dials until the port answers, for up to peerDialPatience.
//
// On an election port it rewrites one field. A server that opens an
// election connection to a server with a larger id sends its own election
// address first, and the larger one drops the connection and connects back
// to that address (ZooKeeper's QuorumCnxManager): its real port, around
// the proxy. The relay replaces the address with the sender's election
// proxy, so the connection back crosses that proxy like every other.
type peerRelay struct {
	ln        net.Listener
	upstream  string
	advertise func(sid int64) string // nil: no rewriting

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
}

// peerDialPatience is how long a relay waits for a server's peer port.
const peerDialPatience = 3 * time.Second

// ZooKeeper's election protocol versions (QuorumCnxManager): a connection
// starts with the version, then the sender's id, then its address(es).
const (
	zkElectionV1 = -65536
	zkElectionV2 = -65535
)

func newPeerRelay(upstream string, advertise func(int64) string) (*peerRelay, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &peerRelay{ln: ln, upstream: upstream, advertise: advertise,
		ctx: ctx, cancel: cancel, conns: map[net.Conn]struct{}{}}
	r.wg.Add(1)
	go r.serve()
	return r, nil
}

func (r *peerRelay) Addr() string { return r.ln.Addr().String() }

func (r *peerRelay) Close() error {
	r.cancel()
	err := r.ln.Close()
	r.mu.Lock()
	for c := range r.conns {
		c.Close()
	}
	r.mu.Unlock()
	r.wg.Wait()
	return err
}

func (r *peerRelay) track(c net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ctx.Err() != nil {
		c.Close()
		return false
	}
	r.conns[c] = struct{}{}
	return true
}

func (r *peerRelay) untrack(c net.Conn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.conns, c)
	c.Close()
}

func (r *peerRelay) serve() {
	defer r.wg.Done()
	for {
		in, err := r.ln.Accept()
		if err != nil {
			return
		}
		if !r.track(in) {
			return
		}
		r.wg.Add(1)
		go r.handle(in)
	}
}

func (r *peerRelay) handle(in net.Conn) {
	defer r.wg.Done()
	defer r.untrack(in)
	var head []byte
	if r.advertise != nil {
		var err error
		if head, err = r.rewriteHeader(in); err != nil {
			return
		}
	}
	out, err := r.dial()
	if err != nil {
		return
	}
	if !r.track(out) {
		return
	}
	defer r.untrack(out)
	if len(head) > 0 {
		if _, err := out.Write(head); err != nil {
			return
		}
	}
	done := make(chan struct{}, 2)
	cp := func(w, rd net.Conn) {
		io.Copy(w, rd)
		if cw, ok := w.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
		}
		done <- struct{}{}
	}
	go cp(out, in)
	go cp(in, out)
	<-done
	in.Close()
	out.Close()
	<-done
}

// dial connects to the server's port, retrying while it is refused, for
// up to peerDialPatience.
func (r *peerRelay) dial() (net.Conn, error) {
	ctx, cancel := context.WithTimeout(r.ctx, peerDialPatience)
	defer cancel()
	for {
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", r.upstream)
		if err == nil {
			return c, nil
		}
		t := time.NewTimer(20 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, err
		case <-t.C:
		}
	}
}

// rewriteHeader reads a connection's initial message and returns it with
// the sender's address replaced by its election proxy's. ZooKeeper reads
// the message with one read, so it is sent on with one write.
func (r *peerRelay) rewriteHeader(in net.Conn) ([]byte, error) {
	var b [20]byte
	if _, err := io.ReadFull(in, b[:8]); err != nil {
		return nil, err
	}
	version := int64(binary.BigEndian.Uint64(b[:8]))
	if version != zkElectionV1 && version != zkElectionV2 {
		return b[:8], nil // an old-style id only, or unknown: pass it on
	}
	if _, err := io.ReadFull(in, b[8:20]); err != nil {
		return nil, err
	}
	sid := int64(binary.BigEndian.Uint64(b[8:16]))
	n := binary.BigEndian.Uint32(b[16:20])
	if n > 2048 {
		return nil, fmt.Errorf("election message of %d bytes", n)
	}
	addr := make([]byte, n)
	if _, err := io.ReadFull(in, addr); err != nil {
		return nil, err
	}
	if a := r.advertise(sid); a != "" {
		addr = []byte(a)
	}
	head := append([]byte(nil), b[:16]...)
	head = binary.BigEndian.AppendUint32(head, uint32(len(addr)))
	return append(head, addr...), nil
}

// electionProxyAddr is the address server sid's peers reach its election
// port at: its election proxy ("" for an unknown sid).
func (e *ZooKeeperEnsemble) electionProxyAddr(sid int64) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.electionAddrs[sid]
}
