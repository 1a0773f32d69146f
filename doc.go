// Package distlock is the user's contract of distlock's distributed locks:
// fencing tokens ([Token], [ParseToken]), the held lock ([Lease]), the
// [Locker] and [Elector] interfaces that the backends' recipes implement,
// the helpers that run work under a lock or as the leader ([Do], [DoLease],
// [RunAsLeader]), the errors ([LockError] and the sentinels), lock-name
// rules ([ValidateName]), the read-only view of a lock's queue
// ([QueueEntry]) and an operator's revocation of a holder
// ([RevokeRequest], [Revocation], [RevokedError]).
//
// The recipes live in package recipe: a fair FIFO Mutex, a readers-writer
// RWMutex, a MultiMutex on several names, an Election, a Semaphore, the
// done-markers of [Once] and an Admin (Inspect, Revoke), written once for
// both stores. They run on a session of etcdlock (etcd) or zklock
// (ZooKeeper), one queue-lock engine under both, so they behave alike: the
// same rules decide who holds a lock, the same Lease reports loss, the
// same errors come back. Package schedule names [Once]'s slots by time.
//
// A lock service alone cannot promise that two processes never do the
// protected work at once: a holder that pauses past its TTL wakes up still
// believing it holds the lock. Every acquisition therefore carries a [Token]
// that only grows from one holder to the next, and the resource that is
// written to must check it (see the fencing package).
package distlock
