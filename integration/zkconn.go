package integration

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"
)

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
	// entered, if not nil (tests), is called each time a Read goes into
	// the socket's Read.
	entered func()
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
			entered := c.entered
			c.hmu.Unlock()
			if entered != nil {
				entered()
			}
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
