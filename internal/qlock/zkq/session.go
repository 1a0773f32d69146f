// Package zkq is the queue-lock engine's store driver for ZooKeeper: a
// session that follows one ZooKeeper session of a *zk.Conn and confirms it
// alive by Syncs (monitor.go), and the store's part of every step of an
// acquisition (see qlock's lifecycle.go): entry names (names.go), the
// protected sequential create (create.go), the listing and the entry's
// own Stat with a watch (enqueue.go, own.go), data watches on the entry
// ahead (wait.go), and the set-data+delete release (release.go).
package zkq

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/ctxwait"
	"github.com/distlock/distlock/internal/qlock"
	"github.com/distlock/distlock/internal/zkctx"
	"github.com/go-zookeeper/zk"
)

const (
	// pollInterval is how often a Session reads its connection's state.
	pollInterval = 50 * time.Millisecond

	// MinTTL is the shortest session timeout a Session accepts.
	MinTTL = 300 * time.Millisecond
)

// Backend is ZooKeeper, as errors, metrics and spans (zookeeper) and
// logs (zklock) name it: the Backend of every session NewSession makes,
// and of ClientStore.
var Backend = qlock.Backend{Name: "zookeeper", Pkg: "zklock"}

// Session follows one ZooKeeper session of a *zk.Conn, and is the
// engine's driver on it; zklock.Session documents what users see.
type Session struct {
	conn    *zk.Conn
	id      int64
	timeout time.Duration
	tick    time.Duration // the servers' tickTime, as known
	sync    time.Duration // between Syncs
	margin  time.Duration
	prefix  string
	acl     []zk.ACL

	*qlock.State
	engine *qlock.Engine // runs acquisitions with this driver

	mu sync.Mutex
	// nodes are this session's live lock nodes: for a semaphore's slot,
	// its czxid once known (0 before), which deletes check (see
	// deleteMine).
	nodes map[string]int64
	// bells are the revocation directories this session's revocable
	// holders follow, one watch each (see FollowRevoke).
	bells map[string]*bell
	// warned are the lock names whose unknown children this session has
	// logged (warnUnknown).
	warned sync.Map
}

// Config is a session's configuration, as the zklock options set it.
type Config struct {
	qlock.Options
	Timeout time.Duration // 0: read the negotiated one from the connection
	Tick    time.Duration // the servers' tickTime; 0: ask the server
	ACL     []zk.ACL
}

// NewSession waits until conn has a ZooKeeper session and follows it until
// the session ends. The caller has checked c's prefix and tick.
func NewSession(ctx context.Context, conn *zk.Conn, c Config) (*Session, error) {
	if conn == nil {
		return nil, fmt.Errorf("zklock: new session: %w: *zk.Conn is nil", distlock.ErrNilClient)
	}
	// A connection can change sessions while this one starts (its first
	// session expired, or was never committed, before the client settled
	// on a server). Nothing is made on a session before its Sync below
	// succeeds, so the new session is followed instead, a few times at
	// most.
	for try := 1; ; try++ {
		s, err := newSession(ctx, conn, c)
		if !errors.Is(err, errSessionChanged) || try == 3 {
			return s, err
		}
		c.Logger.Debug("zklock: the connection changed sessions while the session started; following the new one", "try", try)
	}
}

// errSessionChanged reports a connection that changed ZooKeeper sessions
// while NewSession started one.
var errSessionChanged = fmt.Errorf("%w: the connection changed sessions", distlock.ErrSessionExpired)

// newSession is one try of NewSession.
func newSession(ctx context.Context, conn *zk.Conn, c Config) (*Session, error) {
	for conn.State() != zk.StateHasSession {
		if err := ctxwait.Sleep(ctx, 10*time.Millisecond); err != nil {
			return nil, fmt.Errorf("zklock: new session: waiting for the connection to have a session (state %v): %w", conn.State(), err)
		}
	}
	id := conn.SessionID()
	if c.Timeout == 0 {
		d, ok := negotiatedTimeout(conn)
		if !ok {
			return nil, fmt.Errorf("zklock: new session: cannot read the connection's session timeout; pass WithSessionTimeout")
		}
		c.Timeout = d
	}
	tickFrom := "WithTickTime"
	if c.Tick == 0 {
		// Ask the server; its answer is authoritative. Most installations
		// allow only "srvr" among the four-letter words, and then the
		// default (ZooKeeper's own) has to do.
		if d, ok := serverTickTime(ctx, conn.Server()); ok {
			c.Tick, tickFrom = d, "the server (conf)"
		} else {
			c.Tick, tickFrom = DefaultTickTime, "default"
		}
	}
	if c.Timeout < MinTTL {
		return nil, fmt.Errorf("zklock: new session: %w: %v is below the minimum %v", distlock.ErrTTLTooShort, c.Timeout, MinTTL)
	}
	syncInterval, margin := timing(c.Timeout, c.Tick)
	s := &Session{
		tick:    c.Tick,
		conn:    conn,
		id:      id,
		timeout: c.Timeout,
		sync:    syncInterval,
		margin:  margin,
		prefix:  c.Prefix,
		acl:     c.ACL,
		nodes:   map[string]int64{},
	}
	sent := time.Now()
	if _, err := zkctx.Call(ctx, func() (string, error) { return conn.Sync("/") }); err != nil {
		return nil, fmt.Errorf("zklock: new session: sync: %w", err)
	}
	if conn.SessionID() != id {
		return nil, fmt.Errorf("zklock: new session: %w", errSessionChanged)
	}
	log := c.Logger.With("session", fmt.Sprintf("%#x", id))
	s.State = qlock.NewState(Backend, log, c.Holder, uint64(id), sent.Add(s.timeout-s.margin), c.Observe)
	s.engine = qlock.New(s.State, s)
	s.SetRevocable(c.Revocable)
	s.Log().Debug("zklock: session started", "timeout", s.timeout, "tick", s.tick, "tick from", tickFrom, "margin", s.margin)
	p, answered := join(s)
	s.Finally(func() { s.monitor(sent, p, answered) })
	return s, nil
}

