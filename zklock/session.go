package zklock

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/ctxwait"
	"github.com/distlock/distlock/internal/zkctx"
	"github.com/go-zookeeper/zk"
)

const (
	// DefaultPrefix is the znode under which a session made without
	// WithPrefix keeps its locks' directories.
	DefaultPrefix = "/distlock"

	// pollInterval is how often a Session reads its connection's state.
	pollInterval = 50 * time.Millisecond

	// minSessionTimeout is the shortest session timeout a Session accepts.
	minSessionTimeout = 300 * time.Millisecond
)

// The client-side deadline, and why it is safe and late enough.
//
// Safe: the server must not be able to expire the session (and delete its
// lock nodes, letting a successor in) before the deadline. ZooKeeper's
// leader expires sessions in its SessionTracker: whenever it learns that
// the client was heard, it files the session under the expiry time
// now + timeout rounded UP to a multiple of tickTime, and expires it when
// that time comes. The rounding only makes expiry later, so the session
// cannot expire before timeout after the leader last learned of the
// client. A request the client sent at s and saw answered reached its
// server after s; the leader hears of it at once if it is that server,
// and otherwise in the follower's reply to the leader's next ping (every
// half tick). A follower that freezes or is cut off before that reply
// never reports it; then the last report the leader got is from at most
// half a tick earlier, and covers the client's previous request, sent at
// most syncInterval before s (or a later one). So the leader last learned
// of the client after s - syncInterval - tickTime/2, and the deadline
// s + timeout - margin is safe while margin >= syncInterval + tickTime/2 +
// the clocks' rate difference over a timeout. So both depend on the
// servers' tickTime, which a client cannot always read (the `conf` command is not
// on ZooKeeper's default four-letter-word list; NewSession asks, and uses
// the answer where the server allows the word): WithTickTime tells it, and
// the fallback is ZooKeeper's own default tick, 2 s. Then
//
//	syncInterval = tickTime/2, kept within [timeout/20, timeout/6]
//	margin       = max(syncInterval + tickTime/2 + timeout/50, timeout/8)
//
// (timeout/50 covers a 2% rate difference and scheduling; the floor of
// timeout/8 is the margin the one-server-down tests were run with). A
// Sync every half tick costs the leader nothing beyond what the margin
// needs anyway, and no more often than that.
//
// Late enough: with one server frozen or cut off, go-zookeeper notices
// only when it has heard nothing for its receive timeout, two thirds of
// the session timeout after the last byte it received (at most about
// syncInterval after the last answered Sync was sent), and then connects
// to another server within milliseconds. The next Sync, sent as soon as
// the stuck one fails, is answered there; with a tick of at most an
// eighth of the timeout the deadline, 7/8 of the timeout after that last
// answered Sync, leaves about 0.15 timeout for that reconnect (with a
// longer tick the margin grows and the deadline can fall before the
// reconnect: safety wins, and the package doc says to keep the tick at
// most timeout/8). An earlier deadline (the 2/3 used before) fell just
// where go-zookeeper starts to give up on the silent server, and lost the
// lock although two healthy servers could serve it.
const (
	// DefaultTickTime is the servers' tickTime a Session assumes without
	// WithTickTime: ZooKeeper's default.
	DefaultTickTime = 2 * time.Second
)

// timing returns the interval between Syncs and the margin of the
// client-side deadline for a session timeout and the servers' tick (see
// above).
func timing(timeout, tick time.Duration) (syncInterval, margin time.Duration) {
	syncInterval = min(max(tick/2, timeout/20), timeout/6)
	margin = max(syncInterval+tick/2+timeout/50, timeout/8)
	return syncInterval, margin
}

// Option configures a Session.
type Option func(*options)

type options struct {
	prefix  string
	logger  *slog.Logger
	holder  string
	timeout time.Duration
	tick    time.Duration
	tickSet bool
	acl     []zk.ACL
}

// WithPrefix sets the znode under which locks keep their directories
// (default DefaultPrefix). It must be an absolute path without a trailing
// "/".
func WithPrefix(p string) Option { return func(o *options) { o.prefix = p } }

// WithLogger makes the session and its locks log what they do; by default
// they are silent.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithHolder sets the data stored in this session's lock nodes, so that
// tools listing a lock's queue can say who waits (e.g. "host:pid").
func WithHolder(v string) Option { return func(o *options) { o.holder = v } }

