package integration

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
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
// server's traffic, dial waits as an unanswered SYN would: until the fault
// ends or the client's connect timeout passes.
func (s *zkSession) dial(network, address string, timeout time.Duration) (net.Conn, error) {
	if err := s.e.partitioned(address, timeout); err != nil {
		return nil, &net.OpError{Op: "dial", Net: network, Err: err}
	}
	c, err := net.DialTimeout(network, address, timeout)
	if err != nil {
		return nil, err
	}
	w := &zkCaptureConn{Conn: c, s: s, closed: make(chan struct{}), holdChanged: make(chan struct{})}
	s.mu.Lock()
	s.conn, s.addr = w, address
	s.mu.Unlock()
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

// zkCaptureConn passes a connection's bytes through unchanged and parses
// the first message the server sends, its ConnectResponse, for the
// session's id and password. While held (HoldReplies), its Read delivers
// nothing: the server's bytes wait in the socket until the hold is
// released, or are lost with the connection when it is closed first.
type zkCaptureConn struct {
	net.Conn
	s *zkSession
	// Read is called by one goroutine at a time (the client's connect
	// step, then its receive loop), so these need no lock.
	buf    []byte
	parsed bool

	closeOnce sync.Once
	closed    chan struct{} // closed by Close

	hmu         sync.Mutex
	held        bool
	holdChanged chan struct{} // closed and replaced when held changes
	// deadline is the read deadline the client asked for. While held, or
	// while a hold has interrupted a Read, the socket's own read deadline
	// is in the past instead.
	deadline    time.Time
	interrupted bool
	// reading is true while Read is in the socket's Read, past the hold
	// check; stopped, if not nil, is closed when that Read returns. A hold
	// takes effect only once no Read is there: bytes such a Read gets are
	// delivered.
	reading bool
	stopped chan struct{}
}

func (c *zkCaptureConn) Read(p []byte) (int, error) {
	for {
		if err := c.awaitUnheld(); err != nil {
			return 0, err
		}
		n, err := c.Conn.Read(p)
		c.readReturned()
		if n == 0 && err != nil && isTimeout(err) && c.holdInterrupted() {
			continue // a hold cut this Read short, not the client's deadline
		}
		if !c.parsed && n > 0 {
			c.buf = append(c.buf, p[:n]...)
			c.parse()
		}
		return n, err
	}
}

// awaitUnheld blocks while the connection is held, until the hold is
// released (then it restores the client's read deadline on the socket),
// the connection is closed (net.ErrClosed), or the client's read deadline
// passes (a timeout, as a Read with nothing arriving would return).
func (c *zkCaptureConn) awaitUnheld() error {
	for {
		c.hmu.Lock()
		if !c.held {
			if c.interrupted {
				c.interrupted = false
				c.Conn.SetReadDeadline(c.deadline)
			}
			c.reading = true
			c.hmu.Unlock()
			return nil
		}
		changed, deadline := c.holdChanged, c.deadline
		c.hmu.Unlock()
		var expire <-chan time.Time
		var t *time.Timer
		if !deadline.IsZero() {
			t = time.NewTimer(time.Until(deadline))
			expire = t.C
		}
		var err error
		select {
		case <-changed:
		case <-c.closed:
			err = net.ErrClosed
		case <-expire:
			err = os.ErrDeadlineExceeded
		}
		if t != nil {
			t.Stop()
		}
		if err != nil {
			return &net.OpError{Op: "read", Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: err}
		}
	}
}

// holdInterrupted reports whether a Read that timed out may have been cut
// short by a hold (and not by the client's own deadline), so that Read
// should wait and read again.
func (c *zkCaptureConn) holdInterrupted() bool {
	c.hmu.Lock()
	defer c.hmu.Unlock()
	if !c.held && !c.interrupted {
		return false
	}
	return c.deadline.IsZero() || time.Now().Before(c.deadline)
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// readReturned records that a Read in the socket has returned.
func (c *zkCaptureConn) readReturned() {
	c.hmu.Lock()
	defer c.hmu.Unlock()
	c.reading = false
	if c.stopped != nil {
		close(c.stopped)
		c.stopped = nil
	}
}

// hold stops Read from delivering: a Read blocked in the socket now is cut
// short (by a read deadline in the past) and waits too. It returns a
// channel closed once no Read is in the socket any more, from when on
// nothing the server sends is delivered until release.
func (c *zkCaptureConn) hold() <-chan struct{} {
	c.hmu.Lock()
	defer c.hmu.Unlock()
	if !c.held {
		c.held, c.interrupted = true, true
		c.Conn.SetReadDeadline(time.Unix(1, 0))
		close(c.holdChanged)
		c.holdChanged = make(chan struct{})
	}
	if !c.reading {
		done := make(chan struct{})
		close(done)
		return done
	}
	if c.stopped == nil {
		c.stopped = make(chan struct{})
	}
	return c.stopped
}

// release ends a hold: Read delivers what was held, then what follows.
func (c *zkCaptureConn) release() {
	c.hmu.Lock()
	defer c.hmu.Unlock()
	if !c.held {
		return
	}
	c.held = false
	c.Conn.SetReadDeadline(c.deadline) // fails harmlessly once closed
	close(c.holdChanged)
	c.holdChanged = make(chan struct{})
}

func (c *zkCaptureConn) SetReadDeadline(t time.Time) error {
	c.hmu.Lock()
	defer c.hmu.Unlock()
	c.deadline = t
	if c.held || c.interrupted {
		return nil // applied when the hold ends
	}
	return c.Conn.SetReadDeadline(t)
}

func (c *zkCaptureConn) SetDeadline(t time.Time) error {
	if err := c.SetReadDeadline(t); err != nil {
		return err
	}
	return c.Conn.SetWriteDeadline(t)
}

// Close closes the connection; a held Read returns at once, and what the
// hold kept is lost.
func (c *zkCaptureConn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

func (c *zkCaptureConn) parse() {
	if len(c.buf) < 4 {
		return
	}
	l := int(binary.BigEndian.Uint32(c.buf))
	if l > 1<<16 {
		c.parsed, c.buf = true, nil
		return
	}
	if len(c.buf) < 4+l {
		return
	}
	r, err := parseConnectResponse(c.buf[4 : 4+l])
	c.parsed, c.buf = true, nil
	if err == nil && r.sessionID != 0 {
		c.s.setSession(r.sessionID, r.passwd, r.timeout)
	}
}

type connectResponse struct {
	timeout   int32
	sessionID int64
	passwd    []byte
}

// parseConnectResponse decodes ZooKeeper's ConnectResponse (without its
// length prefix): protocolVersion int32, timeOut int32, sessionId int64,
// passwd (int32 length, bytes), and maybe readOnly bool.
func parseConnectResponse(b []byte) (connectResponse, error) {
	if len(b) < 20 {
		return connectResponse{}, fmt.Errorf("ConnectResponse of %d bytes", len(b))
	}
	r := connectResponse{
		timeout:   int32(binary.BigEndian.Uint32(b[4:8])),
		sessionID: int64(binary.BigEndian.Uint64(b[8:16])),
	}
	n := int(int32(binary.BigEndian.Uint32(b[16:20])))
	if n < 0 || len(b) < 20+n {
		return connectResponse{}, errors.New("ConnectResponse: bad password length")
	}
	r.passwd = append([]byte(nil), b[20:20+n]...)
	return r, nil
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

// ExpireSession expires conn's session on the servers, for real: it
// attaches a second connection to the session (with its id and password)
// on a server other than conn's, closes the session through it, and waits
// until conn reports zk.StateExpired. The session's ephemeral nodes are
// gone when it returns. (The client then starts a new session by itself.)
func (e *ZooKeeperEnsemble) ExpireSession(ctx context.Context, conn *zk.Conn) error {
	s, err := e.session(conn)
	if err != nil {
		return err
	}
	s.mu.Lock()
	id, passwd, timeout, addr, seen := s.id, s.passwd, s.timeout, s.addr, s.expired
	s.mu.Unlock()
	if id == 0 || id != conn.SessionID() {
		return fmt.Errorf("integration: expire session: the connection has no session (state %v)", conn.State())
	}
	e.cfg.logger.Info("integration: expire session", "session", fmt.Sprintf("%#x", id))
	attached := e.serverAt(addr)
	var refused error
	err = poll(ctx, 50*time.Millisecond, func(ctx context.Context) error {
		// Another server than conn's: reattaching the session on conn's own
		// server would close conn there, and conn's reconnection could
		// close ours in turn.
		modes := e.modes(ctx)
		target := -1
		for i, m := range modes {
			if serves(m) && (target == -1 || target == attached) {
				target = i
			}
		}
		if target == -1 {
			return fmt.Errorf("no server serves (modes %q)", modes)
		}
		err := closeZKSession(ctx, e.Servers[target].clientAddr, id, passwd, timeout)
		if errors.Is(err, errSessionRefused) {
			// Gone already (an earlier attempt closed it and lost the
			// reply), as far as the servers can tell.
			refused = err
			return nil
		}
		return err
	})
	if err == nil {
		err = s.wait(ctx, "the connection to report StateExpired", func() bool { return s.expired > seen })
		if err != nil && refused != nil {
			err = fmt.Errorf("%w (%v)", err, refused)
		}
	}
	if err != nil {
		return fmt.Errorf("integration: expire session %#x: %w", id, err)
	}
	return nil
}

// errSessionRefused: a server answered a reconnection to a session with
// session id 0, as it does for a session that is gone.
var errSessionRefused = errors.New("the server refused the session (expired, or a wrong password)")

// closeZKSession speaks ZooKeeper's client protocol on a connection of its
// own: it reattaches session id (ConnectRequest with its password), then
// closes it (closeSession request) and reads the reply. A session the
// server already refuses counts as closed.
func closeZKSession(ctx context.Context, addr string, id int64, passwd []byte, timeout int32) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	// ConnectRequest: protocolVersion int32, lastZxidSeen int64, timeOut
	// int32, sessionId int64, passwd buffer, readOnly bool.
	req := binary.BigEndian.AppendUint32(nil, 0)
	req = binary.BigEndian.AppendUint64(req, 0)
	req = binary.BigEndian.AppendUint32(req, uint32(timeout))
	req = binary.BigEndian.AppendUint64(req, uint64(id))
	req = binary.BigEndian.AppendUint32(req, uint32(len(passwd)))
	req = append(req, passwd...)
	req = append(req, 0)
	if err := writeFrame(c, req); err != nil {
		return err
	}
	b, err := readFrame(c)
	if err != nil {
		return fmt.Errorf("reading ConnectResponse: %w", err)
	}
	r, err := parseConnectResponse(b)
	if err != nil {
		return err
	}
	if r.sessionID == 0 {
		return errSessionRefused
	}
	if r.sessionID != id {
		return fmt.Errorf("the server attached session %#x, not %#x", r.sessionID, id)
	}
	// RequestHeader: xid int32, type int32 (closeSession = -11).
	const xid = 1
	closeSession := int32(-11)
	var hdr []byte
	hdr = binary.BigEndian.AppendUint32(hdr, xid)
	hdr = binary.BigEndian.AppendUint32(hdr, uint32(closeSession))
	if err := writeFrame(c, hdr); err != nil {
		return err
	}
	for {
		b, err := readFrame(c)
		if err != nil {
			return fmt.Errorf("reading the closeSession reply: %w", err)
		}
		// ReplyHeader: xid int32, zxid int64, err int32.
		if len(b) < 16 {
			return fmt.Errorf("reply of %d bytes", len(b))
		}
		if int32(binary.BigEndian.Uint32(b[:4])) != xid {
			continue // a notification
		}
		if code := int32(binary.BigEndian.Uint32(b[12:16])); code != 0 {
			return fmt.Errorf("closeSession: error %d", code)
		}
		return nil
	}
}

func writeFrame(w io.Writer, b []byte) error {
	_, err := w.Write(append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...))
	return err
}

func readFrame(r io.Reader) ([]byte, error) {
	var l [4]byte
	if _, err := io.ReadFull(r, l[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(l[:])
	if n > 1<<20 {
		return nil, fmt.Errorf("frame of %d bytes", n)
	}
	b := make([]byte, n)
	_, err := io.ReadFull(r, b)
	return b, err
}
