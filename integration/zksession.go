package integration

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"
)

// zkSessionTimeout is the session timeout Connect asks for: long enough
// that elections and restarts do not expire sessions, short enough that a
// client cut off from every server loses its session within a test.
const zkSessionTimeout = 10 * time.Second

// zkSession is what the harness knows of one connection made by Connect:
// its session's id and password, captured from the server's answers (the
// client library does not expose the password), the TCP connection it
// uses now, and the events it has reported.
type zkSession struct {
	e *ZooKeeperEnsemble

	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every change
	state   zk.State
	expired int // StateExpired events seen
	id      int64
	passwd  []byte
	timeout int32    // negotiated session timeout, ms
	conn    net.Conn // the current TCP connection
	addr    string   // the address it was dialed at
	queue   []zk.Event
	ended   bool // the zk.Conn's event loop has ended

	gate zkCutGate // CutClient's (zkcut.go)
}

func newZKSession(e *ZooKeeperEnsemble) *zkSession {
	return &zkSession{e: e, changed: make(chan struct{})}
}

// notify wakes the waiters; the caller holds mu.
func (s *zkSession) notify() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// dial is the connection's zk.Dialer: it remembers the TCP connection and
// watches it for the server's first answer.
//
// A proxy accepts connections even while its server is cut off, where a
// real partition would leave the SYN unanswered; the client would then wait
// for its ConnectResponse ten times its receive timeout (over a minute)
// before it tries another server. So while the harness holds or drops the
// server's traffic, or CutClient cuts this client off, dial waits as an
// unanswered SYN would: until the fault ends or the client's connect
// timeout passes.
func (s *zkSession) dial(network, address string, timeout time.Duration) (net.Conn, error) {
	if err := s.e.partitioned(address, timeout); err != nil {
		return nil, &net.OpError{Op: "dial", Net: network, Err: err}
	}
	if err := s.waitUncut(timeout); err != nil {
		return nil, &net.OpError{Op: "dial", Net: network, Err: err}
	}
	c, err := net.DialTimeout(network, address, timeout)
	if err != nil {
		return nil, err
	}
	w := &zkCaptureConn{Conn: c, s: s, closed: make(chan struct{}), holdChanged: make(chan struct{})}
	s.adopt(w, address)
	return w, nil
}

// errUnanswered is a dial's error while the server is cut off.
type errUnanswered struct{ node string }

func (e errUnanswered) Error() string {
	return "integration: " + e.node + " is cut off: connect timed out"
}
func (e errUnanswered) Timeout() bool   { return true }
func (e errUnanswered) Temporary() bool { return true }

// partitioned waits up to timeout while the harness holds or drops the
// traffic between a client and the server at addr (a client proxy), and
// returns an error if it still does then.
func (e *ZooKeeperEnsemble) partitioned(addr string, timeout time.Duration) error {
	i := e.serverAt(addr)
	if i < 0 {
		return nil
	}
	node := e.Servers[i].Name
	t := time.NewTimer(timeout)
	defer t.Stop()
	for {
		// Both ways: a SYN held on its way in, or its answer on the way out.
		in, changed := e.net.applies("", node)
		out, _ := e.net.applies(node, "")
		if !in.Hold && !in.Drop && !out.Hold && !out.Drop {
			return nil
		}
		select {
		case <-changed:
		case <-t.C:
			return errUnanswered{node}
		case <-e.stop:
			return errors.New("integration: ZooKeeper ensemble closed")
		}
	}
}

// event is the connection's zk.EventCallback. It must not block.
func (s *zkSession) event(ev zk.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ev.Type == zk.EventSession {
		s.state = ev.State
		if ev.State == zk.StateExpired {
			s.expired++
		}
	}
	s.queue = append(s.queue, ev)
	s.notify()
}

func (s *zkSession) setSession(id int64, passwd []byte, timeout int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.id, s.passwd, s.timeout = id, passwd, timeout
	s.notify()
}

func (s *zkSession) end() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ended = true
	s.notify()
}

// wait blocks until cond, called with mu held, is true.
func (s *zkSession) wait(ctx context.Context, what string, cond func() bool) error {
	for {
		s.mu.Lock()
		ok, ended, ch := cond(), s.ended, s.changed
		s.mu.Unlock()
		if ok {
			return nil
		}
		if ended {
			return fmt.Errorf("connection closed while waiting for %s", what)
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, context.Cause(ctx))
		}
	}
}

// relay hands the connection's events to out in order, dropping none
// (unlike the client library's own channel, which drops events when its
// six slots are full), until the connection ends or stop is closed.
func (s *zkSession) relay(out chan<- zk.Event, stop <-chan struct{}) {
	defer close(out)
	for {
		s.mu.Lock()
		if len(s.queue) > 0 {
			ev := s.queue[0]
			s.queue = s.queue[1:]
			s.mu.Unlock()
			select {
			case out <- ev:
			case <-stop:
				return
			}
			continue
		}
		ended, ch := s.ended, s.changed
		s.mu.Unlock()
		if ended {
			return
		}
		select {
		case <-ch:
		case <-stop:
			return
		}
	}
}

type zkNopLogger struct{}

func (zkNopLogger) Printf(string, ...any) {}

