package zklock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/ctxwait"
	"github.com/distlock/distlock/internal/zkctx"
	"github.com/go-zookeeper/zk"
)

// abandonTimeout bounds the cleanup a failed Lock does before returning;
// if the delete has not gone through by then, it is retried in the
// background for as long as the connection keeps the ZooKeeper session
// (see removeLater).
const abandonTimeout = time.Second

// Entry-name kind markers. '@' cannot start a lock-name segment.
const (
	exclusiveMark = 'w'
	sharedMark    = 'r'
	guidLen       = 32
)

// dir returns the znode under which lock name keeps its entries.
func (s *Session) dir(name string) string { return s.prefix + "/" + name }

func kindMark(k distlock.Kind) byte {
	if k == distlock.Shared {
		return sharedMark
	}
	return exclusiveMark
}

// entryBase returns the name, without the sequence suffix the server
// appends, of a new entry: "@w-<guid>-".
func entryBase(k distlock.Kind, guid string) string {
	return "@" + string(kindMark(k)) + "-" + guid + "-"
}

// parseEntry parses a child name "@<kind>-<guid>-<seq>". ok is false for
// anything else: foreign znodes in a lock's directory are ignored.
func parseEntry(child string) (kind distlock.Kind, guid string, seq int64, ok bool) {
	const head = 3 // "@w-"
	if len(child) < head+guidLen+2 || child[0] != '@' || child[2] != '-' || child[head+guidLen] != '-' {
		return 0, "", 0, false
	}
	switch child[1] {
	case exclusiveMark:
		kind = distlock.Exclusive
	case sharedMark:
		kind = distlock.Shared
	default:
		return 0, "", 0, false
	}
	guid = child[head : head+guidLen]
	for _, c := range guid {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return 0, "", 0, false
		}
	}
	num := child[head+guidLen+1:]
	for _, c := range num {
		if c < '0' || c > '9' {
			return 0, "", 0, false
		}
	}
	seq, err := strconv.ParseInt(num, 10, 64)
	if err != nil || num == "" {
		return 0, "", 0, false
	}
	return kind, guid, seq, true
}

// electionMark marks an Election's entries: "@e-<guid>-<seq>". parseEntry
// does not accept them, so lock queues (Mutex, RWMutex) and elections
// never see each other's entries, even in a directory of the same name: an
// election's waiters must not take a Proclaim (a data change) for a
// release, as a lock's waiters do (see waitGone).
const electionMark = 'e'

// parseElectionEntry parses an Election's child name "@e-<guid>-<seq>",
// which has the layout of a lock entry's.
func parseElectionEntry(child string) (guid string, seq int64, ok bool) {
	if len(child) < 2 || child[0] != '@' || child[1] != electionMark {
		return "", 0, false
	}
	_, guid, seq, ok = parseEntry("@" + string(exclusiveMark) + child[2:])
	return guid, seq, ok
}

