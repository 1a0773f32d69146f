package zkq

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/distlock/distlock/internal/qlock"
	"github.com/go-zookeeper/zk"
)

// node is the driver's state of one of this session's entry nodes
// (qlock.Node.Store).
type node struct {
	// version is the node's data version: a release or Proclaim writes
	// only the version it knows. Proclaim, serialized by the engine,
	// updates it.
	version int32
	// own is the node's first data watch, until Follow takes it over.
	own <-chan zk.Event
	// claim is set while a semaphore line head's claim, which deletes
	// its line node, is in flight: the node's deletion seen then is most
	// likely the claim's own, and the claim finds out if it was not (see
	// follow, which tells the claim it stopped).
	claim atomic.Pointer[claim]
}

func state(n *qlock.Node) *node { return n.Store.(*node) }

// own reads the new node's Stat with a data watch: its czxid is the token,
// and its ephemeral owner must be this session (the client starts a new
// session by itself after an expiry, and a create sent then belongs to
// it). The watch is the one Follow starts from.
func (s *Session) own(ctx context.Context, path string, seq int64, kind qlock.Kind) (*qlock.Node, error) {
	return s.ownThen(ctx, path, seq, kind, func() {})
}

// ownThen is own, calling dropped once a node it could not own is
// cleaned up (for a semaphore's slot: the slot may be claimed again).
func (s *Session) ownThen(ctx context.Context, path string, seq int64, kind qlock.Kind, dropped func()) (*qlock.Node, error) {
	drop := func() { s.abandon(path); dropped() }
	if kind == qlock.Counted {
		drop = func() { s.abandonMineThen(path, 0, dropped) }
	}
	w, ok, err := s.getW(ctx, path)
	if err != nil {
		drop()
		return nil, err
	}
	if !ok {
		s.forget(path)
		dropped()
		return nil, s.goneCause(ctx, path)
	}
	if w.stat.EphemeralOwner != s.id {
		drop()
		return nil, s.expired(fmt.Sprintf("expired (node %s belongs to session %#x)", path, w.stat.EphemeralOwner))
	}
	return &qlock.Node{
		Entry: qlock.Entry{Key: path, Seq: seq, Kind: kind},
		Token: w.stat.Czxid,
		Store: &node{version: w.stat.Version, own: w.ch},
	}, nil
}

// Follow calls gone when n's node is deleted by anyone but its owner or
// its watch ends with the session, until n.Alive() ends (qlock.Driver):
// a goroutine per entry, which selects on the node's data watch (the
// client gives each watch a channel of its own).
func (s *Session) Follow(n *qlock.Node, gone func(error)) {
	s.Go(func(context.Context) { s.follow(n, gone) })
}

func (s *Session) follow(n *qlock.Node, gone func(error)) {
	alive, path, ch := n.Alive(), n.Key, state(n).own
	for {
		select {
		case <-alive.Done():
			return
		case ev := <-ch:
			if c := state(n).claim.Load(); ev.Type != zk.EventNotWatching && c != nil {
				// The claim's own set-data and delete (their events come
				// before its answer), or what the claim's failure reports:
				// no Sync or read to tell a loss from them.
				c.unfollowed.Store(true)
				return
			}
			switch ev.Type {
			case zk.EventNodeDeleted:
				gone(s.goneCause(alive, path))
				return
			case zk.EventNotWatching:
				gone(s.watchErr(ev))
				return
			}
			w, ok, err := s.getW(alive, path)
			switch {
			case err != nil:
				gone(err)
				return
			case !ok:
				gone(s.goneCause(alive, path))
				return
			}
			ch = w.ch
		}
	}
}

// ConfirmAll is the last look before "acquired" (qlock.Driver): a node's
// own watch may have fired without Follow having run yet, and the
// connection may have moved to another session. A multi-lock's nodes are
// looked at together: one round trip.
func (s *Session) ConfirmAll(ctx context.Context, ns []*qlock.Node) []error {
	errs := make([]error, len(ns))
	if len(ns) == 1 {
		errs[0] = s.confirm(ctx, ns[0])
	} else {
		var wg sync.WaitGroup
		for i, n := range ns {
			wg.Go(func() { errs[i] = s.confirm(ctx, n) })
		}
		wg.Wait()
	}
	for _, err := range errs {
		if err != nil {
			return errs
		}
	}
	return nil
}

// confirm is ConfirmAll's look at one node.
func (s *Session) confirm(ctx context.Context, n *qlock.Node) error {
	alive := n.Alive()
	if len(state(n).own) > 0 && alive.Err() == nil {
		// An event is pending on the node's watch: a deletion, or a data
		// change. Look.
		ok, err := s.exists(ctx, n.Key)
		if err != nil {
			return s.storeErr(err)
		}
		if !ok {
			return s.goneCause(ctx, n.Key)
		}
	}
	if alive.Err() != nil {
		return context.Cause(alive)
	}
	if !s.ours() {
		return s.expired("expired while acquiring")
	}
	return nil
}