// WithSessionTimeout gives the session timeout the connection negotiated
// with the server. It must not be longer than the negotiated one, or the
// client-side deadline is no longer conservative. Without it, NewSession
// reads the negotiated timeout from the connection.
func WithSessionTimeout(d time.Duration) Option { return func(o *options) { o.timeout = d } }

// WithTickTime tells the session the servers' tickTime. Without it,
// NewSession asks the server it is connected to (the "conf" four-letter
// word, where the server allows it) and otherwise assumes
// DefaultTickTime. The client-side deadline must leave room for
// followers reporting client activity to the leader only every half tick,
// so a tick longer than the one given makes the "lost" signal late, and a
// shorter one makes it early. Keep the tick at most an eighth of the
// session timeout for one failed server not to cost a session.
func WithTickTime(d time.Duration) Option {
	return func(o *options) { o.tick, o.tickSet = d, true }
}

// WithACL sets the ACL of the znodes the session creates (default
// zk.WorldACL(zk.PermAll)).
func WithACL(acl []zk.ACL) Option { return func(o *options) { o.acl = acl } }

// Session follows one ZooKeeper session of a *zk.Conn the caller owns. Lock
// nodes are ephemeral nodes of that session, so they vanish when it ends.
//
// A Session ends when Close is called (distlock.ErrSessionClosed), when
// the ZooKeeper session expires (distlock.ErrSessionExpired), or when no
// request has been answered for the session timeout less a margin (7/8 of
// it with a short enough tick), counted from its send time (ErrSessionExpired too; see the package documentation). An ended Session stays ended even if the connection
// recovers the ZooKeeper session; make a new one.
//
// A Session is safe for concurrent use. Use one session for many locks.
type Session struct {
	conn    *zk.Conn
	id      int64
	timeout time.Duration
	tick    time.Duration // the servers' tickTime, as known
	sync    time.Duration // between Syncs
	margin  time.Duration
	prefix  string
	holder  string
	acl     []zk.ACL
	log     *slog.Logger

	// ctx is cancelled, with the reason as cause, when the session ends.
	ctx    context.Context
	cancel context.CancelCauseFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	deadline time.Time           // client-side expiry
	nodes    map[string]struct{} // this session's live lock nodes
}

// NewSession waits until conn has a ZooKeeper session and follows it until
// Close or the session ends. The connection stays the caller's: Close does
// not close it, and its event channel is left alone.
func NewSession(ctx context.Context, conn *zk.Conn, opts ...Option) (*Session, error) {
	if conn == nil {
		return nil, fmt.Errorf("zklock: new session: %w: *zk.Conn is nil", distlock.ErrNilClient)
	}
	o := options{prefix: DefaultPrefix, acl: zk.WorldACL(zk.PermAll)}
	for _, opt := range opts {
		opt(&o)
	}
	if err := checkPrefix(o.prefix); err != nil {
		return nil, fmt.Errorf("zklock: new session: %w", err)
	}
	if o.logger == nil {
		o.logger = slog.New(slog.DiscardHandler)
	}
	for conn.State() != zk.StateHasSession {
		if err := ctxwait.Sleep(ctx, 10*time.Millisecond); err != nil {
			return nil, fmt.Errorf("zklock: new session: waiting for the connection to have a session (state %v): %w", conn.State(), err)
		}
	}
	id := conn.SessionID()
	if o.timeout == 0 {
		d, ok := negotiatedTimeout(conn)
		if !ok {
			return nil, fmt.Errorf("zklock: new session: cannot read the connection's session timeout; pass WithSessionTimeout")
		}
		o.timeout = d
	}
	if o.tick < 0 || o.tickSet && o.tick == 0 {
		return nil, fmt.Errorf("zklock: new session: tick time %v is not positive", o.tick)
	}
	tickFrom := "WithTickTime"
	if !o.tickSet {
		// Ask the server; its answer is authoritative. Most installations
		// allow only "srvr" among the four-letter words, and then the
		// default (ZooKeeper's own) has to do.
		if d, ok := serverTickTime(ctx, conn.Server()); ok {
			o.tick, tickFrom = d, "the server (conf)"
		} else {
			o.tick, tickFrom = DefaultTickTime, "default"
		}
	}
	if o.timeout < minSessionTimeout {
		return nil, fmt.Errorf("zklock: new session: %w: %v is below the minimum %v", distlock.ErrTTLTooShort, o.timeout, minSessionTimeout)
	}
	syncInterval, margin := timing(o.timeout, o.tick)
	s := &Session{
		tick:    o.tick,
		conn:    conn,
		id:      id,
		timeout: o.timeout,
		sync:    syncInterval,
		margin:  margin,
		prefix:  o.prefix,
		holder:  o.holder,
		acl:     o.acl,
		log:     o.logger.With("session", fmt.Sprintf("%#x", id)),
		nodes:   map[string]struct{}{},
	}
	s.ctx, s.cancel = context.WithCancelCause(context.Background())
	sent := time.Now()
	if _, err := zkctx.Call(ctx, func() (string, error) { return conn.Sync("/") }); err != nil {
		return nil, fmt.Errorf("zklock: new session: sync: %w", err)
	}
	if conn.SessionID() != id {
		return nil, fmt.Errorf("zklock: new session: %w: the connection changed sessions", distlock.ErrSessionExpired)
	}
	s.deadline = sent.Add(s.timeout - s.margin)
	s.log.Debug("zklock: session started", "timeout", s.timeout, "tick", s.tick, "tick from", tickFrom, "margin", s.margin)
	s.wg.Add(1)
	go s.monitor()
	return s, nil
}

