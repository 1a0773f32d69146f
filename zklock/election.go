package zklock

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/ctxwait"
	"github.com/distlock/distlock/internal/zkctx"
	"github.com/go-zookeeper/zk"
)

// Election is a leader election on ZooKeeper, on the same queue as Mutex:
// each Campaign creates one ephemeral sequential node "@e-<guid>-<seq>"
// in the election's directory, whose data is the candidate's value, and
// the oldest one leads. The leader's fencing token is its node's czxid.
//
// An election's waiters differ from a Mutex's in one thing: a leader
// changes its node's data without leaving (Proclaim), so a waiter that
// sees its predecessor's data change only learns that the predecessor
// led (nothing older is left) and reads it again to see whether it is
// gone; a Mutex's waiter takes the data change for the release itself.
// That is why election entries have a marker of their own: lock queues
// ignore them and elections ignore lock entries, even in a directory of
// the same name.
//
// An Election is a handle, safe for concurrent use: each Campaign creates
// its own node.
type Election struct {
	s    *Session
	name string
}

var _ distlock.Elector = (*Election)(nil)

// NewElection returns the election called name (see distlock.ValidateName)
// on the session's connection.
func NewElection(s *Session, name string) (*Election, error) {
	if s == nil {
		return nil, fmt.Errorf("zklock: new election %q: %w: *Session is nil", name, distlock.ErrNilClient)
	}
	if err := distlock.ValidateName(name); err != nil {
		return nil, err
	}
	return &Election{s: s, name: name}, nil
}

// Name returns the election's name.
func (el *Election) Name() string { return el.name }

// Session returns the session the candidates' nodes belong to.
func (el *Election) Session() *Session { return el.s }

// Dir returns the znode under which the election keeps its candidates.
func (el *Election) Dir() string { return el.s.dir(el.name) }

// Campaign enqueues a candidate whose value is value and waits until it
// leads. Uncontended, it costs what Mutex.Lock costs: the create, then the
// listing and the read of its own node's Stat, sent together. It returns
// only once it knows its node still exists (no phantom leader), and fails,
// leaving no node behind, when ctx ends (the error wraps ctx's cause),
// when the session ends (distlock.ErrSessionExpired, ErrSessionClosed) or
// when its node is deleted by someone else (distlock.ErrEntryGone).
//
// The returned Leadership ends (Done, Context) when the node is deleted by
// anyone but Resign, or the session ends; its Err then wraps
// distlock.ErrLost and the reason.
func (el *Election) Campaign(ctx context.Context, value string) (distlock.Leadership, error) {
	s, name := el.s, el.name
	e, err := s.enqueue(ctx, name, request{op: "campaign", kind: distlock.Exclusive, election: true, data: []byte(value)})
	if err != nil {
		return nil, err
	}
	s.log.Debug("zklock: leading", "election", name, "node", e.path, "token", e.czxid)
	ld := &leadership{e: e}
	ld.lease = distlock.HoldWhile(distlock.Token{Name: name, Seq: e.czxid, Owner: uint64(s.id)}, e.alive, e.release, func(cause error) {
		s.log.Info("zklock: leadership lost", "election", name, "token", e.czxid, "cause", cause)
	})
	return ld, nil
}

// electionEntries returns the election entries among dir's children.
func electionEntries(dir string, children []string) []distlock.Entry {
	all := make([]distlock.Entry, 0, len(children))
	for _, c := range children {
		if _, sq, ok := parseElectionEntry(c); ok {
			all = append(all, distlock.Entry{Key: dir + "/" + c, Seq: sq, Kind: distlock.Exclusive})
		}
	}
	return all
}

// lowest returns the oldest election entry among dir's children.
func lowest(dir string, children []string) (string, bool) {
	best, path := int64(math.MaxInt64), ""
	for _, c := range children {
		if _, sq, ok := parseElectionEntry(c); ok && sq < best {
			best, path = sq, dir+"/"+c
		}
	}
	return path, path != ""
}

