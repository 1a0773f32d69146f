package qlock

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/distlock/distlock"
)

// Election is leader election on the queue lock: every Campaign enqueues
// one candidate entry, whose value is the candidate's value, in the
// election's own queue (candidates and lock entries of the same name never
// wait for each other), and the oldest candidate leads. Its term's fencing
// token is its entry's, so tokens of successive leaders only grow. An
// Election is a handle, safe for concurrent use: every Campaign call is a
// candidate of its own, even on one session.
type Election struct{ lock }

var _ distlock.Elector = (*Election)(nil)

// NewElection returns the election called name on e's session.
func NewElection(e *Engine, name string) (*Election, error) {
	return newRecipe("election", e, name, func(l lock) *Election { return &Election{l} })
}

// Campaign enqueues a candidate with value as its value and waits until
// it leads. It returns only once it knows its entry still exists (no
// phantom leader), and fails, leaving no entry behind, when ctx ends (the
// error wraps ctx's cause), when the session ends
// (distlock.ErrSessionExpired, ErrSessionClosed) or when its entry is
// deleted by someone else (distlock.ErrEntryGone). Once the session has
// ended every Campaign fails: campaign again on a new session.
//
// The returned Leadership ends (Done, Context) when the entry goes, the
// session ends, or Resign is called; its Err then says why.
func (el *Election) Campaign(ctx context.Context, value string) (distlock.Leadership, error) {
	n, lease, err := el.take(ctx, Request{Op: distlock.OpCampaign, Kind: Candidate, Value: []byte(value)})
	if err != nil {
		return nil, err
	}
	return &leadership{Lease: lease, e: el.e, n: n, tel: el.tel}, nil
}

// Leader returns the current leader's value and token, read fresh from
// the store (at least as new as every write acknowledged before the
// call). That candidate leads from the moment its predecessor's entry
// went, possibly a little before its Campaign returns. With no candidate
// at all the error wraps distlock.ErrNoLeader.
func (el *Election) Leader(ctx context.Context) (distlock.LeaderInfo, error) {
	li, err := el.e.d.Leader(ctx, el.name)
	if err != nil {
		return distlock.LeaderInfo{}, el.e.fail(el.name, distlock.OpLeader, err)
	}
	return li, nil
}

// Observe streams the election's leader: first the current one (the zero
// LeaderInfo if none), then every change, in the order they happened: a
// new leader (new token), a Proclaim (same token, new value), and "no
// leader" (see LeaderInfo.NoLeader) when the last candidate goes.
// Consecutive equal values are sent once. The channel is closed when ctx
// ends or the session's client or connection is closed. Receivers must
// keep up: Observe waits for each value to be taken.
func (el *Election) Observe(ctx context.Context) <-chan distlock.LeaderInfo {
	ch := make(chan distlock.LeaderInfo)
	go el.e.d.Observe(ctx, el.name, ch)
	return ch
}

// leadership is a won campaign: the held entry's Lease, and the entry for
// Proclaim.
type leadership struct {
	*distlock.Lease
	e   *Engine
	n   *Node
	tel *lockTel
	// mu serializes Proclaim and Resign: a driver may keep the entry's
	// version in n, which Proclaim updates.
	mu sync.Mutex
}

// String names the leader's entry.
func (l *leadership) String() string { return l.n.Key }

func (l *leadership) fail(op distlock.Op, err error) error {
	return l.e.fail(l.n.Name, op, err)
}

// Proclaim replaces the leader's value, only while this term's entry
// still exists; otherwise (and, without writing, once this Leadership has
// ended) it fails with an error wrapping distlock.ErrNotLeader. A Proclaim
// does not hand leadership over.
func (l *leadership) Proclaim(ctx context.Context, value string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.Err(); err != nil {
		return l.fail(distlock.OpProclaim, fmt.Errorf("%w: %w", distlock.ErrNotLeader, inner(err)))
	}
	if err := l.e.d.Proclaim(ctx, l.n, value); err != nil {
		return l.fail(distlock.OpProclaim, err)
	}
	return nil
}

// Resign ends leadership: it deletes the entry only if it is still this
// term's (the Lease's Unlock), which hands leadership to the next
// candidate at once. If leadership had already been lost, or Resign was
// called before, the error wraps distlock.ErrNotLeader (and ErrLost or
// ErrReleased); if the delete could not be made, the error says so (the
// entry is retried in the background and goes with the session at the
// latest) — Resign never pretends.
func (l *leadership) Resign(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	ctx, span := l.tel.release(ctx, distlock.OpResign, l.n.Kind, l.n.Token)
	defer span.End()
	err := l.Unlock(ctx)
	if errors.Is(err, distlock.ErrLost) || errors.Is(err, distlock.ErrReleased) {
		err = l.fail(distlock.OpResign, fmt.Errorf("%w: %w", distlock.ErrNotLeader, inner(err)))
	}
	endSpan(span, err)
	return err
}
