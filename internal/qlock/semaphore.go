package qlock

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/distlock/distlock"
)

// The semaphore: a line and N numbered slots.
//
// A semaphore of N permits keeps two things beside a lock's queue: its
// line, a FIFO queue of Counted entries that is exactly a Mutex's (each
// waiter watches only the entry just ahead of it), and its slots, keys or
// znodes 0 to N-1, each held by at most one permit. The head of the line —
// the one entry with nothing ahead of it — is the only waiter that looks
// at the slots: it claims a free one in a single write that also
// deletes its line entry (Driver.Claim), or, when all are held, waits for
// a slot to go (Driver.WaitSlot) and tries again.
//
// Why not one queue where an entry holds while fewer than N entries are
// ahead of it: holders release in any order, so a waiter would have to
// watch every one of the N entries ahead of it, and each release would
// wake up to N waiters (watching only the entry N places ahead loses
// wake-ups when another holder goes first). Here a release (a slot
// deleted) wakes the head alone, which takes the slot; its claim deletes
// its line entry, which wakes the next in line alone (the Mutex handoff),
// which becomes the head and reads the slots once. No other waiter hears
// of either, whatever the line's length and N: per handoff one delete (the
// release), one claim write, one event to the new holder and one to the
// new head, and the new head's read of the slots (with its watch).
//
// FIFO: only the head claims while anyone waits, and an acquisition that
// finds the line empty claims directly only if the line is still empty
// when it writes (etcd: a compare in the claim's Txn; ZooKeeper, which
// cannot compare children: it looks after its create and gives the slot
// back if a line entry appeared), so no waiter is overtaken.
//
// The slots are what make permits fenceable: each slot's successive
// holders have strictly growing tokens (see distlock.Permit).

// acquirePermit claims a slot of semaphore name for r, waiting in the
// line when none is free or others wait. On failure nothing is left
// behind. direct says to try the direct claim first (see Semaphore);
// waited reports that the acquisition found the semaphore contended: its
// direct claim failed, or it waited in the line. qs says what it saw of
// the line, and counts the head's waits for a slot as waits too.
func (e *Engine) acquirePermit(ctx context.Context, name string, r Request, direct bool) (n *Node, qs queueStats, waited bool, err error) {
	ctx, done, fail, err := e.start(ctx, name, r.Op)
	defer done()
	if err != nil {
		return nil, qs, false, err
	}

	// The direct claim: one write when a slot is free and nobody waits.
	if direct || r.Try {
		slot, err := e.d.Claim(ctx, name, nil, r)
		switch {
		case err == nil:
			qs.enqueued = true // nothing ahead
			n, err := e.permitHeld(ctx, name, slot, fail)
			return n, qs, false, err
		case r.Try || !errors.Is(err, distlock.ErrLocked):
			return nil, qs, false, fail(err)
		}
		waited = true
	}

	// Wait in the line until this entry is its head (the Mutex path, with
	// its failure handling), then claim as the head.
	lr := r
	lr.Kind, lr.Try = Counted, false
	line, qs, err := e.acquire(ctx, name, lr)
	if err != nil {
		return nil, qs, waited, err
	}
	waited = waited || line.Waited
	lctx, lcancel := context.WithCancelCause(ctx)
	defer lcancel(nil)
	defer context.AfterFunc(line.alive, func() { lcancel(context.Cause(line.alive)) })()
	for {
		// Not lctx: the claim's own write deletes the line entry, which
		// ends line.alive while the claim may still read its slot.
		slot, err := e.d.Claim(ctx, name, line, r)
		if err == nil {
			// The claim deleted the line entry: end its life as a
			// release, so that its follower reports nothing.
			line.kill(distlock.ErrReleased)
			n, err := e.permitHeld(ctx, name, slot, fail)
			return n, qs, waited, err
		}
		if !errors.Is(err, distlock.ErrLocked) {
			return nil, qs, waited, e.lineFailed(line, err, fail)
		}
		waited = true
		qs.waitedOn++
		if err := e.d.WaitSlot(lctx, line); err != nil {
			return nil, qs, waited, e.lineFailed(line, err, fail)
		}
	}
}

// lineFailed abandons the line entry of a failed acquisition and returns
// its error: the entry's own end (deleted, session over) before ctx's.
func (e *Engine) lineFailed(line *Node, err error, fail func(error) error) error {
	if line.alive.Err() != nil && !errors.Is(context.Cause(line.alive), distlock.ErrReleased) {
		err = context.Cause(line.alive)
	}
	e.abandon(line, err)
	return fail(err)
}

