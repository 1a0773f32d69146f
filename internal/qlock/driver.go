package qlock

import (
	"context"
	"sync"
	"time"

	"github.com/distlock/distlock"
)

// Request says what an acquisition adds to a lock's queue.
type Request struct {
	// Op names the operation in errors: distlock.OpLock, OpTryLock,
	// OpCampaign, OpAcquire, OpTryAcquire.
	Op distlock.Op
	// Kind is the entry's kind.
	Kind Kind
	// Limit is a semaphore's permit count (Claim only).
	Limit int
	// Try asks for the lock only if it is free now: a waiting entry is
	// not left in the queue, and the store driver refuses before writing
	// where its store can compare and create at once.
	Try bool
	// Value is the entry's data: the session's holder, or a candidate's
	// value.
	Value []byte
	// Priority is a candidate's priority (distlock.WithPriority), kept in
	// its entry's key.
	Priority int
	// Compat is the lock's compatibility mode: the driver names the
	// entry as that foreign recipe does (see distlock.Compat). The
	// engine has checked that the store offers it for the entry's
	// recipe (Backend.CheckCompat).
	Compat distlock.Compat
	// RW says the entry is an RWMutex's (a writer's or a reader's), not
	// a Mutex's: a foreign client may name the two apart (Curator's
	// InterProcessReadWriteLock and InterProcessMutex).
	RW bool
}

// Node is one entry a store driver made for an acquisition, as the engine
// follows it from enqueue to release.
type Node struct {
	// Name is the lock's name.
	Name string
	// Entry is the entry's key, queue position and kind.
	Entry
	// Token is the fencing sequence number the entry holds with (etcd
	// create revision, ZooKeeper czxid).
	Token int64
	// Slot is a semaphore permit's slot (0 to N-1); 0 for other entries.
	Slot int
	// Waited says the entry did not hold at once: a conflicting entry
	// was (or may have been) ahead when it enqueued, or, for a permit's
	// slot, it was claimed from the line. Its holding rests on deletes it
	// waited for, not on the enqueue's own answer.
	Waited bool
	// lockDelay is how long the acquisition was held back by lock-delay
	// (see the engine's wait); 0 if it was not.
	lockDelay time.Duration
	// delayUntil is when the lock-delay the waiter serves, or served,
	// ends; zero if it serves none.
	delayUntil time.Time
	// Store is the driver's own state of the entry (a znode version, a
	// pending watch); the engine does not look at it. A semaphore's
	// state is not kept here (see semaphore.go).
	Store any

	// alive is cancelled when the entry is deleted by anyone but its
	// owner, when the session ends, or when the owner releases it; the
	// cause says which.
	alive context.Context
	kill  context.CancelCauseFunc

	// A loss held back (holdLoss) while the owner deletes the entry in a
	// write that may fail (an election's handoff): reported if it does.
	lossMu      sync.Mutex
	lossHeld    bool
	lossPending error
}

// lose ends n's life with cause: the driver's report that the entry was
// deleted by someone else. While the loss is held back it is kept.
func (n *Node) lose(cause error) {
	n.lossMu.Lock()
	if n.lossHeld {
		if n.lossPending == nil {
			n.lossPending = cause
		}
		n.lossMu.Unlock()
		return
	}
	n.lossMu.Unlock()
	n.kill(cause)
}

// holdLoss holds back reports of the entry's deletion until resumeLoss
// (the owner's write did not delete it: report what came meanwhile) or
// dropLoss (it did: end n's life with cause instead).
func (n *Node) holdLoss() {
	n.lossMu.Lock()
	n.lossHeld = true
	n.lossMu.Unlock()
}

func (n *Node) resumeLoss() {
	n.lossMu.Lock()
	p := n.lossPending
	n.lossHeld, n.lossPending = false, nil
	n.lossMu.Unlock()
	if p != nil {
		n.kill(p)
	}
}

func (n *Node) dropLoss(cause error) {
	n.lossMu.Lock()
	n.lossHeld, n.lossPending = false, nil
	n.lossMu.Unlock()
	n.kill(cause)
}

// Alive returns a context that ends when the entry is deleted by anyone
// but its owner, when the session ends, or when the owner releases it
// (cause distlock.ErrReleased).
func (n *Node) Alive() context.Context { return n.alive }

