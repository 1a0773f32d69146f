package etcdlock

import (
	"fmt"
	"time"

	"github.com/distlock/distlock"
)

// WithLockDelay makes the session's Mutexes, RWMutexes (readers and
// writers) and MultiMutexes hold a waiter back for d before it takes the
// lock, when the entry whose going made it the head went without its
// holder's release: the holder's lease expired or was revoked (a
// session that ended, or was closed without an Unlock). It is for work that no fencing token can
// stop (an e-mail sent, a payment made by a service that takes no token):
// an old holder that lost its session may still be doing it, and d is
// the time it gets to notice and stop. A clean Unlock hands over at
// once, at no extra cost; with a delay set, a waiter whose predecessor's
// key is deleted makes one request more (the lease's TimeToLive: gone
// means the session ended).
//
// The delay is the waiter's own, counted from when it saw the entry go:
// every process that takes the lock should set the same d. What etcd
// cannot tell: a key deleted by another client while its owner's lease
// lives counts as released (no delay); a holder that Unlocks and at once
// closes its session may be taken for one whose session ended (a delay
// too many, never one too few). An entry that was only waiting, not
// holding, when it went causes no delay. Elections and Semaphores ignore
// it: a leader's work is fenced by its term, and a semaphore admits
// several holders anyway. Lease.LockDelay reports the delay served, and
// the acquisition's span carries it (distlock.lock_delay). d = 0 (the
// default) is no delay; d < 0 is an error wrapping
// distlock.ErrInvalidOption.
func WithLockDelay(d time.Duration) Option { return func(o *options) { o.lockDelay = d } }

// checkLockDelay refuses a negative lock-delay.
func checkLockDelay(d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("etcdlock: new session: %w: lock-delay %v is negative", distlock.ErrInvalidOption, d)
	}
	return nil
}