func checkPrefix(p string) error {
	if !strings.HasPrefix(p, "/") || strings.HasSuffix(p, "/") || strings.Contains(p, "//") {
		return fmt.Errorf("prefix %q: want an absolute znode path without a trailing '/'", p)
	}
	return nil
}

// negotiatedTimeout reads the session timeout the connection negotiated,
// which go-zookeeper v1.0.4 keeps unexported. It is written when the client
// (re)authenticates, before the state becomes StateHasSession (an atomic
// store), so reading it after seeing that state is ordered after the write.
func negotiatedTimeout(conn *zk.Conn) (time.Duration, bool) {
	v := reflect.ValueOf(conn).Elem().FieldByName("sessionTimeoutMs")
	if !v.IsValid() || v.Kind() != reflect.Int32 || v.Int() <= 0 {
		return 0, false
	}
	return time.Duration(v.Int()) * time.Millisecond, true
}

// Conn returns the connection the session follows.
func (s *Session) Conn() *zk.Conn { return s.conn }

// ID returns the ZooKeeper session ID.
func (s *Session) ID() int64 { return s.id }

// Timeout returns the session timeout the client-side deadline uses.
func (s *Session) Timeout() time.Duration { return s.timeout }

// TickTime returns the servers' tickTime the client-side deadline allows
// for (see WithTickTime).
func (s *Session) TickTime() time.Duration { return s.tick }

// serverTickTime asks the ZooKeeper server at addr for its tickTime with
// the "conf" four-letter word, within a second. ok is false when the
// server does not allow the word (most installations allow only "srvr"),
// speaks TLS only, or cannot be reached.
func serverTickTime(ctx context.Context, addr string) (d time.Duration, ok bool) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return 0, false
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	if _, err := c.Write([]byte("conf")); err != nil {
		return 0, false
	}
	// The server answers and closes; a deadline ends a server that does
	// neither, with what was read so far.
	b, _ := io.ReadAll(io.LimitReader(c, 64<<10))
	for _, line := range strings.Split(string(b), "\n") {
		if v, found := strings.CutPrefix(strings.TrimSpace(line), "tickTime="); found {
			if ms, err := strconv.Atoi(v); err == nil && ms > 0 {
				return time.Duration(ms) * time.Millisecond, true
			}
		}
	}
	return 0, false
}

// Holder returns the value stored in the session's lock entries (see
// WithHolder).
func (s *Session) Holder() string { return s.holder }

// Prefix returns the znode under which the session's locks live.
func (s *Session) Prefix() string { return s.prefix }

// Done returns a channel closed when the session ends.
func (s *Session) Done() <-chan struct{} { return s.ctx.Done() }

// Err returns nil while the session lives, then why it ended: an error
// wrapping distlock.ErrSessionExpired or distlock.ErrSessionClosed.
func (s *Session) Err() error {
	if s.ctx.Err() == nil {
		return nil
	}
	return context.Cause(s.ctx)
}

// Deadline returns the client-side expiry of the session: until then the
// server cannot have expired it.
func (s *Session) Deadline() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.deadline
}

