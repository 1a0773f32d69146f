package distlock

import "time"

// Kind says how an entry in a lock's queue shares the lock.
type Kind uint8

const (
	// Exclusive entries (mutex holders, writers, election candidates)
	// exclude every other entry of their queue.
	Exclusive Kind = iota
	// Shared entries (readers) exclude only Exclusive entries.
	Shared
	// Counted entries are a semaphore's: its holders (the permits, see
	// QueueEntry.Permits and Slot) and its waiters, up to N of which
	// hold at once.
	Counted
)

// String returns "exclusive", "shared" or "counted".
func (k Kind) String() string {
	switch k {
	case Shared:
		return "shared"
	case Counted:
		return "counted"
	}
	return "exclusive"
}

// QueueEntry is one entry of a lock's queue as a read-only inspection sees
// it (etcdlock.Inspect, zklock.Inspect): the holder or a waiter, with what
// the store knows about it.
type QueueEntry struct {
	// Key identifies the entry in its store: an etcd key, a znode path.
	Key string
	// Kind is how the entry shares the lock.
	Kind Kind
	// Holding says the entry holds the lock: it is the first entry, or a
	// shared one with no exclusive entry before it.
	Holding bool
	// Token is the fencing token the entry has or will have when it holds:
	// the lock's name and the entry's etcd create revision or znode czxid.
	Token Token
	// Owner is the session the entry belongs to, in hex: the etcd lease ID
	// or the ZooKeeper session ID (the node's ephemeral owner).
	Owner string
	// Holder is the entry's value: what its session was made with (etcdlock
	// and zklock WithHolder), e.g. "host pid 42 ...". It may be empty.
	Holder string
	// Created is when the store created the entry; zero when the store
	// keeps no such time (etcd).
	Created time.Time
	// Permits is, for a semaphore's holder, the semaphore's permit count
	// N; 0 for lock entries and a semaphore's waiters.
	Permits int
	// Slot is a semaphore holder's slot (its Token's Name is the slot's,
	// see SlotName); 0 otherwise.
	Slot int
}
