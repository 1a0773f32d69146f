package etcdlock

import "github.com/distlock/distlock/internal/qlock"

// Semaphore is a fair FIFO counting semaphore of N fenced permits on etcd.
// A permit is bound to a numbered slot, 0 to N-1, whose key
// (Dir() + "p" + slot + "_") is bound to the holder's lease; its fencing
// token is that key's create revision, so each slot's successive holders
// have growing tokens (see distlock.Permit).
//
// Acquire claims a free slot in one Txn when one is free and
// nobody waits; otherwise it enqueues in the semaphore's line (keys under
// Dir() + "c", a Mutex's queue) and waits there, watching only the entry
// ahead of it, until it is the head; the head alone watches the slots, and
// claims a freed one in one Txn that also deletes its line entry. So a
// release wakes one waiter, the one that gets the permit, and its claim
// wakes one more, the new head (see docs/design.md). TryAcquire is one Txn
// that claims only if a slot is free and the line is empty. The permit
// count is in every slot key's value; an Acquire that finds another count
// fails with distlock.ErrPermitsMismatch.
//
// zklock.Semaphore has the same methods.
type Semaphore struct{ q *qlock.Semaphore }

// NewSemaphore returns the semaphore called name (see
// distlock.ValidateName), of n permits (1 to distlock.MaxPermits), on the
// session's client. A semaphore and a Mutex or Election of the same name
// are separate.
func NewSemaphore(s *Session, name string, n int) (*Semaphore, error) {
	e, err := s.engine("semaphore", name)
	if err != nil {
		return nil, err
	}
	q, err := qlock.NewSemaphore(e, name, n)
	if err != nil {
		return nil, err
	}
	return &Semaphore{q}, nil
}
