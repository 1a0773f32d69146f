// Package recipe holds distlock's recipes, written once for both stores:
// a fair FIFO [Mutex], a readers-writer [RWMutex], a [MultiMutex] on
// several names at once, an [Election], a counting [Semaphore] of fenced
// permits, the done-markers of distlock.Once ([Marks]) and an [Admin] that
// reads and manages locks without holding any.
//
// A recipe works on a session of a store: an etcd lease
// (etcdlock.NewSession) or a ZooKeeper session (zklock.NewSession). Both
// embed this package's [Session], and the constructors here take either:
//
//	sess, err := etcdlock.NewSession(ctx, client)
//	...
//	m, err := recipe.NewMutex(sess, "daily-report")
//	lease, err := m.Lock(ctx)
//
// The recipes behave alike on both stores: one queue-lock engine decides
// who holds, the same distlock.Lease reports a loss, the same errors come
// back. What a call costs on a store, and how its keys or znodes look, is
// in that store's package documentation (etcdlock, zklock). Code that must
// work on either store takes a distlock.Locker or distlock.Elector.
//
// Why a package of its own: the root package distlock is the contract
// that the engine implements (Token, Lease, errors), so it cannot import
// the engine; the store packages keep only what belongs to a store (a
// session built from the user's own client, its options and accessors).
//
// # Fencing
//
// Every acquisition carries a distlock.Token that grows from one holder to
// the next: a Lease's token is its entry's etcd create revision or
// ZooKeeper czxid, an Election term's the revision or zxid of the write
// that began the term. A lock cannot by itself stop a holder that paused
// past its TTL from writing: the resource must check the token (package
// fencing).
package recipe