func newGUID() string {
	var b [guidLen / 2]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// entry is one of this session's nodes in a lock's queue.
type entry struct {
	s       *Session
	name    string
	path    string
	seq     int64
	kind    distlock.Kind
	waited  bool  // it had entries ahead when it enqueued
	czxid   int64 // the fencing token once it holds
	version int32
	own     <-chan zk.Event // the watch on the node, until track's goroutine takes over
	// election marks an Election's entry ("@e-…", see election.go): its
	// leader changes its data without leaving (Proclaim), so a data
	// change on a predecessor is not a release (see waitGone).
	election bool
	// alive is cancelled when the node is deleted by anyone but its owner,
	// when the session ends, or when the owner releases it; the cause says
	// which.
	alive context.Context
	kill  context.CancelCauseFunc
}

// request says what enqueue adds to a queue.
type request struct {
	op       string // for errors: "lock", "trylock", "campaign"
	kind     distlock.Kind
	try      bool
	election bool   // an Election candidate: an "@e" entry among candidates only
	data     []byte // the node's data: the session's holder, or the candidate's value
}

// acquire is Lock and TryLock.
func (s *Session) acquire(ctx context.Context, name string, kind distlock.Kind, try bool) (*distlock.Lease, error) {
	op := "lock"
	if try {
		op = "trylock"
	}
	e, err := s.enqueue(ctx, name, request{op: op, kind: kind, try: try, data: []byte(s.holder)})
	if err != nil {
		return nil, err
	}
	s.log.Debug("zklock: acquired", "lock", name, "node", e.path, "token", e.czxid)
	return e.hold(), nil
}

// enqueue adds an entry for r to lock name's queue and waits until it
// holds (Lock, TryLock, Campaign). On failure nothing is left behind.
func (s *Session) enqueue(ctx context.Context, name string, r request) (*entry, error) {
	fail := func(err error) error { return &distlock.LockError{Name: name, Op: r.op, Err: err} }
	if err := s.Err(); err != nil {
		return nil, fail(err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fail(context.Cause(ctx))
	}
	if !s.ours() {
		return nil, fail(s.expired("expired (the connection reports another session)"))
	}
	// Requests stop when the session ends, too.
	rctx, rcancel := context.WithCancelCause(ctx)
	defer rcancel(nil)
	stop := context.AfterFunc(s.ctx, func() { rcancel(context.Cause(s.ctx)) })
	defer stop()

	dir := s.dir(name)
	if r.try {
		// Look before creating: a TryLock that loses to a visible entry
		// costs one read and writes nothing. The Sync first makes the
		// look as fresh as etcd's: a release that completed before
		// TryLock was called is seen, even by a lagging follower.
		if _, err := retry(rctx, func() (string, error) { return s.conn.Sync("/") }); err != nil {
			return nil, fail(s.storeErr(err))
		}
		if p, found, err := s.first(rctx, dir, r.kind); err != nil {
			return nil, fail(err)
		} else if found {
			return nil, fail(fmt.Errorf("%w (entry %s)", distlock.ErrLocked, p))
		}
	}
	guid := newGUID()
	base := entryBase(r.kind, guid)
	if r.election {
		base = "@" + string(electionMark) + "-" + guid + "-"
	}
	path, err := s.createData(rctx, dir, base, guid, r.data)
	if err != nil {
		return nil, fail(err)
	}
	var seq int64
	if r.election {
		_, seq, _ = parseElectionEntry(path[len(dir)+1:])
	} else {
		_, _, seq, _ = parseEntry(path[len(dir)+1:])
	}
	// The listing and the read of my node's Stat (with the watch that
	// follows it) go out together: both follow the create on the session's
	// ordered channel, so the listing sees every entry created before mine.
	type listing struct {
		children []string
		err      error
	}
	lch := make(chan listing, 1)
	go func() {
		c, err := retry(rctx, func() ([]string, error) {
			c, _, err := s.conn.Children(dir)
			return c, err
		})
		lch <- listing{c, err}
	}()
	e, err := s.track(rctx, name, path, seq, r.kind)
	if err != nil {
		return nil, fail(err)
	}
	e.election = r.election
	l := <-lch
	if l.err != nil {
		err := s.storeErr(l.err)
		e.abandon(err)
		return nil, fail(err)
	}
	var all []distlock.Entry
	if r.election {
		all = electionEntries(dir, l.children)
	} else {
		all = lockEntries(dir, l.children)
	}
	q := distlock.NewQueue(distlock.Entry{Key: path, Seq: seq, Kind: r.kind}, all)
	_, waited := q.Next()
	e.waited = waited
	if r.try && waited {
		p, _ := q.Next()
		err := fmt.Errorf("%w (entry %s)", distlock.ErrLocked, p.Key)
		e.abandon(err)
		return nil, fail(err)
	}
	if waited {
		s.log.Debug("zklock: enqueued", "lock", name, "node", path, "ahead", len(q.Ahead()))
		if err := e.wait(rctx, q); err != nil {
			e.abandon(err)
			return nil, fail(err)
		}
	}
	if err := e.check(rctx); err != nil {
		e.abandon(err)
		return nil, fail(err)
	}
	return e, nil
}

// lockEntries returns the lock entries (readers and writers) among dir's
// children; anything else there is ignored.
func lockEntries(dir string, children []string) []distlock.Entry {
	all := make([]distlock.Entry, 0, len(children))
	for _, c := range children {
		if k, _, sq, ok := parseEntry(c); ok {
			all = append(all, distlock.Entry{Key: dir + "/" + c, Seq: sq, Kind: k})
		}
	}
	return all
}

// first returns the oldest entry in dir that an entry of kind would wait
// for, if any.
func (s *Session) first(ctx context.Context, dir string, kind distlock.Kind) (string, bool, error) {
	children, err := retry(ctx, func() ([]string, error) {
		c, _, err := s.conn.Children(dir)
		return c, err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return "", false, nil
	}
	if err != nil {
		return "", false, s.storeErr(err)
	}
	all := lockEntries(dir, children)
	q := distlock.NewQueue(distlock.Entry{Seq: math.MaxInt64, Kind: kind}, all)
	if p, ok := q.Next(); ok {
		return p.Key, true, nil
	}
	return "", false, nil
}

// create creates an entry node named base plus a sequence number in dir,
// creating dir as needed. A create cut off by a connection loss may have
// happened: the node is then looked for by its GUID. On failure nothing is
// left behind (a cleanup runs on in the background if needed).
func (s *Session) create(ctx context.Context, dir, base, guid string) (string, error) {
	return s.createData(ctx, dir, base, guid, []byte(s.holder))
}

// createData is create with the node's data given (an Election's
// candidate value instead of the session's holder).
func (s *Session) createData(ctx context.Context, dir, base, guid string, data []byte) (string, error) {
	for {
		ch := make(chan createResult, 1)
		go func() {
			p, err := s.conn.Create(dir+"/"+base, data, zk.FlagEphemeral|zk.FlagSequence, s.acl)
			ch <- createResult{p, err}
		}()
		var r createResult
		select {
		case r = <-ch:
		case <-ctx.Done():
			s.abandonCreate(ch, dir, guid)
			return "", context.Cause(ctx)
		}
		switch {
		case r.err == nil:
			s.remember(r.path)
			return r.path, nil
		case errors.Is(r.err, zk.ErrNoNode):
			if err := s.ensureDir(ctx, dir); err != nil {
				return "", err
			}
		case errors.Is(r.err, zk.ErrConnectionClosed):
			// Sent, maybe applied: look for it once the client is back.
			p, err := s.findGUID(ctx, dir, guid)
			if err != nil {
				s.abandonGUID(dir, guid)
				return "", err
			}
			if p != "" {
				s.remember(p)
				return p, nil
			}
			// Not made. Create again only while the connection has this
			// session: after an expiry the client starts a new session by
			// itself, and a node created in it would belong to no Session.
			if !s.ours() {
				return "", s.expired("expired (a create was cut off by a connection loss)")
			}
		case transient(r.err):
			// Never sent.
			if err := ctxwait.Sleep(ctx, retryDelay); err != nil {
				return "", err
			}
		default:
			return "", s.storeErr(r.err)
		}
	}
}

// ensureDir creates dir and its parents as container nodes (persistent
// nodes where the server has no containers).
func (s *Session) ensureDir(ctx context.Context, dir string) error {
	for i := 1; i <= len(dir); i++ {
		if i < len(dir) && dir[i] != '/' {
			continue
		}
		p := dir[:i]
		_, err := retry(ctx, func() (string, error) {
			return s.conn.CreateContainer(p, nil, zk.FlagContainer, s.acl)
		})
		if unimplemented(err) {
			_, err = retry(ctx, func() (string, error) { return s.conn.Create(p, nil, zk.FlagPersistent, s.acl) })
		}
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("create %s: %w", p, s.storeErr(err))
		}
	}
	return nil
}

// findGUID looks for the entry with guid in dir, after a sync so that the
// server answering has seen every write the leader committed before.
func (s *Session) findGUID(ctx context.Context, dir, guid string) (string, error) {
	if _, err := retry(ctx, func() (string, error) { return s.conn.Sync(dir) }); err != nil {
		return "", s.storeErr(err)
	}
	children, err := retry(ctx, func() ([]string, error) {
		c, _, err := s.conn.Children(dir)
		return c, err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return "", nil
	}
	if err != nil {
		return "", s.storeErr(err)
	}
	for _, c := range children {
		if _, g, _, ok := parseEntry(c); ok && g == guid {
			return dir + "/" + c, nil
		}
		// An Election's entry ("@e-…") made by a create that was cut off.
		if g, _, ok := parseElectionEntry(c); ok && g == guid {
			return dir + "/" + c, nil
		}
	}
	return "", nil
}

// track reads the new node's Stat with a watch: its czxid is the token, and
// its ephemeral owner must be this session (the client starts a new
// session by itself after an expiry, and a create sent then belongs to
// it). Then it follows the node for deletion by others.
func (s *Session) track(ctx context.Context, name, path string, seq int64, kind distlock.Kind) (*entry, error) {
	w, ok, err := s.getW(ctx, path)
	if err != nil {
		s.abandon(path)
		return nil, err
	}
	if !ok {
		s.forget(path)
		return nil, s.goneCause(ctx, path)
	}
	if w.stat.EphemeralOwner != s.id {
		s.abandon(path)
		return nil, s.expired(fmt.Sprintf("expired (node %s belongs to session %#x)", path, w.stat.EphemeralOwner))
	}
	alive, kill := context.WithCancelCause(s.ctx)
	e := &entry{s: s, name: name, path: path, seq: seq, kind: kind, czxid: w.stat.Czxid, version: w.stat.Version,
		own: w.ch, alive: alive, kill: kill}
	s.goBackground(func(context.Context) { e.follow(w.ch) })
	if s.ctx.Err() != nil {
		kill(s.Err())
	}
	return e, nil
}

// follow ends e.alive when e's node is deleted by anyone but its owner or
// the session ends; ch is the node's first watch.
func (e *entry) follow(ch <-chan zk.Event) {
	s, path := e.s, e.path
	for {
		select {
		case <-e.alive.Done():
			return
		case ev := <-ch:
			switch ev.Type {
			case zk.EventNodeDeleted:
				e.kill(s.goneCause(e.alive, path))
				return
			case zk.EventNotWatching:
				e.kill(s.watchErr(ev))
				return
			}
			w, ok, err := s.getW(e.alive, path)
			switch {
			case err != nil:
				e.kill(err)
				return
			case !ok:
				e.kill(s.goneCause(e.alive, path))
				return
			}
			ch = w.ch
		}
	}
}

// check is the last look before "acquired": the node's own watch may have
// fired without its goroutine having run yet.
func (e *entry) check(ctx context.Context) error {
	if len(e.own) > 0 && e.alive.Err() == nil {
		// An event is pending on the node's watch: a deletion, or a data
		// change. Look.
		ok, err := retry(ctx, func() (bool, error) {
			ok, _, err := e.s.conn.Exists(e.path)
			return ok, err
		})
		if err != nil {
			return e.s.storeErr(err)
		}
		if !ok {
			return e.s.goneCause(ctx, e.path)
		}
	}
	if e.alive.Err() != nil {
		return context.Cause(e.alive)
	}
	if !e.s.ours() {
		return e.s.expired("expired while acquiring")
	}
	return nil
}

// wait blocks until q says its owner holds the lock (distlock.WaitTurn),
// watching the predecessor and the nearest older entry (waitGone).
func (e *entry) wait(ctx context.Context, q *distlock.Queue) error {
	return distlock.WaitTurn(ctx, e.alive, q,
		func(ctx context.Context, p distlock.Entry) error { return e.waitGone(ctx, q, p) },
		func(ctx context.Context, below int64) { e.survivors(ctx, q, below) })
}

// waitGone waits until entry p of q is gone, with a data watch on p's
// node. An exclusive holder releases with one transaction that sets its
// node's data and deletes it (see release), so a waiter sees a data change
// only when its predecessor released the lock it held: nothing older than
// p is left, and the wake needs no request. A plain deletion (p gave up
// waiting, its session ended) leaves older entries to check (survivors).
func (e *entry) waitGone(ctx context.Context, q *distlock.Queue, p distlock.Entry) error {
	for {
		pw, ok, err := e.s.getW(ctx, p.Key)
		if err != nil || !ok {
			return err
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case ev := <-pw.ch:
			switch ev.Type {
			case zk.EventNodeDeleted:
				return nil
			case zk.EventNodeDataChanged:
				if p.Kind == distlock.Exclusive {
					q.Observed(p.Seq, distlock.Entry{}, false)
					if !e.election {
						return nil
					}
					// Election: p's data changes when it releases AND
					// when its leader Proclaims (it stays). Either way p
					// led, so nothing older is left (Observed above); the
					// loop's next read tells whether p is gone (released)
					// or still there (keep waiting on it). Mutex waiters
					// never get here: their path costs no extra request.
				}
			case zk.EventNotWatching:
				return e.s.watchErr(ev)
			}
		}
	}
}

// walkLimit is how many gone entries survivors checks one by one before
// it lists the directory instead.
const walkLimit = 2

// survivors runs when an entry went while older ones were still in q's
// snapshot without having released the lock (it gave up waiting, or its
// session ended). It checks the nearest older entries one by one, a small
// request each; past walkLimit gone ones it lists the directory once (one
// request whose size grows with the queue, but independent of how many
// entries left since the enqueue). An error leaves q as it was, which only
// means more watching.
func (e *entry) survivors(ctx context.Context, q *distlock.Queue, below int64) {
	var older []distlock.Entry
	for _, a := range q.Ahead() {
		if a.Seq < below && distlock.Conflicts(q.Me().Kind, a.Kind) {
			older = append(older, a)
		}
	}
	for i := len(older) - 1; i >= 0 && i >= len(older)-walkLimit; i-- {
		ok, err := zkctx.Call(ctx, func() (bool, error) {
			ok, _, err := e.s.conn.Exists(older[i].Key)
			return ok, err
		})
		if err != nil {
			return
		}
		if ok {
			q.Observed(below, older[i], true)
			return
		}
		q.Gone(older[i].Key)
	}
	if len(older) <= walkLimit {
		return
	}
	e.s.log.Debug("zklock: listing", "node", e.path, "older", len(older))
	older = older[:len(older)-walkLimit]
	dir := e.s.dir(e.name)
	kids, err := zkctx.Call(ctx, func() ([]string, error) {
		k, _, err := e.s.conn.Children(dir)
		return k, err
	})
	if err != nil {
		return
	}
	present := make(map[string]bool, len(kids))
	for _, k := range kids {
		present[dir+"/"+k] = true
	}
	var nearest distlock.Entry
	found := false
	for _, a := range older { // oldest first: the last present one is the nearest
		if present[a.Key] {
			nearest, found = a, true
		}
	}
	q.Observed(below, nearest, found)
}

// hold turns an acquired entry into a Lease that is lost when the entry is.
func (e *entry) hold() *distlock.Lease {
	return distlock.HoldWhile(distlock.Token{Name: e.name, Seq: e.czxid, Owner: uint64(e.s.id)}, e.alive, e.release, func(cause error) {
		e.s.log.Info("zklock: lock lost", "lock", e.name, "token", e.czxid, "cause", cause)
	})
}

// release deletes the node by its exact path and version. It is the
// Lease's release function. An exclusive entry is released with one
// transaction, set-data then delete (both version-checked): the data
// change tells the successor's watch that the lock was released by its
// holder, not given up by a waiter (see waitGone). One write, like a plain
// delete; the data written is empty.
func (e *entry) release(ctx context.Context) error {
	known := e.alive.Err() != nil
	e.kill(distlock.ErrReleased)
	err := e.handBack(ctx)
	if errors.Is(err, zk.ErrBadVersion) {
		// Someone set the node's data. The path, with its GUID and
		// sequence number, is still this acquisition's alone; a plain
		// delete only makes the successor check for itself.
		_, err = retry(ctx, func() (struct{}, error) { return struct{}{}, e.s.conn.Delete(e.path, -1) })
	}
	switch {
	case err == nil:
		e.s.forget(e.path)
	case errors.Is(err, zk.ErrNoNode):
		e.s.forget(e.path)
		if !known {
			return distlock.Lost(fmt.Errorf("%w: node %s was already gone at unlock", distlock.ErrEntryGone, e.path))
		}
	default:
		e.s.removeLater(e.path)
		return fmt.Errorf("delete %s: %w (retrying in the background while the connection keeps the session)", e.path, err)
	}
	e.s.log.Debug("zklock: released", "lock", e.name, "token", e.czxid)
	return nil
}

// handBack deletes the held node, with the set-data that marks a release
// for an exclusive entry. A request cut off by a connection loss may have
// been applied: if the retry finds the node gone, that was this release.
func (e *entry) handBack(ctx context.Context) error {
	del := func() error { return e.s.conn.Delete(e.path, e.version) }
	if e.kind == distlock.Exclusive && e.waited {
		del = func() error {
			rs, err := e.s.conn.Multi(
				&zk.SetDataRequest{Path: e.path, Data: nil, Version: e.version},
				&zk.DeleteRequest{Path: e.path, Version: e.version + 1})
			return multiErr(rs, err)
		}
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
		if err := ctxwait.Sleep(ctx, retryDelay); err != nil {
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

// abandon is the failure path of a Lock that had created its node.
func (e *entry) abandon(cause error) {
	e.kill(cause)
	e.s.abandon(e.path)
}

// abandon deletes a node of this session before a failed Lock returns. A
// node that cannot be deleted within abandonTimeout is left to a
// background retry, so that it never blocks the queue for longer than the
// ZooKeeper session lives.
func (s *Session) abandon(path string) {
	if !s.ours() {
		s.removeStray(path)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), abandonTimeout)
	defer cancel()
	_, err := zkctx.Call(ctx, func() (struct{}, error) { return struct{}{}, s.conn.Delete(path, -1) })
	if err == nil || errors.Is(err, zk.ErrNoNode) {
		s.forget(path)
		return
	}
	s.log.Warn("zklock: cleanup failed; retrying in the background", "node", path, "err", err)
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
	ctx, cancel := context.WithTimeout(context.Background(), abandonTimeout)
	defer cancel()
	st, err := retry(ctx, func() (*zk.Stat, error) {
		ok, st, err := s.conn.Exists(path)
		if err == nil && !ok {
			return nil, nil
		}
		return st, err
	})
	if err != nil || st == nil || st.EphemeralOwner == s.id || st.EphemeralOwner != s.conn.SessionID() {
		return // gone, going with this session, someone else's, or unknown
	}
	_, err = retry(ctx, func() (struct{}, error) { return struct{}{}, s.conn.Delete(path, st.Version) })
	if err != nil && !errors.Is(err, zk.ErrNoNode) {
		s.log.Warn("zklock: could not delete a node made in the connection's next session", "node", path, "err", err)
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
	go func() {
		for delay := retryDelay; s.ours(); delay = min(2*delay, s.timeout/6) {
			ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
			_, err := zkctx.Call(ctx, func() (struct{}, error) { return struct{}{}, s.conn.Delete(path, -1) })
			cancel()
			if err == nil || errors.Is(err, zk.ErrNoNode) {
				s.forget(path)
				return
			}
			if !retryCleanup(err) {
				s.log.Warn("zklock: cleanup abandoned", "node", path, "err", err)
				return
			}
			time.Sleep(delay)
		}
	}()
}

// retryCleanup reports whether a cleanup that failed with err may succeed
// later: the client was between servers, or the request ran out of time;
// not once the connection is closed or the request is refused.
func retryCleanup(err error) bool {
	return transient(err) || errors.Is(err, context.DeadlineExceeded)
}

// abandonCreate cleans up after a Lock that gave up while its create was in
// flight: it waits (up to abandonTimeout, then in the background) for the
// create's result and deletes whatever it made. The result always comes:
// go-zookeeper answers every request, with ErrConnectionClosed when the
// connection is lost before the reply, ErrClosing when it is closed.
func (s *Session) abandonCreate(ch <-chan createResult, dir, guid string) {
	finish := func(r createResult) {
		switch {
		case r.err == nil:
			s.remember(r.path)
			s.abandon(r.path)
		case errors.Is(r.err, zk.ErrConnectionClosed):
			s.abandonGUID(dir, guid)
		}
	}
	t := time.NewTimer(abandonTimeout)
	defer t.Stop()
	select {
	case r := <-ch:
		finish(r)
	case <-t.C:
		go func() { finish(<-ch) }()
	}
}

// abandonGUID deletes, in the background, the entry with guid in dir if a
// create cut off by a connection loss made it. The look for it follows a
// sync on the server the client is now connected to; a create still on its
// way from the server the connection was lost to is refused once the
// session has moved (ZooKeeper's session-moved check), so if the look does
// not find it, it never appears.
func (s *Session) abandonGUID(dir, guid string) {
	go func() {
		for delay := retryDelay; s.ours(); delay = min(2*delay, s.timeout/6) {
			ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
			p, err := s.findGUID(ctx, dir, guid)
			cancel()
			if err == nil {
				if p != "" {
					s.remember(p)
					s.abandon(p)
				}
				return
			}
			if !retryCleanup(err) {
				s.log.Warn("zklock: cleanup abandoned", "dir", dir, "guid", guid, "err", err)
				return
			}
			time.Sleep(delay)
		}
	}()
}

// createResult is the outcome of a create request.
type createResult struct {
	path string
	err  error
}

// unimplemented reports whether the server refused a container create
// because it has no containers (before 3.5.3).
func unimplemented(err error) bool {
	// go-zookeeper has no error for code -6 (Unimplemented).
	return err != nil && (strings.HasSuffix(err.Error(), "unknown error: -6") || strings.Contains(strings.ToLower(err.Error()), "unimplemented"))
}
