package zkq

import (
	"context"
	"errors"
	"fmt"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/ctxwait"
	"github.com/distlock/distlock/internal/qlock"
	"github.com/distlock/distlock/internal/zkctx"
	"github.com/go-zookeeper/zk"
)

// Proclaim sets the leader's value (qlock.Elections): a SetData on the leader's node with
// the version this leadership last wrote, so it succeeds only while the
// node exists (and then this candidate leads: nothing older can come
// back). When the node is gone, the session is over, the node belongs to
// another session or the leadership has ended, it fails with an error
// wrapping distlock.ErrNotLeader. A bad version (a Proclaim of ours whose
// answer a connection loss cut off, or a foreign write) is resolved by
// reading the node again: only if it is still this session's is the value
// written.
//
// A Proclaim does not hand leadership over: the next candidate sees the
// data change, reads the node again, and keeps waiting while it exists.
func (s *Session) Proclaim(ctx context.Context, n *qlock.Node, value string) error {
	e := state(n)
	notLeader := func(err error) error { return fmt.Errorf("%w: %w", distlock.ErrNotLeader, err) }
	for {
		if err := n.Alive().Err(); err != nil {
			return notLeader(context.Cause(n.Alive()))
		}
		if !s.ours() {
			return notLeader(s.expired("expired (the connection reports another session)"))
		}
		st, err := zkctx.Call(ctx, func() (*zk.Stat, error) { return s.conn.Set(n.Key, []byte(value), e.version) })
		switch {
		case err == nil:
			e.version = st.Version
			return nil
		case errors.Is(err, zk.ErrNoNode):
			return notLeader(fmt.Errorf("%w: node %s", distlock.ErrEntryGone, n.Key))
		case errors.Is(err, zk.ErrBadVersion):
			st, err := stat(ctx, s.conn, n.Key)
			switch {
			case err != nil && transient(err):
			case err != nil:
				return s.storeErr(err)
			case st == nil:
				return notLeader(fmt.Errorf("%w: node %s", distlock.ErrEntryGone, n.Key))
			case st.EphemeralOwner != s.id:
				return notLeader(fmt.Errorf("node %s belongs to session %#x", n.Key, st.EphemeralOwner))
			default:
				e.version = st.Version
				continue
			}
		case transient(err) && ctx.Err() == nil:
			// Maybe applied: the next try, with the same version, then
			// fails with a bad version and reads the node again.
		default:
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			return s.storeErr(err)
		}
		if err := ctxwait.Sleep(ctx, qlock.RetryDelay); err != nil {
			return err
		}
	}
}

// Leader reads the current leader's value and token (qlock.Elections): the data and czxid
// of the election's oldest node, read after a Sync with the ZooKeeper
// leader (so it is at least as new as every write acknowledged before the
// call). It returns an error wrapping distlock.ErrNoLeader when the
// election has no candidate.
func (s *Session) Leader(ctx context.Context, name string) (distlock.LeaderInfo, error) {
	dir := s.Dir(name)
	for {
		children, err := syncedChildren(ctx, s.conn, dir)
		if err != nil {
			return distlock.LeaderInfo{}, err
		}
		p, ok := lowest(dir, children)
		if !ok {
			return distlock.LeaderInfo{}, distlock.ErrNoLeader
		}
		type read struct {
			data []byte
			stat *zk.Stat
		}
		r, err := retry(ctx, func() (read, error) {
			d, st, err := s.conn.Get(p)
			return read{d, st}, err
		})
		if errors.Is(err, zk.ErrNoNode) {
			continue // gone since the listing: list again
		}
		if err != nil {
			return distlock.LeaderInfo{}, err
		}
		return distlock.LeaderInfo{Value: string(r.data), Token: distlock.Token{Name: name, Seq: r.stat.Czxid, Owner: uint64(r.stat.EphemeralOwner)}}, nil
	}
}

