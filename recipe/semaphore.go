package recipe

import (
	"context"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/qlock"
)

// Semaphore is a fair FIFO counting semaphore of N fenced permits. A
// permit is bound to a numbered slot, 0 to N-1, whose entry is bound to
// the holder's session; its fencing token is that entry's position, so
// each slot's successive holders have growing tokens (see
// distlock.Permit).
//
// Acquire claims a free slot at once when one is free and nobody waits;
// otherwise it enqueues in the semaphore's line and waits there, watching
// only the entry ahead of it, until it is the head; the head alone watches
// the slots, and claims a freed one in the write that also deletes its
// line entry. So a release wakes one waiter, the one that gets the permit,
// and its claim wakes one more, the new head. The permit count is kept
// with every slot; an Acquire that finds another count fails with
// distlock.ErrPermitsMismatch.
type Semaphore struct{ q *qlock.Semaphore }

// NewSemaphore returns the semaphore called name (see
// distlock.ValidateName), of n permits (1 to distlock.MaxPermits), on the
// session s. A semaphore and a Mutex or Election of the same name are
// separate.
func NewSemaphore(s Backend, name string, n int) (*Semaphore, error) {
	ss, err := session(s, "semaphore", name)
	if err != nil {
		return nil, err
	}
	q, err := qlock.NewSemaphore(ss.e, name, n)
	if err != nil {
		return nil, err
	}
	return &Semaphore{q}, nil
}

// Acquire waits until it holds a permit: at once when a slot is free and
// nobody waits, else after every earlier waiter, in FIFO order. It fails,
// leaving nothing behind, as Mutex.Lock does, and with an error wrapping
// distlock.ErrPermitsMismatch when the semaphore is in use with another
// permit count. Every call takes its own permit, even on one Session.
func (s *Semaphore) Acquire(ctx context.Context) (*distlock.Permit, error) { return s.q.Acquire(ctx) }

// TryAcquire takes a permit only if a slot is free and nobody waits;
// otherwise it returns an error wrapping distlock.ErrLocked, leaving
// nothing behind. The permit's token is as Acquire's.
func (s *Semaphore) TryAcquire(ctx context.Context) (*distlock.Permit, error) {
	return s.q.TryAcquire(ctx)
}

// Permits returns the semaphore's permit count, N, as given to
// NewSemaphore.
func (s *Semaphore) Permits() int { return s.q.Permits() }

// Name returns the semaphore's name, as given to NewSemaphore.
func (s *Semaphore) Name() string { return s.q.Name() }

// Dir returns where the semaphore's entries are kept, as Mutex.Dir.
func (s *Semaphore) Dir() string { return s.q.Dir() }
