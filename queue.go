package distlock

import "time"

// Kind says how an entry in a lock's queue shares the lock.
type Kind uint8

const (
	// Exclusive entries (mutex holders, writers) exclude every other
	// entry of their queue.
	Exclusive Kind = iota
	// Shared entries (readers) exclude only Exclusive entries.
	Shared
	// Counted entries are a semaphore's: its holders (the permits, see
	// QueueEntry.Permits and Slot) and its waiters, up to N of which
	// hold at once.
	Counted
	// Candidate entries are an election's, a queue of their own: the one
	// its term record names leads (Holding, with its term's token).
	Candidate
)

// String returns "exclusive", "shared", "counted" or "candidate".
func (k Kind) String() string {
	switch k {
	case Shared:
		return "shared"
	case Counted:
		return "counted"
	case Candidate:
		return "candidate"
	}
	return "exclusive"
}

// QueueEntry is one entry of a lock's queue as a read-only inspection sees
// it (recipe.Admin's Inspect and WatchQueue, their zklock twins,
// `distlock status`): the holder or a waiter, with what the store knows about it.
//
// The queue model, the same on every store:
//
// Every lock name has one queue. Each acquisition — Lock, RLock, a
// Campaign, a semaphore's Acquire — writes one entry into it, bound to the
// caller's session (an etcd key attached to the session's lease, an
// ephemeral sequential ZooKeeper znode), so that the entry vanishes when
// its session ends. Entries are ordered by the store itself: by the etcd
// key's create revision, by the znode's sequence number (which follows its
// czxid). That position is also the entry's fencing token, so tokens grow
// in queue order.
//
// Who holds follows from the order and the entries' Kind:
//
//   - an Exclusive entry holds when no entry is ahead of it;
//   - a Shared entry holds when no Exclusive entry is ahead of it, so
//     readers behind readers hold together and a reader never passes a
//     waiting writer;
//   - of Counted entries (a semaphore of N permits), the first N hold,
//     each in a slot of its own whose token fences that slot.
//
// A waiter watches only the one entry it waits on (the nearest conflicting
// entry ahead), so a release wakes one waiter, not the queue. Entries are
// only ever deleted — by Unlock, by their session's end, by an operator —
// never rewritten, which is what lets a waiter trust a position it has
// seen.
type QueueEntry struct {
	// Key identifies the entry in its store: an etcd key, a znode path.
	Key string
	// Kind is how the entry shares the lock.
	Kind Kind
	// Holding says the entry holds the lock: it is the first entry, or a
	// shared one with no exclusive entry before it.
	Holding bool
	// Token is the fencing token the entry has or will have when it holds:
	// the lock's name and the entry's etcd create revision or znode czxid;
	// for an election's leader, its term's (the revision of the term
	// record that names it).
	Token Token
	// Seq is the entry's own place in the store's order (its create
	// revision or czxid) when that differs from Token.Seq (an election's
	// leader, whose token is its term's); 0 otherwise.
	Seq int64
	// Owner is the session the entry belongs to, in hex: the etcd lease ID
	// or the ZooKeeper session ID (the node's ephemeral owner).
	Owner string
	// Holder is the entry's value: what its session was made with
	// (recipe.WithHolder), e.g. "host pid 42 ...". It may be empty.
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
	// Priority is an election candidate's priority (WithPriority), which
	// both stores keep in the entry's key or znode name; 0 for a
	// candidate of the default priority and for every other kind.
	Priority int
	// Position is the entry's 1-based place in its own queue, in the
	// order the queue serves it: a lock's entries oldest first (its
	// holders first); a semaphore's holders in slot order, then its
	// waiters oldest first; an election's leader, then its waiting
	// candidates in the order they would lead (the highest Priority
	// first, the oldest among equals). An inspection lists a semaphore's
	// entries, then the lock's, then the election's, each queue in
	// Position order.
	Position int
	// Multi is, for an entry of a multi-lock (MultiMutex: one acquisition
	// of several locks, all or none, whose entries, one per lock, are made
	// by one write and so share their Token's Seq and Owner), the names
	// of all the locks that acquisition takes, this one's included,
	// sorted; nil for an entry of one lock. On etcd an inspection finds
	// them by the entry's create revision (one more request when the
	// queue has exclusive entries). ZooKeeper cannot find the other
	// entries of an acquisition (they share a czxid and the GUID in their
	// names, but no znode is found by either without listing every lock's
	// directory), so there Multi is always nil: compare the Tokens (Seq
	// and Owner) of the queues of the names you suspect.
	Multi []string
	// Client is, for an entry another client made, the client whose recipe
	// made it (ClientCurator, ClientKazoo, ...), "" for distlock's own. A
	// recognised foreign entry takes its place in the queue by its
	// position like any other: a lock or leadership is never granted while
	// one is ahead. A child of the lock's queue that no recipe the library
	// knows made (ClientUnknown) is listed with Position 0 and Holding
	// false: it is reported, not waited for. A foreign entry's Token is
	// the one distlock would give its holder (see docs/interop.md); its
	// Holder is the entry's data as text, when it has any.
	Client string
	// Compat is, for an entry of distlock's own, the compatibility mode
	// its name follows (WithCompat, WithElectionCompat): the foreign
	// client that counts it. "" for an entry in distlock's own naming,
	// and for every entry whose naming is the same in every mode (etcd's
	// keys but an RWMutex writer's in CompatEtcdRecipes). On ZooKeeper,
	// CompatGoZookeeper's entries are CompatCurator's and say so.
	Compat Compat
}

// The clients that QueueEntry.Client names: whose recipe, by its naming
// rule, made an entry in a lock's queue (docs/interop.md has each rule).
const (
	// ClientCurator is Apache Curator: InterProcessMutex and
	// LeaderSelector ("lock-" nodes), InterProcessReadWriteLock
	// ("__WRIT__", "__READ__") and LeaderLatch ("latch-").
	ClientCurator = "curator"
	// ClientKazoo is kazoo (Python): Lock, WriteLock and Election
	// ("__lock__" nodes), ReadLock ("__rlock__").
	ClientKazoo = "kazoo"
	// ClientGoZookeeper is go-zookeeper's zk.Lock ("_c_<32 hex>-lock-").
	ClientGoZookeeper = "go-zookeeper"
	// ClientEtcd is etcd's own lock and election, which all make one key
	// per lease, name + "/" + the lease ID in hex: the concurrency
	// package's Mutex and Election, the v3lock and v3election services,
	// etcdctl lock and elect.
	ClientEtcd = "etcd"
	// ClientEtcdRecipes is the RWMutex of etcd's contrib recipes
	// (name + "/write/…", name + "/read/…").
	ClientEtcdRecipes = "etcd-recipes"
	// ClientUnknown marks a child of a lock's queue that no recipe the
	// library knows made, and that it cannot order or tell the kind of.
	ClientUnknown = "unknown"
)

// Client returns the client whose entries the mode's match
// (QueueEntry.Client): ClientCurator for CompatCurator and
// CompatCuratorLatch, and so on; "" for the zero Compat.
func (c Compat) Client() string {
	switch c {
	case CompatCurator, CompatCuratorLatch:
		return ClientCurator
	case CompatKazoo:
		return ClientKazoo
	case CompatGoZookeeper:
		return ClientGoZookeeper
	case CompatEtcd:
		return ClientEtcd
	case CompatEtcdRecipes:
		return ClientEtcdRecipes
	}
	return ""
}