// Close ends the session: its held locks report distlock.ErrSessionClosed
// and its lock nodes are deleted (the ZooKeeper session itself, which
// belongs to the connection, stays open). Close waits for the session's
// own background work to stop, but not for the cleanups of failed Locks:
// those outlive the Session until they succeed, the connection loses the
// ZooKeeper session, or the connection is closed, because the nodes they
// remove outlive it too. Calling Close again is a no-op.
func (s *Session) Close(ctx context.Context) error {
	first := s.ctx.Err() == nil
	s.end(distlock.ErrSessionClosed)
	var err error
	if first {
		err = s.deleteNodes(ctx)
	}
	s.wg.Wait()
	return err
}

func (s *Session) end(cause error) {
	s.mu.Lock()
	first := s.ctx.Err() == nil
	s.cancel(cause)
	s.mu.Unlock()
	if first {
		s.log.Info("zklock: session ended", "cause", cause)
	}
}

// expired ends the session as expired and returns the cause.
func (s *Session) expired(why string) error {
	cause := fmt.Errorf("%w: zookeeper session %#x %s", distlock.ErrSessionExpired, s.id, why)
	s.end(cause)
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
	paths := make([]string, 0, len(s.nodes))
	for p := range s.nodes {
		paths = append(paths, p)
	}
	s.mu.Unlock()
	var errs []error
	for _, p := range paths {
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
			if ctxwait.Sleep(ctx, retryDelay) != nil {
				break
			}
		}
	}
	return errors.Join(errs...)
}

func (s *Session) remember(p string) {
	s.mu.Lock()
	s.nodes[p] = struct{}{}
	s.mu.Unlock()
}

func (s *Session) forget(p string) {
	s.mu.Lock()
	delete(s.nodes, p)
	s.mu.Unlock()
}

// monitor follows the connection's session and the client-side deadline.
func (s *Session) monitor() {
	defer s.wg.Done()
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	interval := s.sync
	next := time.Now().Add(interval)
	type probe struct {
		sent time.Time
		err  error
	}
	var inflight chan probe
	failed := false // the last Sync failed
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-tick.C:
		case r := <-inflight:
			inflight = nil
			switch {
			case r.err == nil && s.ours():
				s.mu.Lock()
				if failed {
					// How close the session came to its deadline while the
					// connection moved: the margin that is left.
					s.log.Info("zklock: session confirmed again", "server", s.conn.Server(), "before the deadline by", time.Until(s.deadline))
				}
				if d := r.sent.Add(s.timeout - s.margin); d.After(s.deadline) {
					s.deadline = d
				}
				s.mu.Unlock()
				failed = false
				next = time.Now().Add(interval)
			case errors.Is(r.err, zk.ErrSessionExpired), errors.Is(r.err, zk.ErrClosing):
				s.storeErr(r.err)
				return
			default:
				// Most likely the connection was closed under the Sync
				// (go-zookeeper gave up on a silent server): the next one
				// goes out now, and is sent as soon as the connection to
				// another server is up.
				s.log.Debug("zklock: sync failed", "err", r.err)
				failed = true
				next = time.Now()
			}
		}
		if !s.ours() {
			s.expired("expired (the connection reports another session or StateExpired)")
			return
		}
		now := time.Now()
		if deadline := s.Deadline(); !now.Before(deadline) {
			s.expired(fmt.Sprintf("not confirmed alive before the client-side deadline %s (the %v session timeout minus %v after the last answered request was sent)",
				deadline.Format(time.RFC3339Nano), s.timeout, s.margin))
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				ctx, cancel := context.WithTimeout(context.Background(), s.margin)
				defer cancel()
				if err := s.deleteNodes(ctx); err != nil {
					s.log.Debug("zklock: cleanup after the deadline failed", "err", err)
				}
			}()
			return
		}
		if inflight == nil && !now.Before(next) {
			ch := make(chan probe, 1)
			inflight = ch
			go func() {
				sent := time.Now()
				_, err := s.conn.Sync("/")
				ch <- probe{sent, err}
			}()
		}
	}
}

// goBackground runs f in the background until it returns; Close waits for
// it. f must return once ctx (ended with the session) is done.
func (s *Session) goBackground(f func(ctx context.Context)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ctx.Err() != nil {
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		f(s.ctx)
	}()
}

// storeErr ends the session if err says it is gone, and returns err in
// terms of the distlock sentinels where one fits.
func (s *Session) storeErr(err error) error {
	switch {
	case errors.Is(err, zk.ErrSessionExpired):
		return s.expired("expired (reported by the server)")
	case errors.Is(err, zk.ErrClosing):
		cause := fmt.Errorf("%w: the zookeeper connection was closed", distlock.ErrSessionClosed)
		s.end(cause)
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
