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
// deletes its line entry (Claimer.Claim), or, when all are held, waits
// for a slot to go (Claimer.WaitSlot) and tries again.
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

// A permit's acquisition is the one acquisition path (lifecycle.go) with
// the semaphore's hooks (permitHooks): a direct claim before the line,
// then the line entry's wait (a Mutex's), then the head's claim, waiting
// for a slot while none is free.

// Who owns a semaphore's state, and why there:
//
//   - SlotBook (the engine's, one per semaphore name per session, while in
//     use): which slot keys this session's acquisitions claim or hold,
//     and the signal that one of them was freed. It is store-neutral and
//     spans acquisitions (a held permit's reservation outlives the
//     acquisition that made it), and two acquisitions of one session
//     must see each other's reservations: a slot key is the same for
//     every holder, and a claim whose answer was lost recognizes its slot
//     by the session that owns it.
//   - The driver's Claimer (one per acquisition, from Slots.Claimer): what
//     the line's head learned between its claims, which only the store
//     can say — etcd's revision of its last read of the slots and the
//     slot to try next; ZooKeeper's child watch on the slots and whether
//     the line node's follower stood down during a claim. It lives as
//     long as the acquisition, and nothing else reads it (ZooKeeper's
//     follower reaches it through the line node while a claim is in
//     flight).
//   - Semaphore.contended (the handle's): a hint for the handle's next
//     acquisition. It must outlive the acquisitions (which a SlotBook,
//     dropped when idle, does not), and it is about the handle's own
//     attempts, not the session's slots.
//   - Node.Slot: the slot a held permit's entry is (its fencing token is
//     the entry's), as every entry's facts are on its Node.
//
// Not semaphore state, though it touches slots: ZooKeeper's session keeps
// every live node of the session, a slot's with its czxid, for the deletes
// at the session's end (a slot, whose path every holder shares, is
// deleted only if it is still the node this session made); the etcd
// follower's record of an entry's revision does the same for a slot key;
// and Node.Store is each driver's state of any entry (a
// znode version, etcd's revision at which a waiter's view was true).

// SlotBook is a session's book of one semaphore's slots: the slot keys
// its acquisitions claim or hold (reserved), and a signal that one of
// them was freed. The engine opens it for each acquisition and hands it
// to the driver's Claimer; the book is dropped when no acquisition uses
// it and nothing is reserved (its fields are guarded by State.slotMu).
type SlotBook struct {
	st       *State
	name     string
	users    int             // acquisitions using the book
	reserved map[string]bool // slot keys claimed or held
	// freed is closed, and dropped, by the next Free (see Freed).
	freed chan struct{}
}

// Name returns the semaphore's name.
func (b *SlotBook) Name() string { return b.name }

// Reserve marks slot key as being claimed by one acquisition of this
// session, and reports false if another one of the session has it
// already: the driver's bookkeeping is per key (etcd's follower,
// ZooKeeper's node list), so two acquisitions of one session must not
// claim the same key at once. The reservation lasts until Free: after
// the permit's release, or the failed claim's cleanup.
func (b *SlotBook) Reserve(key string) bool {
	b.st.slotMu.Lock()
	defer b.st.slotMu.Unlock()
	if b.reserved[key] {
		return false
	}
	b.reserved[key] = true
	return true
}

// Free ends Reserve's reservation of key.
func (b *SlotBook) Free(key string) {
	b.st.slotMu.Lock()
	defer b.st.slotMu.Unlock()
	delete(b.reserved, key)
	if b.freed != nil {
		close(b.freed)
		b.freed = nil
	}
	b.dropIdle()
}

// Freed returns a channel that the next Free closes. A line head that
// finds a slot held only by this session's reservation must wait for it
// as well as for the store: the release that frees the slot may have
// deleted it before the head's listing set its watch, and the
// reservation ends only after the delete. Take it before the listing.
func (b *SlotBook) Freed() <-chan struct{} {
	b.st.slotMu.Lock()
	defer b.st.slotMu.Unlock()
	if b.freed == nil {
		b.freed = make(chan struct{})
	}
	return b.freed
}