// leadership is a won Campaign: the held Lease of the candidate's node.
type leadership struct {
	e     *entry
	lease *distlock.Lease
	// mu serializes Proclaim and Resign: both use (and Proclaim updates)
	// e.version.
	mu sync.Mutex
}

func (l *leadership) Token() distlock.Token     { return l.lease.Token() }
func (l *leadership) Done() <-chan struct{}     { return l.lease.Done() }
func (l *leadership) Err() error                { return l.lease.Err() }
func (l *leadership) Context() context.Context  { return l.lease.Context() }
func (l *leadership) String() string            { return l.e.path }
func (l *leadership) notLeader(err error) error { return l.fail("proclaim", err) }
func (l *leadership) fail(op string, err error) error {
	return &distlock.LockError{Name: l.e.name, Op: op, Err: fmt.Errorf("%w: %w", distlock.ErrNotLeader, err)}
}

// Proclaim sets the leader's value: a SetData on the leader's node with
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
func (l *leadership) Proclaim(ctx context.Context, value string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, s := l.e, l.e.s
	for {
		if err := l.lease.Err(); err != nil {
			return l.notLeader(err)
		}
		if !s.ours() {
			return l.notLeader(s.expired("expired (the connection reports another session)"))
		}
		st, err := zkctx.Call(ctx, func() (*zk.Stat, error) { return s.conn.Set(e.path, []byte(value), e.version) })
		switch {
		case err == nil:
			e.version = st.Version
			return nil
		case errors.Is(err, zk.ErrNoNode):
			return l.notLeader(fmt.Errorf("%w: node %s", distlock.ErrEntryGone, e.path))
		case errors.Is(err, zk.ErrBadVersion):
			st, err := zkctx.Call(ctx, func() (*zk.Stat, error) {
				ok, st, err := s.conn.Exists(e.path)
				if err == nil && !ok {
					st = nil
				}
				return st, err
			})
			ok := st != nil
			switch {
			case err != nil && transient(err):
			case err != nil:
				return l.fail("proclaim", s.storeErr(err))
			case !ok:
				return l.notLeader(fmt.Errorf("%w: node %s", distlock.ErrEntryGone, e.path))
			case st.EphemeralOwner != s.id:
				return l.notLeader(fmt.Errorf("node %s belongs to session %#x", e.path, st.EphemeralOwner))
			default:
				e.version = st.Version
				continue
			}
		case transient(err) && ctx.Err() == nil:
			// Maybe applied: the next try, with the same version, then
			// fails with a bad version and reads the node again.
		default:
			if ctx.Err() != nil {
				return &distlock.LockError{Name: e.name, Op: "proclaim", Err: context.Cause(ctx)}
			}
			return &distlock.LockError{Name: e.name, Op: "proclaim", Err: s.storeErr(err)}
		}
		if err := ctxwait.Sleep(ctx, retryDelay); err != nil {
			return &distlock.LockError{Name: e.name, Op: "proclaim", Err: err}
		}
	}
}

// Resign ends the leadership at once (Done closes, Err wraps
// distlock.ErrReleased) and deletes the node by its exact path and
// version, which hands leadership to the next candidate in the same
// write. If the leadership had been lost already, or Resign was called
// before, it returns an error wrapping distlock.ErrNotLeader (and the
// loss). If the delete fails, the error says so: the node is deleted in
// the background for as long as the connection keeps the ZooKeeper
// session, and goes with that session at the latest; until then the election has no other leader.
func (l *leadership) Resign(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	err := l.lease.Unlock(ctx)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, distlock.ErrLost), errors.Is(err, distlock.ErrReleased):
		return l.fail("resign", err)
	}
	return err
}

