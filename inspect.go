package distlock

import "time"

// QueueEntry is one entry of a lock's queue as a read-only inspection sees
// it (etcdlock.Inspect, zklock.Inspect): the holder or a waiter, with what
// the store knows about it.
type QueueEntry struct {
	// Key identifies the entry in its store: an etcd key, a znode path.
	Key string
	// Kind is how the entry shares the lock.
	Kind Kind
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
}

// Holding reports, for entries in queue order (oldest first), which of them
// hold the lock: the first entry, and every shared entry with no exclusive
// entry before it. The result has one element per entry.
func Holding(entries []QueueEntry) []bool {
	out := make([]bool, len(entries))
	for i, e := range entries {
		out[i] = true
		for _, a := range entries[:i] {
			if Conflicts(e.Kind, a.Kind) {
				out[i] = false
				break
			}
		}
	}
	return out
}
