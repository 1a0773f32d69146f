package qlock

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/distlock/distlock"
)

// The engine, and the parts of the acquisition life cycle (lifecycle.go)
// that do not walk it: an entry set's errors, a held entry's follow-ups.

// Engine runs acquisitions on one session: its state, which the engine
// keeps, and its store's driver, which does the store's part.
type Engine struct {
	st *State
	d  Store
}

// New returns the engine of the session with state st on store driver d.
func New(st *State, d Store) *Engine { return &Engine{st: st, d: d} }

// Lost returns an error that matches both distlock.ErrLost and reason with
// errors.Is, for reporting why a held lock was lost; Lost(nil) is ErrLost
// itself.
func Lost(reason error) error {
	if reason == nil {
		return distlock.ErrLost
	}
	if errors.Is(reason, distlock.ErrLost) {
		return reason
	}
	return fmt.Errorf("%w: %w", distlock.ErrLost, reason)
}

// lost returns the end of the first of s's entries to have ended (not by a
// release), naming its lock when s has several; nil if none has.
func (s *entrySet) lost() error {
	for _, n := range s.ns {
		if n.alive.Err() == nil {
			continue
		}
		cause := context.Cause(n.alive)
		if errors.Is(cause, distlock.ErrReleased) {
			continue
		}
		if len(s.ns) > 1 {
			return entryLost(n.Name, cause)
		}
		return cause
	}
	return nil
}

// or returns an entry's end (see lost), which wins over err: a wait's own
// error is often only the consequence of it.
func (s *entrySet) or(err error) error {
	if l := s.lost(); l != nil {
		return l
	}
	return err
}

// entryLost says which name's entry ended a multi-lock's wait or hold.
func entryLost(name string, cause error) error {
	if errors.Is(cause, distlock.ErrReleased) {
		return cause
	}
	return fmt.Errorf("entry of lock %q: %w", name, cause)
}

// follow starts n's life under the session and has the driver follow
// its entry (step 2).
func (e *Engine) follow(n *Node) {
	st := e.st
	n.Begin(st.Context())
	if st.Err() != nil {
		n.kill(st.Err())
	}
	e.d.Follow(n, n.lose)
}

// start begins an acquisition of lock name: it checks the session and
// ctx, and returns a context that also ends with the session (its
// requests stop then), done to call when the acquisition is over, and
// fail, which wraps an error in the acquisition's LockError (as err is
// already).
func (e *Engine) start(ctx context.Context, name string, op distlock.Op) (_ context.Context, done func(), fail func(error) error, err error) {
	fail = func(err error) error { return e.fail(name, op, err) }
	st := e.st
	if err := st.Err(); err != nil {
		return ctx, func() {}, fail, fail(err)
	}
	if err := ctx.Err(); err != nil {
		return ctx, func() {}, fail, fail(context.Cause(ctx))
	}
	ctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(st.Context(), func() { cancel(st.Err()) })
	return ctx, func() { stop(); cancel(nil) }, fail, nil
}

// next returns the entry to wait on now (see wait), and which of s's
// entries waits on it; ok is false when none waits.
func (s *entrySet) next() (i int, p Entry, ok bool) {
	for j, q := range s.qs {
		if w, waits := q.Next(); waits && (!ok || w.Seq > p.Seq) {
			i, p, ok = j, w, true
		}
	}
	return i, p, ok
}

// joined is the errors of errs that are not nil: nil, the one, or their
// join.
func joined(errs []error) error {
	var out []error
	for _, err := range errs {
		if err != nil {
			out = append(out, err)
		}
	}
	switch len(out) {
	case 0:
		return nil
	case 1:
		return out[0]
	}
	return errors.Join(out...)
}

// followRevoke has a revocable session's held entry n, of lock, lose its
// Lease (lose) when an operator revokes it.
func (e *Engine) followRevoke(n *Node, lock string, lose func(error)) {
	if !e.st.Revocable() {
		return
	}
	e.d.FollowRevoke(n, lock, func(data []byte) {
		r, err := parseRevocation(data)
		if err != nil {
			// Still a request to let go; what it says is unknown.
			r = distlock.Revocation{Lock: n.Name, Reason: err.Error()}
		}
		e.st.log.Info(e.st.backend.Pkg+": lock revoked", "lock", n.Name, "token", n.Token, "by", r.By, "reason", r.Reason, "grace", r.Grace)
		lose(&distlock.RevokedError{Revocation: r})
	})
}

// loseWith ends a Lease (lose) when alive ends, unless alive ended with
// distlock.ErrReleased as its cause — what release cancels it with before
// deleting the entry. ended is told the cause of every end, release
// included (for metrics); a loss is logged for lock name at token first.
func (e *Engine) loseWith(alive context.Context, lose, ended func(error), name string, token int64) {
	lost := func(cause error) {
		e.st.log.Info(e.st.backend.Pkg+": lock lost", "lock", name, "token", token, "cause", cause)
	}
	context.AfterFunc(alive, func() {
		cause := context.Cause(alive)
		ended(cause)
		if errors.Is(cause, distlock.ErrReleased) {
			return
		}
		lost(cause)
		lose(Lost(cause))
	})
}

