package qlock

import (
	"context"
	"errors"

	"github.com/distlock/distlock"
)

// An election is a queue of candidate entries beside a term record. The
// term record names the leading candidate's entry; the revision at which
// it was written (etcd mod revision, ZooKeeper mzxid) is the term's
// fencing token. A candidate leads while the record names its entry and
// the entry exists; when the named entry is gone (its session ended, it
// was deleted) the term is vacant, and the best waiting candidate — the
// highest priority, the oldest among equals — claims the next term by
// writing the record. A handoff deletes the leader's entry and writes the
// record naming the successor in one write, so the successor's term
// starts at the very revision the leader's ends.
//
// Why a record and not "the oldest candidate leads": a handoff to a
// chosen candidate, or one of higher priority, makes a leader of a
// candidate that is not the oldest, and a term's token must be larger
// than every earlier term's, which an entry's own position is not once
// older candidates may lead after it. Every term therefore starts with a
// write, and every write's revision is larger than all before it.
//
// Every write of the record is a compare-and-set on the record as the
// writer read it, guarded by the named entry's existence, so no two terms
// overlap and no candidate leads whose entry is gone (no phantom leader).
//
// The recipe's parts: this file is the handle (Election, Leader,
// Observe); campaign.go a candidate's wait until it leads (and its
// preemption of a leader of lower priority), which is the one
// acquisition path's step 3 for a candidate (hooks.wait, lifecycle.go);
// leadership.go the held term (Proclaim, Resign, HandOff); stepdown.go
// how a term ends (the pick of a successor, the handoff's write, the
// vacancy); election_state.go the election's state and the order of its
// candidates.

// ErrTermMoved reports a ClaimTerm or HandOff whose compare failed: the term
// record, or an entry it depends on, is not as the caller read it.
var ErrTermMoved = errors.New("the election's term moved")

// Election is leader election on a queue of candidates and a term record
// (see above). An Election is a handle, safe for concurrent use: every
// Campaign call is a candidate of its own, even on one session.
type Election struct {
	lock
	cfg distlock.ElectionConfig
}

var _ distlock.Elector = (*Election)(nil)

// NewElection returns the election called name on e's session.
func NewElection(e *Engine, name string, cfg distlock.ElectionConfig) (*Election, error) {
	return newRecipe("election", e, name, cfg.Compat, func(l lock) *Election { return &Election{l, cfg} })
}

// Leader returns the current leader's value and token, read fresh from
// the store (at least as new as every write acknowledged before the
// call). With no leader (no candidate, or a term vacant until the next
// candidate claims it) the error wraps distlock.ErrNoLeader.
func (el *Election) Leader(ctx context.Context) (distlock.LeaderInfo, error) {
	st, err := el.e.d.ReadElection(ctx, el.name)
	if err != nil {
		return distlock.LeaderInfo{}, el.e.fail(el.name, distlock.OpLeader, err)
	}
	li := st.info(el.name)
	if li.NoLeader() {
		return li, el.e.fail(el.name, distlock.OpLeader, distlock.ErrNoLeader)
	}
	return li, nil
}

// Observe streams the election's leader: first the current one (the zero
// LeaderInfo if none), then every change, in the order they happened: a
// new leader (new token), a Proclaim (same token, new value), and "no
// leader" (see LeaderInfo.NoLeader) while a term is vacant or when the
// last candidate goes. Consecutive equal values are sent once. The
// channel is closed when ctx ends or the session's client or connection
// is closed. Receivers must keep up: Observe waits for each value to be
// taken.
func (el *Election) Observe(ctx context.Context) <-chan distlock.LeaderInfo {
	out := make(chan distlock.LeaderInfo)
	go func() {
		defer close(out)
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		states := make(chan ElectionState)
		go el.e.d.WatchElection(ctx, el.name, states)
		var last distlock.LeaderInfo
		first := true
		for st := range states {
			if st.Partial {
				// Its leader's entry may have gone: the full state
				// that follows says.
				continue
			}
			li := st.info(el.name)
			if !first && li == last {
				continue
			}
			first, last = false, li
			select {
			case out <- li:
			case <-ctx.Done():
			}
		}
	}()
	return out
}
