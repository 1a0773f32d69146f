package zkq

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/ctxwait"
	"github.com/distlock/distlock/internal/qlock"
	"github.com/distlock/distlock/internal/zkctx"
	"github.com/go-zookeeper/zk"
)

// ReleaseAll releases ns's nodes (qlock.Driver): a multi-lock's in one
// multi, each node's set-data and delete as Release makes them; if that
// fails (a node deleted by someone else, its data set), each node is
// released on its own, which tells which.
func (s *Session) ReleaseAll(ctx context.Context, ns []*qlock.Node, known []bool) []error {
	errs := make([]error, len(ns))
	if len(ns) > 1 && ns[0].Kind != qlock.Counted {
		ops := make([]any, 0, 2*len(ns))
		for _, n := range ns {
			v := state(n).version
			ops = append(ops, &zk.SetDataRequest{Path: n.Key, Data: nil, Version: v}, &zk.DeleteRequest{Path: n.Key, Version: v + 1})
		}
		cut, err := s.handBackAll(ctx, ops)
		if cut {
			// The multi may have been applied: a node found gone is this
			// release's, as handBack takes it.
			known = slices.Repeat([]bool{true}, len(ns))
		}
		if err == nil {
			for _, n := range ns {
				s.forget(n.Key)
			}
			return nil
		}
		s.Log().Debug("zklock: release in one multi failed; releasing each node", "key", ns[0].Key, "err", err)
	}
	var wg sync.WaitGroup
	for i, n := range ns {
		wg.Go(func() { errs[i] = s.release(ctx, n, known[i]) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return errs
		}
	}
	return nil
}

// unmarked reports whether n's release must not set its data first: a
// LeaderLatch's candidate (see handBack).
func unmarked(n *qlock.Node) bool { return compatOf(childName(n.Key)) == distlock.CompatCuratorLatch }

// release deletes the node by its exact path and version.
// Every lock entry (exclusive, shared, or a candidate) is released with
// one transaction, set-data then delete (both version-checked): the data
// change tells the successor's watch that the lock was released by its
// holder, not given up by a waiter nor gone with its session or by
// someone else's delete (see WaitGone), which lock-delay tells apart. One
// write, like a plain delete; the data written is empty.
func (s *Session) release(ctx context.Context, n *qlock.Node, known bool) error {
	if n.Kind == qlock.Counted {
		return s.releaseMine(ctx, n, known)
	}
	err := s.handBack(ctx, n)
	if errors.Is(err, zk.ErrBadVersion) {
		// Someone set the node's data. The path, with its GUID and
		// sequence number, is still this acquisition's alone; a plain
		// delete only makes the successor check for itself.
		_, err = retry(ctx, func() (struct{}, error) { return struct{}{}, s.conn.Delete(n.Key, -1) })
	}
	switch {
	case err == nil:
		s.forget(n.Key)
	case errors.Is(err, zk.ErrNoNode):
		s.forget(n.Key)
		if !known {
			return qlock.Lost(fmt.Errorf("%w: node %s was already gone at unlock", distlock.ErrEntryGone, n.Key))
		}
	default:
		s.removeLater(n.Key)
		return fmt.Errorf("delete %s: %w (retrying in the background while the connection keeps the session)", n.Key, err)
	}
	return nil
}

// handBackAll is handBack of several nodes, ops being their set-data and
// delete requests, in one multi: all are released or none. cut says a
// try was cut off by a connection loss, and so may have been applied.
func (s *Session) handBackAll(ctx context.Context, ops []any) (cut bool, _ error) {
	for {
		_, err := zkctx.Call(ctx, func() (struct{}, error) {
			rs, err := s.conn.Multi(ops...)
			return struct{}{}, multiErr(rs, err)
		})
		if err == nil || !transient(err) || ctx.Err() != nil {
			return cut, err
		}
		cut = cut || errors.Is(err, zk.ErrConnectionClosed)
		if err := ctxwait.Sleep(ctx, qlock.RetryDelay); err != nil {
			return cut, err
		}
	}
}

// handBack deletes the held node, with the set-data that marks a
// release. A request cut off by a connection loss may have been applied:
// if the retry finds the node gone, that was this release.
//
// A LeaderLatch's candidate (CompatCuratorLatch) is deleted without the
// mark: Curator's LeaderLatch watches its predecessor with a data watch
// and acts on its deletion only, so a set-data would fire that one-shot
// watch for nothing and leave the latch waiting on a node already gone.
// The waiters of distlock's behind it then check for themselves.
func (s *Session) handBack(ctx context.Context, n *qlock.Node) error {
	version := state(n).version
	del := func() error {
		if unmarked(n) {
			return s.conn.Delete(n.Key, version)
		}
		rs, err := s.conn.Multi(
			&zk.SetDataRequest{Path: n.Key, Data: nil, Version: version},
			&zk.DeleteRequest{Path: n.Key, Version: version + 1})
		return multiErr(rs, err)
	}
	cut := false
	for {
		_, err := zkctx.Call(ctx, func() (struct{}, error) { return struct{}{}, del() })
		switch {
		case errors.Is(err, zk.ErrNoNode) && cut:
			return nil
		case err == nil || !transient(err) || ctx.Err() != nil:
			return err
		}
		cut = cut || errors.Is(err, zk.ErrConnectionClosed)
		if err := ctxwait.Sleep(ctx, qlock.RetryDelay); err != nil {
			return err
		}
	}
}

// multiErr returns the error that made a multi fail: the failing
// operation's own, not the marker the server puts on the others.
func multiErr(rs []zk.MultiResponse, err error) error {
	for _, r := range rs {
		if errors.Is(r.Error, zk.ErrNoNode) || errors.Is(r.Error, zk.ErrBadVersion) || errors.Is(r.Error, zk.ErrNoAuth) {
			return r.Error
		}
	}
	return err
}

// Abandon is the failure path of a Lock that had created its node
// (qlock.Driver).
func (s *Session) Abandon(n *qlock.Node) {
	if n.Kind == qlock.Counted {
		s.abandonMine(n.Key, n.Token)
		return
	}
	s.abandon(n.Key)
}

// A semaphore's slot znode has the same path for each of its holders in
// turn, so its deletes cannot go by path and version alone, as an
// entry's do: by the time a release or a cleanup runs, the node there
// may be a successor's (its own node deleted by someone else, or gone
// with its session while the client started a new one). They delete the
// node only if its ephemeral owner is this session and, where known, its
// czxid is the token. (Between that look and the delete a foreign delete
// and a successor's claim could still slip in; the successor would see
// its permit lost, never held twice silently.) A semaphore's line
// entries, Counted too, are deleted the same way, which is as safe for
// them.

// errPastDeadline is a semaphore node's delete not sent because the
// session's client-side deadline has passed: the server may have expired
// the session, and go-zookeeper sends a request queued then in the new
// session it starts by itself, where the path may be a successor's node
// with the same version. The server deletes the node with the session.
var errPastDeadline = errors.New("past the session's deadline: left to the server")

// deleteMine deletes path if it is this session's node, and with czxid
// not 0 that very node; zk.ErrNoNode if it is not (there any more). Only
// while the session's deadline is ahead (errPastDeadline otherwise): the
// server cannot have expired it then, so the look and the delete both
// go out in this session.
func (s *Session) deleteMine(ctx context.Context, path string, czxid int64) error {
	for {
		if !time.Now().Before(s.Deadline()) || !s.ours() {
			return errPastDeadline
		}
		st, err := stat(ctx, s.conn, path)
		if err != nil {
			return err
		}
		if st == nil || st.EphemeralOwner != s.id || czxid != 0 && st.Czxid != czxid {
			return zk.ErrNoNode
		}
		_, err = retry(ctx, func() (struct{}, error) { return struct{}{}, s.conn.Delete(path, st.Version) })
		if !errors.Is(err, zk.ErrBadVersion) {
			return err
		}
	}
}

// releaseMine is Release for a semaphore's nodes.
func (s *Session) releaseMine(ctx context.Context, n *qlock.Node, known bool) error {
	switch err := s.deleteMine(ctx, n.Key, n.Token); {
	case err == nil:
		s.forget(n.Key)
	case errors.Is(err, errPastDeadline):
		s.forget(n.Key)
		if !known {
			return qlock.Lost(fmt.Errorf("%w: %w", distlock.ErrSessionExpired, err))
		}
	case errors.Is(err, zk.ErrNoNode):
		s.forget(n.Key)
		if !known {
			return qlock.Lost(fmt.Errorf("%w: node %s was already gone at unlock", distlock.ErrEntryGone, n.Key))
		}
	default:
		s.removeMineLater(n.Key, n.Token, func() {})
		return fmt.Errorf("delete %s: %w (retrying in the background while the connection keeps the session)", n.Key, err)
	}
	return nil
}

// abandonMine is abandon for a semaphore's nodes (czxid 0: not known).
func (s *Session) abandonMine(path string, czxid int64) { s.abandonMineThen(path, czxid, func() {}) }

// abandonMineThen is abandonMine, calling done once the cleanup is over.
func (s *Session) abandonMineThen(path string, czxid int64, done func()) {
	if !s.ours() {
		s.removeStray(path)
		done()
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), qlock.AbandonTimeout)
	defer cancel()
	err := s.deleteMine(ctx, path, czxid)
	if err == nil || errors.Is(err, zk.ErrNoNode) || errors.Is(err, errPastDeadline) {
		s.forget(path)
		done()
		return
	}
	s.Log().Warn("zklock: cleanup failed; retrying in the background", "key", path, "err", err)
	s.removeMineLater(path, czxid, done)
}

