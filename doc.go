// Package distlock holds the backend-neutral core of distlock: fencing
// tokens, the held-lock type ([Lease]), the [Locker] interface, sentinel
// errors and the pure rules of the FIFO queue lock.
//
// The recipes themselves live in the backend packages (etcdlock, and zklock
// for ZooKeeper). They share everything here so that both behave alike: the
// same queue rules decide who holds a lock, the same Lease reports loss, the
// same errors come back.
//
// A lock service alone cannot promise that two processes never do the
// protected work at once: a holder that pauses past its TTL wakes up still
// believing it holds the lock. Every acquisition therefore carries a [Token]
// that only grows from one holder to the next, and the resource that is
// written to must check it (see the fencing package).
package distlock