// Leader returns the current leader's value and token: the data and czxid
// of the election's oldest node, read after a Sync with the ZooKeeper
// leader (so it is at least as new as every write acknowledged before the
// call). It returns an error wrapping distlock.ErrNoLeader when the
// election has no candidate.
func (el *Election) Leader(ctx context.Context) (distlock.LeaderInfo, error) {
	s, dir := el.s, el.Dir()
	fail := func(err error) error { return &distlock.LockError{Name: el.name, Op: "leader", Err: err} }
	if _, err := retry(ctx, func() (string, error) { return s.conn.Sync(dir) }); err != nil && !errors.Is(err, zk.ErrNoNode) {
		return distlock.LeaderInfo{}, fail(err)
	}
	for {
		children, err := retry(ctx, func() ([]string, error) {
			c, _, err := s.conn.Children(dir)
			return c, err
		})
		if errors.Is(err, zk.ErrNoNode) {
			return distlock.LeaderInfo{}, fail(distlock.ErrNoLeader)
		}
		if err != nil {
			return distlock.LeaderInfo{}, fail(err)
		}
		p, ok := lowest(dir, children)
		if !ok {
			return distlock.LeaderInfo{}, fail(distlock.ErrNoLeader)
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
			return distlock.LeaderInfo{}, fail(err)
		}
		return distlock.LeaderInfo{Value: string(r.data), Token: distlock.Token{Name: el.name, Seq: r.stat.Czxid, Owner: uint64(r.stat.EphemeralOwner)}}, nil
	}
}

// Observe streams the election's leader: first the current one, then
// every change — a new leader, a Proclaim, and "no leader" (the zero
// LeaderInfo, see LeaderInfo.NoLeader) — in the order they happened. It
// keeps a child watch on the election's directory (an existence watch
// while the directory does not exist) and a data watch on the leader's
// node, re-armed after each event, and reads after a Sync; it goes on
// across reconnects, server failures and session expiries (it only
// reads, so it needs the connection, not the Session: it works after the
// Session ended too). Changes that follow each other faster than a watch
// is re-armed are coalesced: an intermediate leader may be skipped, but
// what is sent is never older than what was sent before, and the last
// value sent is the current state once the election is quiet. Consecutive
// equal values are sent once.
//
// The channel is closed when ctx ends, or when the connection is closed
// (nothing more can be observed then).
func (el *Election) Observe(ctx context.Context) <-chan distlock.LeaderInfo {
	ch := make(chan distlock.LeaderInfo)
	go el.observe(ctx, ch)
	return ch
}

func (el *Election) observe(ctx context.Context, out chan<- distlock.LeaderInfo) {
	defer close(out)
	s, dir := el.s, el.Dir()
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
			s.log.Debug("zklock: observe: connection closed", "election", el.name)
			return false
		}
		return ctxwait.Sleep(ctx, retryDelay) == nil
	}
	for ctx.Err() == nil {
		if childW == nil {
			if _, err := zkctx.Call(ctx, func() (string, error) { return s.conn.Sync(dir) }); err != nil && !errors.Is(err, zk.ErrNoNode) {
				if !pause(err) {
					return
				}
				continue
			}
			type listing struct {
				children []string
				w        <-chan zk.Event
			}
			l, err := zkctx.Call(ctx, func() (listing, error) {
				c, _, w, err := s.conn.ChildrenW(dir)
				return listing{c, w}, err
			})
			if errors.Is(err, zk.ErrNoNode) {
				// No directory: no leader until it is created.
				var ok bool
				l.children = nil
				l.w, err = zkctx.Call(ctx, func() (<-chan zk.Event, error) {
					var w <-chan zk.Event
					ok, _, w, err = s.conn.ExistsW(dir)
					return w, err
				})
				if err == nil && ok {
					// Created meanwhile: list again, with a child watch.
					// (This watch fires at the directory's deletion or
					// data change into its buffered channel, unread.)
					continue
				}
			}
			if err != nil {
				if !pause(err) {
					return
				}
				continue
			}
			childW = l.w
			p, ok := lowest(dir, l.children)
			if !ok {
				p = ""
			}
			if p != leader {
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
				cur = distlock.LeaderInfo{Value: string(w.data), Token: distlock.Token{Name: el.name, Seq: w.stat.Czxid, Owner: uint64(w.stat.EphemeralOwner)}}
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
				// The child watch fires too: wait for it, with no leader
				// in the meantime.
				leader, cur = "", distlock.LeaderInfo{}
				// Its child watch's event is coming; go straight to it.
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