// removeMineLater is removeLater for a semaphore's nodes, calling done
// when it is over.
func (s *Session) removeMineLater(path string, czxid int64, done func()) {
	go qlock.Retry(context.Background(), s.timeout, s.timeout/6, func() bool {
		if !s.ours() {
			done()
			return false
		}
		return true
	}, func(ctx context.Context) bool {
		err := s.deleteMine(ctx, path, czxid)
		if err == nil || errors.Is(err, zk.ErrNoNode) || errors.Is(err, errPastDeadline) {
			s.forget(path)
			done()
			return true
		}
		if !retryCleanup(err) {
			s.Log().Warn("zklock: cleanup abandoned", "key", path, "err", err)
			done()
			return true
		}
		return false
	})
}

// abandon deletes a node of this session before a failed Lock returns. A
// node that cannot be deleted within qlock.AbandonTimeout is left to a
// background retry, so that it never blocks the queue for longer than the
// ZooKeeper session lives.
func (s *Session) abandon(path string) {
	if !s.ours() {
		s.removeStray(path)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), qlock.AbandonTimeout)
	defer cancel()
	_, err := zkctx.Call(ctx, func() (struct{}, error) { return struct{}{}, s.conn.Delete(path, -1) })
	if err == nil || errors.Is(err, zk.ErrNoNode) {
		s.forget(path)
		return
	}
	s.Log().Warn("zklock: cleanup failed; retrying in the background", "key", path, "err", err)
	s.removeLater(path)
}

