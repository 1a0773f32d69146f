package zklock

import (
	"fmt"
	"time"

	"github.com/distlock/distlock"
)

// WithLockDelay makes the session's Mutexes, RWMutexes (readers and
// writers) and MultiMutexes hold a waiter back for d before it takes the
// lock, when the entry whose going made it the head went without its
// holder's release: the holder's ZooKeeper session expired or was closed
// without an Unlock, or its node was deleted by someone else. It is for
// work that no fencing token can stop (an e-mail sent, a payment made by
// a service that takes no token): an old holder that lost its session may
// still be doing it, and d is the time it gets to notice and stop. A
// clean Unlock hands over at once: every release marks itself with a
// set-data in the transaction that deletes the node (one request, as a
// plain delete), and a deletion without the mark is what counts as not
// released, readers' as writers'. It costs no request more.
//
// The delay is the waiter's own, counted from when it saw the node go:
// every process that takes the lock should set the same d. It holds
// back the waiters queued when the entry went; a process that enqueues
// later, into a queue already empty, learns of no going and is not held
// back (the store keeps no record of it). An entry that
// was only waiting, not holding, when it went causes no delay; one that
// gave up as the head counts as not released, and so does one found gone
// when the waiter sets its watch (a round trip after its enqueue): a
// holder that releases just as a waiter enqueues behind it costs that
// waiter a needless delay (one too many, never one too few).
// Elections and Semaphores ignore it: a leader's work is fenced by its
// term, and a semaphore admits several holders anyway. Lease.LockDelay
// reports the delay served, and the acquisition's span carries it
// (distlock.lock_delay). d = 0 (the default) is no delay; d < 0 is an
// error wrapping distlock.ErrInvalidOption.
func WithLockDelay(d time.Duration) Option { return func(o *options) { o.lockDelay = d } }

// checkLockDelay refuses a negative lock-delay.
func checkLockDelay(d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("zklock: new session: %w: lock-delay %v is negative", distlock.ErrInvalidOption, d)
	}
	return nil
}