// Reserved reports whether this session has reserved slot key.
func (b *SlotBook) Reserved(key string) bool {
	b.st.slotMu.Lock()
	defer b.st.slotMu.Unlock()
	return b.reserved[key]
}

// close ends one acquisition's use of the book (State.openSlots).
func (b *SlotBook) close() {
	b.st.slotMu.Lock()
	defer b.st.slotMu.Unlock()
	b.users--
	b.dropIdle()
}

// dropIdle forgets the book once nothing uses it: a later acquisition
// opens a new one. slotMu is held.
func (b *SlotBook) dropIdle() {
	if b.users == 0 && len(b.reserved) == 0 && b.st.books[b.name] == b {
		delete(b.st.books, b.name)
	}
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
	return newRecipe("semaphore", e, name, "", func(l lock) *Semaphore { return &Semaphore{lock: l, n: n} })
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
	book := s.e.st.openSlots(s.name)
	defer book.close()
	// waited says the acquisition found the semaphore contended: its
	// direct claim failed, it waited in the line, or for a slot.
	var waited atomic.Bool
	h := s.permitHooks(r, book, !s.contended.Load(), &waited)
	n, lease, err := s.takeWith(ctx, r, h, func(ctx context.Context) (*Node, queueStats, error) {
		ns, qs, err := s.e.acquire(ctx, s.name, []string{s.name}, r, h)
		if err == nil || waited.Load() {
			s.contended.Store(waited.Load())
		}
		if err != nil {
			return nil, qs, err
		}
		return ns[0], qs, nil
	})
	if err != nil {
		return nil, err
	}
	return distlock.NewPermit(lease, n.Slot), nil
}

// permitHooks are what a permit adds to the acquisition path and to the
// life of its held slot entry, for request r, with the session's book of
// the semaphore's slots: a direct claim first (with direct, or for a Try
// request: see contended); the line head's claim and its wait for a
// slot, all by one Claimer; waited set when any of them found the
// semaphore contended. The held entry is revoked as the semaphore's
// holder (its Name is its slot's), and once released or dropped its slot
// is the session's to claim again (see SlotBook.Reserve).
func (s *Semaphore) permitHooks(r Request, book *SlotBook, direct bool, waited *atomic.Bool) hooks {
	st := s.e.st
	c := s.e.d.Claimer(book, r)
	claim := func(ctx context.Context, line *Node) (*Node, error) {
		slot, err := c.Claim(ctx, line)
		if err != nil {
			if errors.Is(err, distlock.ErrLocked) {
				waited.Store(true)
			}
			return nil, err
		}
		slot.Name = distlock.SlotName(s.name, slot.Slot)
		st.log.Debug(st.backend.Pkg+": permit claimed", "lock", s.name, "key", slot.Key, "slot", slot.Slot, "token", slot.Token)
		return slot, nil
	}
	h := hooks{revokeAs: s.name, released: func(n *Node) { book.Free(n.Key) }}
	if direct || r.Try {
		// The direct claim: one write when a slot is free and nobody waits.
		h.direct = func(ctx context.Context) (*Node, error) { return claim(ctx, nil) }
	}
	h.claim = func(ctx context.Context, line *Node) (*Node, error) {
		if line.Waited {
			waited.Store(true)
		}
		return claim(ctx, line)
	}
	h.waitClaim = c.WaitSlot
	return h
}

// validatePermits checks semaphore name's permit count n, 1 to
// distlock.MaxPermits; the error wraps distlock.ErrInvalidPermits.
func (b Backend) validatePermits(name string, n int) error {
	if n < 1 || n > distlock.MaxPermits {
		return &distlock.LockError{Backend: b.Name, Name: name, Op: distlock.OpValidate, Err: fmt.Errorf("%w: %d (want 1 to %d)", distlock.ErrInvalidPermits, n, distlock.MaxPermits)}
	}
	return nil
}