// removeStray is abandon once the connection no longer has this session.
// The node went with the session, unless a create sent for this session
// was made in the connection's next one (the client starts a new session
// by itself after an expiry, and sends what was queued in it): such a node
// belongs to no Session and would stay at the head of the lock's queue
// for as long as the connection lives, so it is deleted. A node of any
// other session is left alone.
func (s *Session) removeStray(path string) {
	s.forget(path)
	ctx, cancel := context.WithTimeout(context.Background(), qlock.AbandonTimeout)
	defer cancel()
	st, err := stat(ctx, s.conn, path)
	if err != nil || st == nil || st.EphemeralOwner == s.id || st.EphemeralOwner != s.conn.SessionID() {
		return // gone, going with this session, someone else's, or unknown
	}
	_, err = retry(ctx, func() (struct{}, error) { return struct{}{}, s.conn.Delete(path, st.Version) })
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		s.Log().Warn("zklock: could not delete a node made in the connection's next session", "key", path, "err", err)
	}
}

// Cleanups outlive the Session. A node of this session that a failed Lock
// leaves behind blocks the lock for as long as the connection keeps the
// ZooKeeper session, and that can be longer than the Session lives: a
// Session ends on its conservative client-side deadline when its server
// stops answering, while the connection, reconnecting to another server
// within the session timeout, keeps the ZooKeeper session and every node
// of it. So a cleanup started by a failed Lock (or a release that did not
// go through) runs until it has succeeded, until the connection no longer
// has the session (its ephemeral nodes went with it), or until the
// connection is closed — not until the Session ends; and Close does not
// wait for it (it may wait for a server to come back).

// removeLater deletes path in the background, retrying until it succeeds,
// the connection loses the session, or the connection is closed.
func (s *Session) removeLater(path string) {
	go qlock.Retry(context.Background(), s.timeout, s.timeout/6, s.ours, func(ctx context.Context) bool {
		_, err := zkctx.Call(ctx, func() (struct{}, error) { return struct{}{}, s.conn.Delete(path, -1) })
		if err == nil || errors.Is(err, zk.ErrNoNode) {
			s.forget(path)
			return true
		}
		if !retryCleanup(err) {
			s.Log().Warn("zklock: cleanup abandoned", "key", path, "err", err)
			return true
		}
		return false
	})
}

// retryCleanup reports whether a cleanup that failed with err may succeed
// later: the client was between servers, or the request ran out of time;
// not once the connection is closed or the request is refused.
func retryCleanup(err error) bool {
	return transient(err) || errors.Is(err, context.DeadlineExceeded)
}
