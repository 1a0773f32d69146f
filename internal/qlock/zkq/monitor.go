package zkq

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/distlock/distlock/internal/qlock"
	"github.com/go-zookeeper/zk"
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
// to another server within milliseconds. The next Sync, sent on the first
// poll after the stuck one fails, is answered there; with a tick of at most an
// eighth of the timeout the deadline, 7/8 of the timeout after that last
// answered Sync, leaves about 0.15 timeout for that reconnect (with a
// longer tick the margin grows and the deadline can fall before the
// reconnect: safety wins, and the package doc says to keep the tick at
// most timeout/8). An earlier deadline (the 2/3 used before) fell just
// where go-zookeeper starts to give up on the silent server, and lost the
// lock although two healthy servers could serve it.

// DefaultTickTime is the servers' tickTime a Session assumes without
// WithTickTime: ZooKeeper's default.
const DefaultTickTime = 2 * time.Second

// timing returns the interval between Syncs and the margin of the
// client-side deadline for a session timeout and the servers' tick (see
// above).
func timing(timeout, tick time.Duration) (syncInterval, margin time.Duration) {
	syncInterval = min(max(tick/2, timeout/20), timeout/6)
	margin = max(syncInterval+tick/2+timeout/50, timeout/8)
	return syncInterval, margin
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
	dl, _ := ctx.Deadline()
	c.SetDeadline(dl)
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

// monitor follows the connection's session and the client-side deadline:
// it asks the connection's prober for a Sync when its interval has passed
// since the last answered one (on the next poll after a failure), and moves the
// deadline on from the send time of every Sync answered while the
// connection had this session, whichever Session of the connection asked
// for it (see prober.go). started is the send time of NewSession's Sync.
func (s *Session) monitor(started time.Time, p *prober, answered <-chan struct{}) {
	defer p.leave(s)
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	// The deadline has a timer of its own, so that the session ends (and
	// its Leases' Done closes) when the deadline passes, not up to a poll
	// interval later.
	expire := time.NewTimer(time.Until(s.Deadline()))
	defer expire.Stop()
	lastOK := started // send time of the last Sync that confirmed the session
	failed := false   // a Sync failed after lastOK
	cleanup := func() {
		s.Finally(func() {
			ctx, cancel := context.WithTimeout(context.Background(), s.margin)
			defer cancel()
			if err := s.deleteNodes(ctx); err != nil {
				s.Log().Debug("zklock: cleanup after the deadline failed", "err", err)
			}
		})
	}
	for {
		ticked := false
		select {
		case <-s.Context().Done():
			if errors.As(s.Err(), new(*qlock.SuspendedError)) {
				// Ended by the deadline, moved earlier by a system
				// suspend (qlock.State.Deadline): as on the deadline.
				cleanup()
			}
			return
		case <-tick.C:
			ticked = true
		case <-answered:
		case <-expire.C:
		}
		r := p.state()
		if r.err != nil && r.errSent.After(started) && r.errID == s.id {
			switch {
			case errors.Is(r.err, zk.ErrSessionExpired), errors.Is(r.err, zk.ErrClosing):
				s.storeErr(r.err)
				return
			case r.errSent.After(lastOK) && !failed:
				// Most likely the connection was closed under the Sync
				// (go-zookeeper gave up on a silent server): the next one
				// goes out on the next poll, and is sent as soon as the
				// connection to another server is up.
				s.Log().Debug("zklock: sync failed", "err", r.err)
				failed = true
			}
		}
		if r.ok.After(lastOK) && r.okID == s.id && s.ours() {
			was := s.ExtendFrom(r.ok, r.ok.Add(s.timeout-s.margin))
			if failed {
				// How close the session came to its deadline while the
				// connection moved: the margin that is left.
				s.Log().Info("zklock: session confirmed again", "server", s.conn.Server(), "before the deadline by", time.Until(was))
			}
			lastOK, failed = r.ok, r.errSent.After(r.ok)
		}
		if !s.ours() {
			s.expired("expired (the connection reports another session or StateExpired)")
			return
		}
		now := time.Now()
		expire.Reset(time.Until(s.Deadline()))
		if deadline := s.Deadline(); !now.Before(deadline) {
			s.expired(fmt.Sprintf("not confirmed alive before the client-side deadline %s (the %v session timeout minus %v after the last answered request was sent)",
				deadline.Format(time.RFC3339Nano), s.timeout, s.margin))
			cleanup()
			return
		}
		switch {
		case !ticked && r.err != nil && r.errSent.After(lastOK) && now.Sub(r.errSent) < pollInterval:
			// A Sync that failed a moment ago is resent on the next tick,
			// not on its own answer: on a closed connection every Sync
			// fails at once (go-zookeeper answers ErrConnectionClosed
			// without sending), and resending on each answer spun a core
			// until the deadline. The pause costs at most a poll interval
			// of the margin after a reconnect.
		case failed || !now.Before(lastOK.Add(s.sync)):
			p.probe()
		}
	}
}