// Begin starts n's life under parent (the session's context): Alive ends
// when parent does or n's entry is lost or released. The engine calls it
// once the entry is made; driver tests call it on nodes of their own.
func (n *Node) Begin(parent context.Context) {
	n.alive, n.kill = context.WithCancelCause(parent)
}

// Driver is the queue mechanics of one session's store: what the engine's
// life cycle (lifecycle.go) asks of a store, and nothing of the life cycle
// itself. The session's state (its end, deadline, logger, holder, owner)
// is the engine's: New gets it beside the driver. The recipes that need
// more of the store use the capability interfaces below (Slots,
// Elections, RevokeFollower) and Multi (multi.go); a driver implements
// them all (Store). Every
// method that blocks returns when its ctx ends.
type Driver interface {
	// Dir returns where lock name keeps its entries (a key prefix, a
	// directory znode).
	Dir(name string) string
	// Enqueue creates r's entry in lock name's queue, and returns it with
	// the entries of that queue (its own kind's queue: lock entries,
	// candidates, or a semaphore's line) that were there when it was
	// created, itself among them or not: all of them, or (more set) at
	// least the ViewKeep newest that conflict with it, older ones being
	// left out. A driver whose store can compare and create at once
	// refuses a Try request that would wait with an error wrapping
	// distlock.ErrLocked and writes nothing. On failure nothing is left
	// behind: the driver removes what it may have written, now or in the
	// background.
	Enqueue(ctx context.Context, name string, r Request) (n *Node, ahead []Entry, more bool, err error)
	// Follow arranges for gone to be called with the cause when n's entry
	// is deleted by anyone but its owner, until n.Alive() ends, and
	// returns at once: following must cost a waiter no goroutine of its
	// own where the store allows it.
	Follow(n *Node, gone func(cause error))
	// WaitGone returns once entry p, ahead of n, is gone. The driver
	// may learn on the way which entries older than p are gone too, and
	// record it in q (Gone, Observed): a store whose holders mark their
	// release (ZooKeeper) tells that nothing older is left.
	//
	// released says how p went, for lock-delay (State.LockDelay): true
	// when p's owner released it (or gave up waiting, where the store does
	// not tell the two apart: see ReleaseMarked), false when p's session
	// ended on the store, it was deleted by someone else, or how it went
	// is not known. A driver that needs a request to tell makes it only
	// when the session has a lock-delay, and reports true without one.
	WaitGone(ctx context.Context, n *Node, q *Queue, p Entry) (released bool, err error)
	// ReleaseMarked reports whether WaitGone tells an owner's release from
	// an entry that gave up waiting (ZooKeeper: a release marks itself;
	// etcd: both are deletes by a live lease). Where it does not, a waiter
	// that gives up while it serves a lock-delay keeps its entry until the
	// delay's end (see the engine's wait), so that the waiter behind it,
	// which takes the entry's going for a release, is held back as long.
	ReleaseMarked() bool
	// SurvivorsAll refreshes, for each i of which, the view qs[i] of
	// ns[i]'s queue: its entries older than belows[i], from the store (see
	// Queue.Observed), all in one request where the store allows it. The
	// engine asks after an entry at belows[i] went while older ones were
	// still in the view, when the view must read (Queue.MustRead), or
	// (belows[i] ns[i]'s own Seq) for the other views of a multi-lock
	// after one of its waits. An error leaves a view as it was, which
	// only means more waiting.
	SurvivorsAll(ctx context.Context, ns []*Node, qs []*Queue, which []int, belows []int64)
	// ConfirmAll is the last look before ns (one acquisition's entries)
	// are reported held: whatever the store's watches may not have
	// delivered yet, for all of them in one request where the store
	// allows it. It returns one error per entry, or nil for none.
	ConfirmAll(ctx context.Context, ns []*Node) []error
	// ReleaseAll deletes the entries of ns (one acquisition's) that are
	// still this acquisition's, all in one write where the store allows
	// it; known[i] says the loss of ns[i] was already reported. It returns
	// one error per entry, or nil for none: an entry found gone that was
	// not known lost has an error wrapping distlock.ErrLost.
	ReleaseAll(ctx context.Context, ns []*Node, known []bool) []error
	// Abandon removes n's entry after a failed acquisition, retrying in
	// the background if the store cannot be reached.
	Abandon(n *Node)
}

