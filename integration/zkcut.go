package integration

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

// zkCutGate is a connection's part in CutClient: while a cut is in force,
// what the client writes is kept (and written when the cut heals), what
// the servers send is held (zkCaptureConn's hold), and a dial waits as an
// unanswered SYN would.
type zkCutGate struct {
	// mu is held for reading by every Write across its socket write, and
	// for writing to start or end a cut: once a cut has started, no Write
	// is in the socket.
	mu  sync.RWMutex
	cut *zkCut // the cut in force, nil if none
}

// zkCut is one CutClient.
type zkCut struct {
	healed chan struct{} // closed when the cut heals
	// guarded by the gate's mu (held for writing, or for reading with pmu)
	pmu     sync.Mutex
	pending map[*zkCaptureConn][]byte // written by the client meanwhile
	order   []*zkCaptureConn          // pending's connections, first write first
	reads   []*zkCaptureConn          // connections whose replies the cut holds
}

// Write writes p, or keeps it while the client is cut off: a socket whose
// peer is unreachable takes the bytes too, and the network delivers them
// once the partition heals, or never if the connection is closed first.
func (c *zkCaptureConn) Write(p []byte) (int, error) {
	g := &c.s.gate
	g.mu.RLock()
	defer g.mu.RUnlock()
	k := g.cut
	if k == nil {
		return c.Conn.Write(p)
	}
	k.pmu.Lock()
	defer k.pmu.Unlock()
	select {
	case <-c.closed:
		return 0, &net.OpError{Op: "write", Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: net.ErrClosed}
	default:
	}
	if _, ok := k.pending[c]; !ok {
		k.order = append(k.order, c)
	}
	k.pending[c] = append(k.pending[c], p...)
	return len(p), nil
}

// adopt makes w the session's connection, held at once if a cut is in
// force (its dial passed the wait just before the cut began).
func (s *zkSession) adopt(w *zkCaptureConn, address string) {
	s.gate.mu.RLock()
	defer s.gate.mu.RUnlock()
	if k := s.gate.cut; k != nil {
		w.hold()
		k.pmu.Lock()
		k.reads = append(k.reads, w)
		k.pmu.Unlock()
	}
	s.mu.Lock()
	s.conn, s.addr = w, address
	s.mu.Unlock()
}

// waitUncut waits up to timeout while the session's client is cut off,
// as a connection attempt whose SYN goes unanswered would.
func (s *zkSession) waitUncut(timeout time.Duration) error {
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		s.gate.mu.RLock()
		k := s.gate.cut
		s.gate.mu.RUnlock()
		if k == nil {
			return nil
		}
		select {
		case <-k.healed:
		case <-t.C:
			return errUnanswered{"every server (the client is cut off)"}
		case <-s.e.stop:
			return errors.New("integration: ZooKeeper ensemble closed")
		}
	}
}

// CutClient cuts conn's client off from every server, while the servers
// keep their quorum and their other clients: nothing the client sends
// reaches a server (its writes are kept, as a socket whose peer is
// unreachable keeps them), nothing a server sends reaches it, and a
// connection it tries to open meanwhile waits as an unanswered SYN would,
// until the cut heals or the client's connect timeout passes. It returns
// once no write of the client is in its socket and no read delivers any
// more. A client cut off longer than its receive timeout gives up on its
// connection and tries the others; one cut off past its session timeout
// finds its session expired once it gets through.
//
// heal delivers what was held, in order, on a connection still open (one
// closed meanwhile, by the client or DropConnection, loses it), and lets
// new connections through. Calling it again does nothing.
func (e *ZooKeeperEnsemble) CutClient(conn *zk.Conn) (heal func(), err error) {
	s, err := e.session(conn)
	if err != nil {
		return nil, err
	}
	k := &zkCut{healed: make(chan struct{}), pending: map[*zkCaptureConn][]byte{}}
	s.gate.mu.Lock()
	if s.gate.cut != nil {
		s.gate.mu.Unlock()
		return nil, errors.New("integration: cut client: already cut off")
	}
	s.gate.cut = k
	s.mu.Lock()
	c, addr, id := s.conn, s.addr, s.id
	s.mu.Unlock()
	var stopped <-chan struct{}
	cc, _ := c.(*zkCaptureConn)
	if cc != nil {
		stopped = cc.hold()
		k.reads = append(k.reads, cc)
	}
	s.gate.mu.Unlock()
	e.cfg.logger.Info("integration: cut client", "session", fmt.Sprintf("%#x", id), "addr", addr)
	var once sync.Once
	heal = func() {
		once.Do(func() {
			s.gate.mu.Lock()
			for _, w := range k.order {
				select {
				case <-w.closed:
					continue // lost with the connection
				default:
				}
				w.Conn.Write(k.pending[w]) // a failure is the connection's to report
			}
			s.gate.cut = nil
			close(k.healed)
			reads := k.reads
			s.gate.mu.Unlock()
			for _, w := range reads {
				w.release()
			}
			e.cfg.logger.Info("integration: heal client", "session", fmt.Sprintf("%#x", id))
		})
	}
	if cc == nil {
		return heal, nil
	}
	// Verified like HoldReplies: a Read in the socket has come back.
	t := time.NewTimer(verifyTimeout)
	defer t.Stop()
	select {
	case <-stopped:
	case <-cc.closed:
	case <-t.C:
		heal()
		return nil, e.fail(fmt.Errorf("integration: cut client of session %#x: the client's read in progress did not stop within %v", id, verifyTimeout))
	}
	return heal, nil
}
