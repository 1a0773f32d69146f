package etcdlock

import (
	"fmt"
	"time"

	"github.com/distlock/distlock"
)

// WithLockDelay makes the session's Mutexes, RWMutexes (readers and
// writers) and MultiMutexes hold a waiter back for d before it takes the
// lock, when the entry whose going made it the head went without its
// holder's release: the holder's lease expired or was revoked (a session
// that ended, or was closed without an Unlock). It is for work that no
// fencing token can stop (an e-mail sent, a payment made by a service
// that takes no token): an old holder that lost its session may still be
// doing it, and d is the time it gets to notice and stop. A clean Unlock
// hands over at once.
//
// How a waiter tells: a session with a lock-delay marks each release, in
// the release's own Txn (one round trip, as before), by putting one key
// of its lease ("<prefix>@released/<lease hex>"); a waiter that sees the
// key ahead deleted reads that mark at the delete's revision (one
// serializable read), and without it asks whether the key's lease still
// lives (TimeToLive: gone means the session ended). Without a delay no
// request is made.
//
// The delay is the waiter's own, counted from when it saw the entry go:
// every process that takes the lock should set the same d. It holds
// back the waiters queued when the entry went; a process that enqueues
// later, into a queue already empty, learns of no going and is not held
// back (the store keeps no record of it) (a holder
// without it does not mark its releases, and one that Unlocks and at once
// closes its session may then cost its successor a needless delay).
// What etcd cannot tell: a key deleted by another client while its
// owner's lease lives counts as released; so does a waiter's giving up,
// which is why a waiter cancelled while it serves a delay returns at once
// but leaves its entry, held by nobody, until the delay's end (then
// deletes it, or the lease takes it). An entry that was only waiting, not
// holding, when it went causes no delay. Elections and Semaphores ignore
// it: a leader's work is fenced by its term, and a semaphore admits
// several holders anyway. Lease.LockDelay reports the delay served, the
// acquisition's span carries it (distlock.lock_delay), and distlock
// status shows it while it runs. d = 0 (the default) is no delay; d < 0
// is an error wrapping distlock.ErrInvalidOption.
func WithLockDelay(d time.Duration) Option { return func(o *options) { o.lockDelay = d } }

// checkLockDelay refuses a negative lock-delay.
func checkLockDelay(d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("etcdlock: new session: %w: lock-delay %v is negative", distlock.ErrInvalidOption, d)
	}
	return nil
}