// Store is everything the engine asks of a driver.
type Store interface {
	Driver
	Slots
	Elections
	RevokeFollower
	Multi
}

// Slots is a store's part of the semaphore: permits are slot entries,
// claimed from a line of waiters (semaphore.go).
type Slots interface {
	// Claimer returns the claims of one permit acquisition of the
	// semaphore whose slots book keeps (book.Name()), of r.Limit permits:
	// the driver keeps what the line's head learns between its claims in
	// the Claimer, and this session's reservations in book.
	Claimer(book *SlotBook, r Request) Claimer
}

// Claimer is one permit acquisition's claims of its semaphore's slots,
// made by one goroutine at a time.
type Claimer interface {
	// Claim takes a free slot (one at random). With line nil it claims
	// only if no entry waits in the semaphore's line (so that no waiter
	// is overtaken); with line, the line's head, only while line's entry
	// is still this acquisition's, deleting that entry in the same write.
	// It returns the slot's entry, with Slot set, to be followed like any
	// entry, and the slot's key reserved in the book. When no slot is
	// free, or (line nil) the line is not empty, it writes nothing and
	// returns an error wrapping distlock.ErrLocked that says so; an error
	// wrapping distlock.ErrPermitsMismatch when the semaphore's other
	// entries were made with another permit count. On failure nothing is
	// left behind, and nothing stays reserved once its cleanup is over.
	Claim(ctx context.Context, line *Node) (*Node, error)
	// WaitSlot returns once a slot may have been freed since the last
	// Claim with a line (at once if there was none), or when ctx ends.
	// Only the head of a line waits here: that is what keeps a release
	// from waking more than one waiter.
	WaitSlot(ctx context.Context) error
}

// Elections is a store's part of an election beyond its candidate queue:
// the term record, written by claims and handoffs, and the election's
// state, read and followed (election.go). A candidate's entry is made by
// Enqueue (Kind Candidate, with the Request's Priority in its key).
type Elections interface {
	// ReadElection reads election name's state, at least as new as every
	// write acknowledged before the call, with every candidate's value.
	ReadElection(ctx context.Context, name string) (ElectionState, error)
	// WatchElection sends election name's state to ch, then the state
	// after every change of the term record, of the candidates, or of the
	// leader's value, until ctx ends or the connection is closed; it
	// closes ch. The states it sends never go back; it may skip states
	// that followed each other quickly (not on etcd, where it sends the
	// state after every revision that changed it). Before a full state it
	// may send one of the term record alone (ElectionState.Partial), as
	// soon as it sees the record name another candidate. Every candidate's
	// value is set: a leader picks its successor by value from the
	// latest state (a waiting candidate's value never changes).
	WatchElection(ctx context.Context, name string, ch chan<- ElectionState)
	// ClaimTerm writes the term record of n's election naming n's entry, if
	// the record is still as in prev (prev.Version) and n's entry still
	// exists, and returns the new term's token. If either is not so it
	// writes nothing and returns an error wrapping ErrTermMoved.
	ClaimTerm(ctx context.Context, n *Node, prev ElectionState) (term int64, err error)
	// HandOff, in one write, deletes n's entry and writes the term
	// record naming to's entry, if the record is still cur's (naming n)
	// and to's entry still exists; it returns to's term. If not, it
	// writes nothing and returns an error wrapping ErrTermMoved.
	HandOff(ctx context.Context, n *Node, cur ElectionState, to Contender) (term int64, err error)
	// Proclaim sets a leading candidate's value, only while its entry is
	// still this acquisition's.
	Proclaim(ctx context.Context, n *Node, value string) error
	// Revoker is the store's revocation records, for preemptions.
	ClientStore() ClientStore
}

// RevokeFollower is how a held entry learns that an operator asked for it
// (revoke.go has the records' side).
type RevokeFollower interface {
	// FollowRevoke arranges for revoked to be called, once, with the
	// record's data when a revocation of n's entry (a held entry of lock
	// name, by its token) is recorded, until n.Alive() ends; it returns at
	// once. The engine calls it for held entries of revocable sessions
	// only.
	FollowRevoke(n *Node, name string, revoked func(data []byte))
}