// Connect connects a client to the given servers (all when none are
// given), through their proxies, and waits until it has a session. The
// connection is closed with the ensemble. The events channel carries every
// event of the connection, none dropped, and is closed when the
// connection or the ensemble is. Sessions time out after 10s without a
// server.
func (e *ZooKeeperEnsemble) Connect(ctx context.Context, servers ...int) (*zk.Conn, <-chan zk.Event, error) {
	return e.ConnectTimeout(ctx, zkSessionTimeout, servers...)
}

// ConnectTimeout is Connect with the given session timeout (which the
// servers bound to 2 to 300 ticks of 200ms), for tests that need sessions
// to expire, or clients to give up on a silent server, sooner or later
// than Connect's.
func (e *ZooKeeperEnsemble) ConnectTimeout(ctx context.Context, timeout time.Duration, servers ...int) (*zk.Conn, <-chan zk.Event, error) {
	addrs := e.Addrs()
	if len(servers) > 0 {
		addrs = nil
		for _, i := range servers {
			addrs = append(addrs, e.Servers[i].Addr())
		}
	}
	s := newZKSession(e)
	conn, ec, err := zk.Connect(addrs, timeout,
		zk.WithLogger(zkNopLogger{}), zk.WithLogInfo(false),
		zk.WithDialer(s.dial), zk.WithEventCallback(s.event))
	if err != nil {
		return nil, nil, fmt.Errorf("integration: ZooKeeper connect to %v: %w", addrs, err)
	}
	go func() {
		for range ec {
		}
		s.end()
	}()
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		conn.Close()
		return nil, nil, errors.New("integration: ZooKeeper ensemble closed")
	}
	e.sessions[conn] = s
	e.mu.Unlock()
	out := make(chan zk.Event, 16)
	go s.relay(out, e.stop)
	if err := s.wait(ctx, "a session", func() bool { return s.state == zk.StateHasSession }); err != nil {
		e.mu.Lock()
		delete(e.sessions, conn)
		e.mu.Unlock()
		conn.Close()
		return nil, nil, fmt.Errorf("integration: ZooKeeper connect to %v: %w", addrs, err)
	}
	return conn, out, nil
}

func (e *ZooKeeperEnsemble) session(conn *zk.Conn) (*zkSession, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	s, ok := e.sessions[conn]
	if !ok {
		return nil, errors.New("integration: not a connection made by this ensemble's Connect")
	}
	return s, nil
}

// serverAt returns the index of the server whose client proxy is at addr,
// or -1.
func (e *ZooKeeperEnsemble) serverAt(addr string) int {
	for i, s := range e.Servers {
		if s.Addr() == addr {
			return i
		}
	}
	return -1
}

// DropConnection closes conn's TCP connection under it, as a network
// failure would. The client reconnects and, within the session timeout,
// keeps its session: ephemeral nodes and watches survive.
func (e *ZooKeeperEnsemble) DropConnection(conn *zk.Conn) error {
	s, err := e.session(conn)
	if err != nil {
		return err
	}
	s.mu.Lock()
	c, addr, id := s.conn, s.addr, s.id
	s.mu.Unlock()
	if c == nil {
		return errors.New("integration: drop connection: not connected")
	}
	e.cfg.logger.Info("integration: drop connection", "session", fmt.Sprintf("%#x", id), "addr", addr)
	if err := c.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
		return err
	}
	return nil
}

// HoldReplies holds what the servers send to conn: once it returns, nothing
// arriving on conn's current TCP connection reaches the client, while its
// requests still go out and are applied. Only this client is affected —
// other clients and the traffic between servers are not —, so it is a
// fault on the client's side of the connection, such as a request whose
// answer is lost. release delivers what was held, in order, and lets the
// connection run on; if the connection is closed first (DropConnection,
// or the client giving up on it), what was held is lost, which is how a
// client learns of a request that was applied but never answered. Calling
// release again, or after the connection is closed, does nothing.
//
// While held, the client's own read deadline still applies: a client that
// hears nothing for its receive timeout (two thirds of the session
// timeout) closes the connection and reconnects by itself. The hold
// covers the TCP connection conn uses when HoldReplies is called; the
// connection the client makes after it is not held.
func (e *ZooKeeperEnsemble) HoldReplies(conn *zk.Conn) (release func(), err error) {
	s, err := e.session(conn)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	c, addr, id := s.conn, s.addr, s.id
	s.mu.Unlock()
	cc, ok := c.(*zkCaptureConn)
	if !ok {
		return nil, errors.New("integration: hold replies: not connected")
	}
	e.cfg.logger.Info("integration: hold replies", "session", fmt.Sprintf("%#x", id), "addr", addr)
	stopped := cc.hold()
	var once sync.Once
	release = func() {
		once.Do(func() {
			e.cfg.logger.Info("integration: release replies", "session", fmt.Sprintf("%#x", id), "addr", addr)
			cc.release()
		})
	}
	// Verified: the client's Read, if one was in the socket, has come back
	// (the read deadline in the past interrupts it at once), so nothing
	// the server sends from now on reaches the client.
	t := time.NewTimer(verifyTimeout)
	defer t.Stop()
	select {
	case <-stopped:
	case <-cc.closed:
		// Closed: nothing more is delivered on this connection at all.
	case <-t.C:
		release()
		return nil, e.fail(fmt.Errorf("integration: hold replies of session %#x: the client's read in progress did not stop within %v; replies are not held",
			id, verifyTimeout))
	}
	return release, nil
}
