// Package qlock is distlock's queue-lock engine: the recipes (Mutex,
// RWMutex, Election) and the life cycle of every acquisition, written once
// for every store. A store is reached only through the Driver interface;
// its drivers live below this package (etcdq for etcd, zkq for ZooKeeper),
// and the public packages etcdlock and zklock construct a driver's session
// and hand it to the recipes here.
//
// lifecycle.go is the place to read one handoff from start to end. The
// queue's rules are in kind.go (who conflicts with whom, and how many
// conflicting entries may be ahead of a holder) and queue.go (a waiter's
// snapshot of the entries ahead, which only shrinks). session.go holds the
// state every session has (its end, its client-side deadline, its
// background work) and the part of a session users see.
package qlock