// Observe follows the election's leader (qlock.Elections). It keeps a child
// watch on the election's directory (an existence watch while the
// directory does not exist) and a data watch on the leader's node,
// re-armed after each event, and reads after a Sync; it goes on across
// reconnects, server failures and session expiries (it only reads, so it
// needs the connection, not the session: it works after the session ended
// too). Changes that follow each other faster than a watch is re-armed
// are coalesced: an intermediate leader may be skipped, but what is sent
// is never older than what was sent before, and the last value sent is the
// current state once the election is quiet. The channel is closed when
// ctx ends, or when the connection is closed.
func (s *Session) Observe(ctx context.Context, name string, out chan<- distlock.LeaderInfo) {
	defer close(out)
	dir := s.Dir(name)
	var (
		childW  <-chan zk.Event // nil: list (again)
		dataW   <-chan zk.Event // nil: read the leader (again), if any
		leader  string          // the leader's node, "" for none
		cur     distlock.LeaderInfo
		sent    distlock.LeaderInfo
		started bool
	)
	// pause is the wait after a failed request; false when ctx ended or
	// the connection is closed.
	pause := func(err error) bool {
		if errors.Is(err, zk.ErrClosing) {
			s.Log().Debug("zklock: observe: connection closed", "election", name)
			return false
		}
		return ctxwait.Sleep(ctx, qlock.RetryDelay) == nil
	}
	for ctx.Err() == nil {
		if childW == nil {
			type listing struct {
				children []string
				w        <-chan zk.Event
				created  bool // no directory at the listing, one at the exists watch
			}
			l, err := zkctx.Call(ctx, func() (listing, error) {
				if _, err := s.conn.Sync(dir); err != nil && !errors.Is(err, zk.ErrNoNode) {
					return listing{}, err
				}
				c, _, w, err := s.conn.ChildrenW(dir)
				if errors.Is(err, zk.ErrNoNode) {
					// No directory: no leader until it is created.
					ok, _, w, err := s.conn.ExistsW(dir)
					return listing{w: w, created: ok}, err
				}
				return listing{c, w, false}, err
			})
			if err == nil && l.created {
				// Created meanwhile: list again, with a child watch.
				// (This watch fires at the directory's deletion or
				// data change into its buffered channel, unread.)
				continue
			}
			if err != nil {
				if !pause(err) {
					return
				}
				continue
			}
			childW = l.w
			if p, _ := lowest(dir, l.children); p != leader {
				// The old leader's node is gone (the oldest node only
				// changes by deletion), and so is its data watch.
				leader, dataW, cur = p, nil, distlock.LeaderInfo{}
			}
		}
		quiet := false // nothing known to send: wait for the child watch
		if leader != "" && dataW == nil {
			w, err := zkctx.Call(ctx, func() (watched, error) {
				d, st, ch, err := s.conn.GetW(leader)
				return watched{ch, d, st}, err
			})
			switch {
			case errors.Is(err, zk.ErrNoNode):
				// Deleted since the listing (or the release's set-data):
				// the child watch has fired or will (a watch's event
				// comes before the answers after it). Who leads now, the
				// next listing tells: "no leader" is not known.
				leader, cur, quiet = "", distlock.LeaderInfo{}, true
			case err != nil:
				if !pause(err) {
					return
				}
				continue
			default:
				dataW = w.ch
				cur = distlock.LeaderInfo{Value: string(w.data), Token: distlock.Token{Name: name, Seq: w.stat.Czxid, Owner: uint64(w.stat.EphemeralOwner)}}
			}
		}
		if !quiet && (!started || cur != sent) {
			select {
			case out <- cur:
				sent, started = cur, true
			case <-ctx.Done():
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case ev := <-childW:
			childW = nil
			if ev.Type == zk.EventNotWatching {
				// Session expired or connection closed: every watch is
				// gone. Re-arm them all.
				dataW = nil
				if !pause(ev.Err) {
					return
				}
			}
		case ev := <-dataW:
			dataW = nil
			switch ev.Type {
			case zk.EventNodeDeleted:
				// The child watch fires too: go straight to it, with no
				// leader in the meantime.
				leader, cur = "", distlock.LeaderInfo{}
				select {
				case ev := <-childW:
					childW = nil
					if ev.Type == zk.EventNotWatching && !pause(ev.Err) {
						return
					}
				case <-ctx.Done():
					return
				}
			case zk.EventNotWatching:
				childW = nil
				if !pause(ev.Err) {
					return
				}
			}
		}
	}
}
