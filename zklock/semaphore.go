package zklock

import "github.com/distlock/distlock/internal/qlock"

// Semaphore is a fair FIFO counting semaphore of N fenced permits on
// ZooKeeper. A permit is bound to a numbered slot, 0 to N-1: the ephemeral
// znode Dir() + "/@permits/<slot>-of-<N>"; its fencing token is that
// znode's czxid, so each slot's successive holders have growing tokens
// (see distlock.Permit).
//
// Acquire lists the line and the slots and creates a free slot
// when one is free and nobody waits (ZooKeeper cannot compare children
// within a write, so it then looks at the line again and gives the slot
// back if an entry is queued); otherwise it creates a line entry
// ("@c-..." in Dir(), a Mutex's queue) and waits there, watching only the
// node ahead of it, until it is the head; the head alone watches the
// slots (a child watch on @permits), and claims a freed one with one multi
// that creates the slot and deletes its line entry. So a release wakes
// one waiter, the one that gets the permit, and its claim wakes one more,
// the new head (see docs/design.md). The permit count is in every slot's
// name; an Acquire that finds another count fails with
// distlock.ErrPermitsMismatch.
//
// etcdlock.Semaphore has the same methods.
type Semaphore struct{ q *qlock.Semaphore }

// NewSemaphore returns the semaphore called name (see
// distlock.ValidateName), of n permits (1 to distlock.MaxPermits), on the
// session's connection. A semaphore and a Mutex or Election of the same
// name are separate.
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
