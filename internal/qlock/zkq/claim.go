package zkq

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/ctxwait"
	"github.com/distlock/distlock/internal/qlock"
	"github.com/go-zookeeper/zk"
)

// A semaphore's slots on ZooKeeper (see qlock's semaphore.go): slot i of
// a semaphore of N permits is the ephemeral znode DIR/@permits/<i>-of-<N>,
// its data the holder. The count is in the name so that one listing of
// @permits shows everyone's N. The line's head lists @permits with a
// child watch — the only watch on it, so a release wakes the head alone —
// and claims with one multi that creates the slot and deletes its line
// entry. ZooKeeper cannot compare a directory's children inside a write,
// so a direct claim (nobody in the line) looks at the line after its
// create and gives the slot back if someone is queued.

// permitsChild is the child of a semaphore's directory that holds its
// slots; '@' keeps it apart from sub-lock directories.
const permitsChild = "@permits"

// slotName returns slot i's znode name for a count of n.
func slotName(i, n int) string { return strconv.Itoa(i) + "-of-" + strconv.Itoa(n) }

// parseSlotName parses a slot znode name.
func parseSlotName(c string) (i, n int, ok bool) {
	is, ns, found := strings.Cut(c, "-of-")
	if !found {
		return 0, 0, false
	}
	i, err1 := strconv.Atoi(is)
	n, err2 := strconv.Atoi(ns)
	return i, n, err1 == nil && err2 == nil && i >= 0 && n > 0
}

// slotsOf checks the slot names kids against a count of n and returns a
// free slot, at random (claimers arriving together rarely aim at the same
// one), that mine (if not nil) does not say this session is claiming (-1
// if none).
func slotsOf(name string, n int, kids []string, mine func(i int) bool) (int, error) {
	taken := make([]bool, n)
	for _, c := range kids {
		i, m, ok := parseSlotName(c)
		if !ok {
			continue
		}
		if m != n || i >= n {
			return 0, fmt.Errorf("%w: semaphore %q: slot znode %s/%s was made for %d permits, this Semaphore has %d", distlock.ErrPermitsMismatch, name, permitsChild, c, m, n)
		}
		taken[i] = true
	}
	var free []int
	for i, t := range taken {
		if !t && (mine == nil || !mine(i)) {
			free = append(free, i)
		}
	}
	if len(free) == 0 {
		return -1, nil
	}
	return free[rand.IntN(len(free))], nil
}

// claim is one permit acquisition's claims on ZooKeeper (qlock.Claimer):
// the session's book of the semaphore's slots, and the line head's state
// between its claims.
type claim struct {
	s    *Session
	book *qlock.SlotBook
	r    qlock.Request
	// slots is the head's watch on the slots, set by its last Claim for
	// WaitSlot; freed is the book's Freed as that Claim took it before
	// listing the slots: WaitSlot wakes on it too.
	slots <-chan zk.Event
	freed <-chan struct{}
	// unfollowed says the line node's follower saw the node go while a
	// claim was in flight (see node.claim) and stopped.
	unfollowed atomic.Bool
}

// Claimer returns the claims of one permit acquisition (qlock.Slots).
func (s *Session) Claimer(book *qlock.SlotBook, r qlock.Request) qlock.Claimer {
	return &claim{s: s, book: book, r: r}
}

