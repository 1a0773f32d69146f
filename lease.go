package distlock

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"
)

// Locker is a lock that can be acquired. The backends' Mutex types (and the
// writer and reader sides of their RWMutex types) implement it.
//
// A Locker is not reentrant: every Lock is an acquisition of its own, so
// a second Lock by a caller that holds the lock waits for the first
// Lease's Unlock like anyone else's, and a goroutine that locks twice
// without unlocking waits for itself until ctx or the session ends.
type Locker interface {
	// Lock waits until the lock is held, ctx is done, or the session ends.
	// On any failure it leaves no entry behind.
	Lock(ctx context.Context) (*Lease, error)
	// TryLock acquires the lock only if it is free now, deciding in one
	// round trip; it returns an error wrapping ErrLocked and writes nothing
	// when the lock is held.
	TryLock(ctx context.Context) (*Lease, error)
}

// Lease is one held acquisition of a lock: its fencing token, and a signal
// that closes when the lock is lost or released.
//
// A Lease's context is not the context passed to Lock: a lock outlives the
// call that acquired it. Context() is cancelled, with a cause, when the
// backend learns the lock may no longer be exclusively ours (entry deleted,
// session expired, session not confirmed alive before its conservative
// deadline) and when Unlock is called. Err tells which.
//
// A Lease is safe for concurrent use.
type Lease struct {
	backend  string // LockError.Backend of its errors
	token    Token
	tokens   []Token // a multi-lock's, one per name; nil for one name
	name     string  // LockError.Name of its errors
	ctx      context.Context
	cancel   context.CancelCauseFunc
	release  func(context.Context) error
	deadline func() time.Time
	// lockDelay is how long the acquisition was held back by lock-delay
	// (LeaseLockDelay).
	lockDelay time.Duration

	mu       sync.Mutex
	released bool
	// lost is the loss, once there is one: it is also Done's cause unless a
	// revocation closed Done first (a revoked holder can still lose the
	// lock, and Err must then say so).
	lost error
}

// NewLease returns a held Lease for token t, whose Unlock calls release
// (once) and whose Deadline is deadline's (nil: none), and lose, which ends
// it: lose(reason) closes Done with a LockError whose Err is reason;
// calls after the first, or after Unlock, do nothing. A reason is a loss
// (the store packages make it match ErrLost), which Err reports from then
// on, unless it matches ErrRevoked (a *RevokedError): a revocation closes
// Done, and a loss may follow it; or unless it matches ErrReleased: the
// holder's own end of the hold before its release is sent (an election's
// handoff), which closes Done as Unlock does but leaves the release to a
// later Unlock. A reason that is itself a *LockError is Done's cause as
// it is (naming the operation that ended the hold); any other is wrapped
// in one of OpHold. backend names the store in the
// Lease's errors (LockError.Backend: "etcd", "zookeeper"; "" for none).
//
// The store packages make the Leases of their locks with it. A program's
// tests can make one too, to drive code that takes a *Lease (Do, Once, a
// fenced writer) through a loss without a cluster. opts set what the
// acquisition reports beside (LeaseLockDelay).
func NewLease(backend string, t Token, release func(ctx context.Context) error, deadline func() time.Time, opts ...LeaseOption) (l *Lease, lose func(reason error)) {
	return newLease(&Lease{backend: backend, token: t, name: t.Name, release: release, deadline: deadline}, opts)
}

// LeaseOption sets what a Lease made by NewLease or NewMultiLease reports
// about its acquisition.
type LeaseOption func(*Lease)

// LeaseLockDelay makes the Lease report d from LockDelay: the time its
// acquisition was held back by lock-delay.
func LeaseLockDelay(d time.Duration) LeaseOption { return func(l *Lease) { l.lockDelay = d } }

// LockDelay returns how long this acquisition was held back by lock-delay
// (the stores' WithLockDelay session option) before it held: the entry
// whose going made it the head went without its holder's release (the
// holder's session ended on the store, or the entry was deleted by
// someone else), and the waiter waited the delay more, counted from when
// it saw the entry go. 0 if it was not held back.
func (l *Lease) LockDelay() time.Duration { return l.lockDelay }

// NewMultiLease is NewLease for one acquisition of several locks (a
// multi-lock): ts holds one token per lock, sorted by name, all with the
// acquisition's sequence number. Token returns the first; Tokens returns
// them all. Its errors name the locks joined by "+" (LockError.Name),
// which no lock name contains.
func NewMultiLease(backend string, ts []Token, release func(ctx context.Context) error, deadline func() time.Time, opts ...LeaseOption) (l *Lease, lose func(reason error)) {
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = t.Name
	}
	l = &Lease{backend: backend, tokens: slices.Clone(ts), name: strings.Join(names, "+"), release: release, deadline: deadline}
	if len(ts) > 0 {
		l.token = ts[0]
	}
	return newLease(l, opts)
}