// CheckPrefix checks a znode prefix (WithPrefix); its error wraps
// distlock.ErrInvalidName and says what to write instead.
func CheckPrefix(p string) error {
	if !strings.HasPrefix(p, "/") || strings.HasSuffix(p, "/") || strings.Contains(p, "//") {
		var parts []string
		for _, part := range strings.Split(p, "/") {
			if part != "" {
				parts = append(parts, part)
			}
		}
		if len(parts) == 0 {
			return fmt.Errorf("%w: prefix %q: want an absolute znode path without a trailing '/', such as %q", distlock.ErrInvalidName, p, "/distlock")
		}
		return fmt.Errorf("%w: prefix %q: want an absolute znode path without a trailing '/': write %q", distlock.ErrInvalidName, p, "/"+strings.Join(parts, "/"))
	}
	return nil
}

// Conn returns the connection the session follows.
func (s *Session) Conn() *zk.Conn { return s.conn }

// ID returns the ZooKeeper session ID.
func (s *Session) ID() int64 { return s.id }

// TickTime returns the servers' tickTime the client-side deadline allows
// for (see WithTickTime).
func (s *Session) TickTime() time.Duration { return s.tick }

var _ qlock.Store = (*Session)(nil)

// Engine returns the engine that runs the session's acquisitions on this
// driver.
func (s *Session) Engine() *qlock.Engine { return s.engine }

// User returns the session as users see it, with Close deleting the
// session's nodes.
func (s *Session) User() qlock.Session {
	return qlock.NewSession(s.State, s.prefix, s.timeout, s.deleteNodes)
}

// expired ends the session as expired and returns the cause.
func (s *Session) expired(why string) error {
	cause := fmt.Errorf("%w: zookeeper session %#x %s", distlock.ErrSessionExpired, s.id, why)
	s.End(cause)
	return s.Err()
}

// ours reports whether the connection still has this session.
func (s *Session) ours() bool {
	return s.conn.SessionID() == s.id && s.conn.State() != zk.StateExpired
}

// deleteNodes deletes the session's remaining lock nodes while the
// connection still has the session.
func (s *Session) deleteNodes(ctx context.Context) error {
	// Bounded even when ctx is not: the caller may have closed the
	// connection already, and then the session is gone by the time this
	// gives up.
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	s.mu.Lock()
	paths := make(map[string]int64, len(s.nodes))
	for p, czxid := range s.nodes {
		paths[p] = czxid
	}
	s.mu.Unlock()
	var errs []error
	for p, czxid := range paths {
		if isSlot(p) {
			// Not by path alone: see deleteMine.
			if err := s.deleteMine(ctx, p, czxid); err == nil || errors.Is(err, zk.ErrNoNode) || errors.Is(err, errPastDeadline) {
				s.forget(p)
			} else {
				errs = append(errs, fmt.Errorf("zklock: delete %s: %w", p, err))
			}
			continue
		}
		for s.ours() {
			_, err := zkctx.Call(ctx, func() (struct{}, error) { return struct{}{}, s.conn.Delete(p, -1) })
			if err == nil || errors.Is(err, zk.ErrNoNode) {
				s.forget(p)
				break
			}
			if ctx.Err() != nil || !transient(err) {
				errs = append(errs, fmt.Errorf("zklock: delete %s: %w", p, err))
				break
			}
			if ctxwait.Sleep(ctx, qlock.RetryDelay) != nil {
				break
			}
		}
	}
	return errors.Join(errs...)
}

func (s *Session) remember(p string) {
	s.mu.Lock()
	if _, ok := s.nodes[p]; !ok {
		s.nodes[p] = 0
	}
	s.mu.Unlock()
}

// rememberToken records the czxid of remembered node p.
func (s *Session) rememberToken(p string, czxid int64) {
	s.mu.Lock()
	if _, ok := s.nodes[p]; ok {
		s.nodes[p] = czxid
	}
	s.mu.Unlock()
}

func (s *Session) forget(p string) {
	s.mu.Lock()
	delete(s.nodes, p)
	s.mu.Unlock()
}

// storeErr ends the session if err says it is gone, and returns err in
// terms of the distlock sentinels where one fits.
func (s *Session) storeErr(err error) error {
	switch {
	case errors.Is(err, zk.ErrSessionExpired):
		return s.expired("expired (reported by the server)")
	case errors.Is(err, zk.ErrClosing):
		cause := fmt.Errorf("%w: the zookeeper connection was closed", distlock.ErrSessionClosed)
		s.End(cause)
		return s.Err()
	}
	return err
}

// transient reports whether a request failed only because the client was
// between servers: the client retries on its own, so the caller may too.
func transient(err error) bool {
	return errors.Is(err, zk.ErrConnectionClosed) || errors.Is(err, zk.ErrNoServer) ||
		errors.Is(err, zk.ErrSessionMoved)
}