// Claim takes a free slot of the semaphore (qlock.Claimer).
func (c *claim) Claim(ctx context.Context, line *qlock.Node) (*qlock.Node, error) {
	s, r, name := c.s, c.r, c.book.Name()
	if !s.ours() {
		return nil, s.expired("expired (the connection reports another session)")
	}
	dir := s.Dir(name)
	sdir := dir + "/" + permitsChild
	fresh := false // synced with the leader
	sync := func() error {
		fresh = true
		return s.storeErr(synced(ctx, s.conn, "/"))
	}
	if line == nil && r.Try {
		// As TryLock: a release that completed before the call is seen.
		if err := sync(); err != nil {
			return nil, err
		}
	}
	for {
		// The slots first: a count that differs is reported before
		// anything else (and not after a wait in the line).
		freed := c.book.Freed()
		kids, ch, err := s.listSlots(ctx, sdir, line != nil)
		if err != nil {
			return nil, err
		}
		if line == nil {
			if _, merr := slotsOf(name, r.Limit, kids, nil); merr == nil {
				if err := s.lineEmpty(ctx, dir); err != nil {
					return nil, err
				}
			}
		}
		mine := func(i int) bool { return c.book.Reserved(sdir + "/" + slotName(i, r.Limit)) }
		free, err := slotsOf(name, r.Limit, kids, mine)
		if err != nil && !fresh {
			// The server may lag behind the releases of the other
			// count's last holders: make sure before refusing.
			if err := sync(); err != nil {
				return nil, err
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		if line != nil {
			c.slots, c.freed = ch, freed
		}
		if free < 0 {
			return nil, fmt.Errorf("%w (all %d permits held)", distlock.ErrLocked, r.Limit)
		}
		path := sdir + "/" + slotName(free, r.Limit)
		if !c.book.Reserve(path) {
			continue
		}
		if line != nil {
			state(line).claim.Store(c)
		}
		err = s.createSlot(ctx, path, line, r.Value, func() { c.book.Free(path) })
		if err != nil && line != nil {
			state(line).claim.Store(nil)
			if c.unfollowed.Load() && ctx.Err() == nil {
				// Its node went during a claim that failed: not the
				// claim's doing, and nobody follows it any more.
				return nil, s.goneCause(ctx, line.Key)
			}
		}
		switch {
		case errors.Is(err, zk.ErrNodeExists):
			continue // taken meanwhile: look again
		case errors.Is(err, zk.ErrBadVersion) && line != nil:
			// Someone set the line node's data: go on from its version.
			st, err := stat(ctx, s.conn, line.Key)
			if err != nil {
				return nil, s.storeErr(err)
			}
			if st == nil || st.EphemeralOwner != s.id {
				return nil, s.goneCause(ctx, line.Key)
			}
			state(line).version = st.Version
			continue
		case errors.Is(err, zk.ErrNoNode):
			if line != nil { // the multi failed on one of its two parts
				if ok, _ := s.exists(ctx, line.Key); !ok {
					return nil, s.goneCause(ctx, line.Key)
				}
			}
			if err := s.ensureDir(ctx, sdir); err != nil {
				return nil, err
			}
			continue
		case err != nil:
			return nil, err
		}
		// The slot stays reserved until a failed claim's cleanup is over:
		// a claim of this session made meanwhile would otherwise have its
		// node deleted by it (same path, same owner).
		n, err := s.ownThen(ctx, path, 0, qlock.Counted, func() { c.book.Free(path) })
		if err != nil {
			return nil, err
		}
		n.Slot, n.Waited, n.Seq = free, line != nil, n.Token
		s.rememberToken(path, n.Token)
		if line == nil {
			// Give the slot back if the line has an entry (it may be older
			// than the slot), or the count was disagreed on meanwhile. The
			// sync first: an entry created on another server before the
			// slot is then seen here.
			err := sync()
			if err == nil {
				err = s.lineEmpty(ctx, dir)
			}
			if err == nil {
				var kids []string
				if kids, _, err = s.listSlots(ctx, sdir, false); err == nil {
					_, err = slotsOf(name, r.Limit, kids, nil)
				}
			}
			if err != nil {
				s.abandonMine(path, n.Token) // czxid-checked: the reservation can go now
				c.book.Free(path)
				return nil, err
			}
		}
		return n, nil
	}
}

// lineEmpty returns an error wrapping distlock.ErrLocked if semaphore
// dir's line has an entry.
func (s *Session) lineEmpty(ctx context.Context, dir string) error {
	w, found, err := s.first(ctx, dir, qlock.Counted)
	if err == nil && found {
		err = fmt.Errorf("%w (waiters queued: entry %s)", distlock.ErrLocked, w)
	}
	return err
}

// listSlots lists the slots, with a child watch when watch is set (ch is
// nil when the directory does not exist: a claim then creates it).
func (s *Session) listSlots(ctx context.Context, sdir string, watch bool) ([]string, <-chan zk.Event, error) {
	type listing struct {
		kids []string
		ch   <-chan zk.Event
	}
	l, err := retry(ctx, func() (listing, error) {
		if watch {
			c, _, ch, err := s.conn.ChildrenW(sdir)
			return listing{c, ch}, err
		}
		c, _, err := s.conn.Children(sdir)
		return listing{c, nil}, err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, s.storeErr(err)
	}
	return l.kids, l.ch, nil
}

// createSlot creates slot path (with line's entry deleted in the same
// multi). A request cut off by a connection loss
// may have been applied: after a sync, the slot's owner tells. When ctx
// ends with the request in flight, its answer is waited for in the
// background and a slot it made is deleted; dropped is called once that
// is over (the slot may be claimed again).
func (s *Session) createSlot(ctx context.Context, path string, line *qlock.Node, data []byte, dropped func()) error {
	send := func() error {
		if line == nil {
			_, err := s.conn.Create(path, data, zk.FlagEphemeral, s.acl)
			return err
		}
		// The line node's data is set before it goes, as a Mutex's holder
		// marks its release: the waiter behind it sees a data change and
		// knows that nothing older is left (the head is the oldest), with
		// no request to check.
		v := state(line).version
		rs, err := s.conn.Multi(
			&zk.CreateRequest{Path: path, Data: data, Acl: s.acl, Flags: zk.FlagEphemeral},
			&zk.SetDataRequest{Path: line.Key, Data: nil, Version: v},
			&zk.DeleteRequest{Path: line.Key, Version: v + 1})
		for _, r := range rs {
			if errors.Is(r.Error, zk.ErrNodeExists) {
				return r.Error
			}
		}
		return multiErr(rs, err)
	}
	// uncertain is the way out once a request may have made the slot:
	// the cleanup deletes it if it is this session's.
	uncertain := false
	fail := func(err error) error {
		if uncertain {
			go s.abandonMineThen(path, 0, dropped)
		} else {
			dropped()
		}
		return err
	}
	for {
		ch := make(chan error, 1)
		go func() { ch <- send() }()
		var err error
		select {
		case err = <-ch:
		case <-ctx.Done():
			// go-zookeeper answers every request (ErrConnectionClosed
			// when the connection is lost first): wait for it, and undo
			// what it made.
			go func() {
				if err := <-ch; err == nil || errors.Is(err, zk.ErrConnectionClosed) {
					s.abandonMineThen(path, 0, dropped)
					return
				}
				dropped()
			}()
			return context.Cause(ctx)
		}
		switch {
		case err == nil:
			s.remember(path)
			return nil
		case errors.Is(err, zk.ErrConnectionClosed):
			// Sent, maybe applied: the slot is ours if its owner is. The
			// sync first, so that the server answering has seen it.
			uncertain = true
			if err := synced(ctx, s.conn, path); err != nil {
				return fail(s.storeErr(err))
			}
			st, serr := stat(ctx, s.conn, path)
			if serr != nil {
				return fail(s.storeErr(serr))
			}
			if st != nil && st.EphemeralOwner == s.id {
				s.remember(path)
				return nil
			}
			if !s.ours() {
				return fail(s.expired("expired (a claim was cut off by a connection loss)"))
			}
			// Not made, and it cannot be any more (ZooKeeper refuses a
			// request of a session that moved to another server).
			uncertain = false
		case transient(err):
			if err := ctxwait.Sleep(ctx, qlock.RetryDelay); err != nil {
				return fail(err)
			}
		default:
			return fail(s.storeErr(err))
		}
	}
}

// exists reports whether path exists.
func (s *Session) exists(ctx context.Context, path string) (bool, error) {
	return retry(ctx, func() (bool, error) {
		ok, _, err := s.conn.Exists(path)
		return ok, err
	})
}

// WaitSlot waits on the child watch of the head's last Claim
// (qlock.Claimer).
func (c *claim) WaitSlot(ctx context.Context) error {
	ch := c.slots
	if ch == nil {
		return nil
	}
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case ev := <-ch:
		if ev.Type == zk.EventNotWatching {
			return c.s.watchErr(ev)
		}
		return nil
	case <-c.freed:
		// A slot this session's reservation held may be free: the
		// next Claim lists again.
		return nil
	}
}

// isSlot reports whether path is a semaphore's slot znode.
func isSlot(path string) bool { return strings.Contains(path, "/"+permitsChild+"/") }
