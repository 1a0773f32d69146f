package integration

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/go-zookeeper/zk"
)

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