// pastDeadline is the last check before an acquisition is returned
// (Lock, TryLock, RLock, Campaign, Acquire, a multi-lock's Lock): nil
// while the session lives and its client-side deadline (on the boot
// clock, see clock.go) lies ahead, else why not. A process stopped
// (SIGSTOP, a long GC, a starved VM) while its entry waited can wake past
// the deadline with the event that says it holds already read, before
// the session's own timer has ended it: the store may have expired the
// session meanwhile and granted the lock to a successor, so the entry's
// holding cannot be trusted, and the acquisition fails instead.
func (e *Engine) pastDeadline() error {
	d := e.st.Deadline() // ends the session if a suspend put it past d
	if err := e.st.Err(); err != nil {
		return err
	}
	if now := time.Now(); !now.Before(d) {
		return fmt.Errorf("%w: the session's client-side deadline %s had passed %v before the acquisition could return (the process was stopped or starved); the store may have expired the session meanwhile",
			distlock.ErrSessionExpired, d.Format(time.RFC3339Nano), now.Sub(d).Round(time.Millisecond))
	}
	return nil
}

// abandonLost is hooks.abandonLost for held entries ns.
func (e *Engine) abandonLost(ns []*Node) {
	for _, n := range ns {
		context.AfterFunc(n.alive, func() {
			if !errors.Is(context.Cause(n.alive), distlock.ErrReleased) && e.st.Err() == nil {
				e.d.Abandon(n)
			}
		})
	}
}

// endWithFirst calls kill with the end of the first of ns to end, naming
// its lock.
func endWithFirst(ns []*Node, kill context.CancelCauseFunc) {
	for _, n := range ns {
		context.AfterFunc(n.alive, func() { kill(entryLost(n.Name, context.Cause(n.alive))) })
	}
}

// entrySet is one acquisition's entries as the engine walks them: one per
// name, in the names' order, each with its view of its queue. A Mutex's
// acquisition is the set of one; a multi-lock's has one per name, made by
// one write (multi.go).
type entrySet struct {
	label string // the lock, as errors name it
	ns    []*Node
	qs    []*Queue
}

// hooks are what a recipe adds to the one path of an acquisition: how its
// entry comes to hold (direct, wait, claim: steps 1, 3 and 4) and what the
// life of its held entries adds (step 5); the zero value adds nothing (a
// Mutex's). The semaphore's are in semaphore.go, the election's in
// campaign.go.
type hooks struct {
	// direct, if not nil, tries to hold before any entry is enqueued: it
	// returns the held entry, named, or an error wrapping
	// distlock.ErrLocked to enqueue after all (a Try request fails then).
	direct func(ctx context.Context) (*Node, error)
	// wait, if not nil, is steps 3 and 4 in place of the queue's wait and
	// ConfirmAll (a candidate's: it waits on the election's state, not on
	// the entries ahead of it). It gets what EnqueueAll returned, each
	// entry named and followed, and returns once they hold, with how many
	// entries it waited on, having set each n.Token (and n.Waited); its
	// win is its own last look. Its error is the acquisition's, the
	// entries then abandoned (no lock-delay). What it starts to outlive a
	// win is bound to the entries' life (n.Alive), not to ctx, which ends
	// with the acquisition: a later step's failure (pastDeadline) ends
	// that life.
	wait func(ctx context.Context, es []Enqueued) (waitedOn int, err error)
	// claim, if not nil, is what the acquisition's entry does once it
	// leads its queue: it returns the entry that holds instead, named, made
	// in a write that deletes the leading one; or an error wrapping
	// distlock.ErrLocked while it cannot, and waitClaim waits until it
	// may try again.
	claim     func(ctx context.Context, head *Node) (*Node, error)
	waitClaim func(ctx context.Context) error
	// revokeAs is the lock name under which revocations of a held entry
	// are recorded, when it is not the entry's own Name.
	revokeAs string
	// released, if not nil, runs after the entry's release (Unlock),
	// whatever its outcome, and after a held entry was removed because
	// the acquisition failed at the last look.
	released func(n *Node)
	// abandonLost, if set, has a held entry whose life ended otherwise than
	// by its release (its entry deleted by someone else) cleaned up as a
	// failed acquisition's is (Abandon), while the session lives: an
	// election's term record may still name it.
	abandonLost bool
	// handedOff, if not nil and set, says the entry was deleted by an
	// election's handoff: the release (which the handoff calls to end the
	// Lease) has nothing left to delete.
	handedOff *atomic.Bool
	// ender, if not nil, receives the function that measures the hold's
	// end, for a handoff to call before its write starts the successor's.
	ender *func(cause error)
	// loser, if not nil, receives the Lease's lose function, for a
	// handoff to close Done before its write starts the successor's
	// term.
	loser *func(reason error)
}

// abandon is the failure path of an acquisition whose entry was made
// (step 7).
func (e *Engine) abandon(n *Node, cause error) {
	n.kill(cause)
	e.d.Abandon(n)
}

// abandonAll is abandon for every one of ns, with h's released for each.
func (e *Engine) abandonAll(ns []*Node, cause error, h hooks) {
	for _, n := range ns {
		e.abandon(n, cause)
		if h.released != nil {
			h.released(n)
		}
	}
}