// newLease applies opts to l and starts its life.
func newLease(l *Lease, opts []LeaseOption) (*Lease, func(reason error)) {
	for _, o := range opts {
		o(l)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	l.ctx, l.cancel = ctx, cancel
	return l, func(reason error) {
		err, ok := reason.(*LockError)
		if !ok {
			err = l.fail(OpHold, reason)
		}
		if !errors.Is(reason, ErrRevoked) && !errors.Is(reason, ErrReleased) {
			l.mu.Lock()
			if l.lost == nil && !l.released {
				l.lost = err
			}
			l.mu.Unlock()
		}
		cancel(err)
	}
}

// fail is the Lease's error of op with cause err.
func (l *Lease) fail(op Op, err error) *LockError {
	return &LockError{Backend: l.backend, Name: l.name, Op: op, Err: err}
}

// Token returns the fencing token of this acquisition. Pass it with every
// write to the protected resource, which must refuse tokens older than the
// newest it has seen. A multi-lock's Lease holds one token per lock:
// Token returns the first (by name), Tokens all of them.
func (l *Lease) Token() Token { return l.token }

// Tokens returns the acquisition's tokens, one per lock it holds, sorted
// by lock name: a multi-lock's (all with the same sequence number, the
// one position of its entries in every queue), or a one-lock Lease's
// only token. A write that needs every lock passes every token to the
// fences of the resources it touches (fencing.DoAll and the stores'
// forms).
func (l *Lease) Tokens() []Token {
	if l.tokens == nil {
		return []Token{l.token}
	}
	return slices.Clone(l.tokens)
}

// Done returns a channel closed when the lock is lost or released, or
// when an operator revoked it (Err then matches ErrRevoked; the lock is
// still held until Unlock, see RevokedError).
func (l *Lease) Done() <-chan struct{} { return l.ctx.Done() }

// Deadline returns the time until which the lock is surely still this
// acquisition's: its session's conservative client-side deadline, which
// every confirmed keepalive moves on (see the backends' Session docs for
// how it is computed). If no keepalive is confirmed before it, the session
// ends there and Done closes (within a timer's scheduling delay). Use it
// not to start a step that cannot finish before the deadline: a holder
// that still works past it may be working alongside a successor, and only
// a fence stops that. Once Done is closed, Deadline is the zero Time:
// Unlock (and an election's Resign or HandOff) closes Done before the
// write that lets another holder start is sent, so Deadline never lies
// past that moment. What others do is not foreseen: an entry deleted by
// an operator or a forced revocation frees the lock before Deadline,
// which Done reports once the store's watch tells (a fence stops what
// the holder writes meanwhile).
func (l *Lease) Deadline() time.Time {
	if l.ctx.Err() != nil || l.deadline == nil {
		return time.Time{}
	}
	d := l.deadline()
	if l.ctx.Err() != nil {
		return time.Time{}
	}
	return d
}

// Err returns nil while the lock is held and not revoked. After Done is
// closed it returns why: an error wrapping ErrLost (and the reason, e.g.
// ErrSessionExpired), one wrapping ErrReleased, or one wrapping
// ErrRevoked (a *RevokedError) — until the revoked lock is lost too (its
// entry deleted when the revocation is forced), when it returns the loss.
func (l *Lease) Err() error {
	if l.ctx.Err() == nil {
		return nil
	}
	l.mu.Lock()
	lost := l.lost
	l.mu.Unlock()
	if lost != nil {
		return lost
	}
	return context.Cause(l.ctx)
}

// Context returns a context cancelled when the lock is lost, released or
// revoked; context.Cause gives the first of these (Err may go on from a
// revocation to a loss). Derive the protected work's
// context from it (see Do) so that the work stops when the lock is lost.
func (l *Lease) Context() context.Context { return l.ctx }

// Unlock releases the lock: it deletes this acquisition's entry only if it
// is still this acquisition's (never a successor's). A second Unlock
// returns an error wrapping ErrReleased and touches nothing.
//
// If the lock had been lost before Unlock, Unlock still removes whatever is
// left of the entry and then returns the loss (errors.Is(err, ErrLost)):
// the caller must know that its critical section may not have been
// exclusive.
func (l *Lease) Unlock(ctx context.Context) error {
	l.mu.Lock()
	if l.released {
		l.mu.Unlock()
		return l.fail(OpUnlock, ErrReleased)
	}
	l.released = true
	lost := l.lost
	l.mu.Unlock()

	l.cancel(l.fail(OpUnlock, ErrReleased))
	err := l.release(ctx)
	switch {
	case err != nil && lost != nil && errors.Is(err, ErrLost):
		err = nil // the same loss, reported once
	case err != nil:
		err = l.fail(OpUnlock, err)
		if errors.Is(err, ErrLost) {
			// Found lost by the release itself (a revoked lease's Done
			// closed already): Err says so from now on.
			l.mu.Lock()
			if l.lost == nil {
				l.lost = err
			}
			l.mu.Unlock()
		}
	}
	switch {
	case lost == nil:
		return err // the *LockError itself, or nil
	case err == nil:
		return lost
	}
	return errors.Join(lost, err)
}