// permitHeld starts following a claimed slot's entry and makes the last
// check before it is reported held.
func (e *Engine) permitHeld(ctx context.Context, name string, slot *Node, fail func(error) error) (*Node, error) {
	slot.Name = distlock.SlotName(name, slot.Slot)
	st := e.st
	e.follow(slot)
	if err := e.d.Confirm(ctx, slot); err != nil {
		e.abandon(slot, err)
		st.FreeSlot(slot.Key)
		return nil, fail(err)
	}
	st.log.Debug(st.backend.Pkg+": permit acquired", "lock", name, "key", slot.Key, "slot", slot.Slot, "token", slot.Token)
	return slot, nil
}

// Semaphore is a fair FIFO counting semaphore of N fenced permits: at most
// N acquisitions hold one at a time, waiters are granted in the order they
// came, and each permit is bound to a numbered slot whose tokens grow from
// one holder to the next (see distlock.Permit). A Semaphore is a handle,
// safe for concurrent use; every Acquire takes its own permit.
type Semaphore struct {
	lock
	n int
	// contended says this handle's last acquisition found the semaphore
	// contended (its direct claim failed, or it waited in the line): the
	// next one goes straight to the line. Under contention a direct
	// claim almost always fails, and a failed claim is a write (a raft
	// proposal on etcd; a listing and more on ZooKeeper) wasted; one
	// acquisition that finds the line empty and a slot free sets it back.
	contended atomic.Bool
}

// NewSemaphore returns the semaphore called name, of n permits, on e's
// session. Every user of one semaphore
// must give the same n: one that finds entries made with another count
// gets an error wrapping distlock.ErrPermitsMismatch.
func NewSemaphore(e *Engine, name string, n int) (*Semaphore, error) {
	if err := e.st.backend.validatePermits(name, n); err != nil {
		return nil, err
	}
	return newRecipe("semaphore", e, name, func(l lock) *Semaphore { return &Semaphore{lock: l, n: n} })
}

// Permits returns the semaphore's permit count, N.
func (s *Semaphore) Permits() int { return s.n }

// Acquire waits until it holds a permit: at once when one is free and
// nobody waits, else after every earlier waiter. It fails, leaving nothing
// behind, as Mutex.Lock does, and with distlock.ErrPermitsMismatch when
// the semaphore is in use with another permit count.
func (s *Semaphore) Acquire(ctx context.Context) (*distlock.Permit, error) {
	return s.acquirePermit(ctx, false)
}

// TryAcquire takes a permit only if one is free and nobody waits;
// otherwise it returns an error wrapping distlock.ErrLocked, leaving
// nothing behind.
func (s *Semaphore) TryAcquire(ctx context.Context) (*distlock.Permit, error) {
	return s.acquirePermit(ctx, true)
}

func (s *Semaphore) acquirePermit(ctx context.Context, try bool) (*distlock.Permit, error) {
	r := Request{Op: distlock.OpAcquire, Kind: Counted, Limit: s.n, Try: try, Value: []byte(s.e.st.holder)}
	if try {
		r.Op = distlock.OpTryAcquire
	}
	n, lease, err := s.takeWith(ctx, r, s.permitHooks(), func(ctx context.Context) (*Node, queueStats, error) {
		n, qs, waited, err := s.e.acquirePermit(ctx, s.name, r, !s.contended.Load())
		if err == nil || waited {
			s.contended.Store(waited)
		}
		return n, qs, err
	})
	if err != nil {
		return nil, err
	}
	return distlock.NewPermit(lease, n.Slot), nil
}

// permitHooks are what a permit adds to the life of its held slot entry:
// it is revoked as the semaphore's holder (the entry's Name is its
// slot's, see permitHeld), and once released its slot is the session's to
// claim again (see State.ReserveSlot).
func (s *Semaphore) permitHooks() hooks {
	st := s.e.st
	return hooks{revokeAs: s.name, released: func(n *Node) { st.FreeSlot(n.Key) }}
}

// validatePermits checks semaphore name's permit count n, 1 to
// distlock.MaxPermits; the error wraps distlock.ErrInvalidPermits.
func (b Backend) validatePermits(name string, n int) error {
	if n < 1 || n > distlock.MaxPermits {
		return &distlock.LockError{Backend: b.Name, Name: name, Op: distlock.OpValidate, Err: fmt.Errorf("%w: %d (want 1 to %d)", distlock.ErrInvalidPermits, n, distlock.MaxPermits)}
	}
	return nil
}
