package qlock

import "slices"

// Entry is one waiter or holder in a lock's queue.
type Entry struct {
	// Key identifies the entry in its store: an etcd key, a znode path.
	Key string
	// Seq is the entry's position, set by the store when the entry was
	// created (etcd create revision, ZooKeeper sequence number). Entries
	// created later always have a larger Seq.
	Seq int64
	// Kind is how the entry shares the lock.
	Kind Kind
	// Client is the foreign client whose recipe made the entry
	// (distlock.ClientCurator, ...), "" for the library's own. A foreign
	// entry is waited for like any other; only its release cannot be told
	// from its session's end (it marks nothing), and its data may change
	// without meaning a release.
	Client string
}

// Ahead returns, oldest first, the entries of all that were created before
// me: the snapshot a waiter takes when it enqueues. It does not modify all.
//
// The snapshot can only shrink. Any entry created after me sorts after me
// and never matters to me, so the entries really ahead of me at any later
// time are a subset of this snapshot. That is what lets a waiter move on
// when its predecessor goes without listing the queue again.
func Ahead(me Entry, all []Entry) []Entry {
	out := make([]Entry, 0, len(all))
	for _, e := range all {
		if e.Seq < me.Seq && e.Key != me.Key {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b Entry) int {
		switch {
		case a.Seq < b.Seq:
			return -1
		case a.Seq > b.Seq:
			return 1
		}
		return 0
	})
	return out
}

// Queue is one waiter's view of the entries ahead of it that it conflicts
// with: the snapshot taken at enqueue, shrunk as the store driver sees
// entries go. It is not safe for concurrent use.
//
// The view is bounded: it keeps only the ViewKeep newest conflicting
// entries ahead, so that a waiter costs the same memory whether ten or ten
// thousand entries are ahead of it. Whether older ones exist is then
// unknown (truncated), and the first time the known ones are all gone
// without a read having shown that nothing older is left, the waiter reads
// the store (MustRead, Observed). That costs a FIFO queue no extra read:
// the known ones run out when the entry waited on goes, and a waiter with
// older entries in its view reads then anyway, since a delete does not
// say whether they are gone too (a release mark may: see the drivers'
// WaitGone).
type Queue struct {
	me    Entry
	rule  Rule
	ahead []Entry // known conflicting entries ahead, oldest first
	// truncated says conflicting entries older than floor may exist that
	// the view does not know of.
	truncated bool
	floor     int64
}

// ViewKeep is how many of the newest conflicting entries ahead a waiter's
// view keeps (see Queue), and so all a driver's enqueue needs to read. Two,
// not one: the entry waited on and the next older one, so that when the
// first goes without a release (it gave up waiting, its session ended)
// the waiter knows which entry to check next, with one small request
// (ZooKeeper: an Exists, where it would otherwise list the queue; etcd
// reads the nearest survivor with one request either way).
const ViewKeep = 2

// NewQueue returns me's view of a lock's queue, given the entries the
// enqueue saw (me included or not). more says the enqueue read only the
// newest entries and older ones may exist.
func NewQueue(me Entry, all []Entry, more bool) *Queue {
	q := &Queue{me: me, rule: RuleOf(me.Kind)}
	for _, e := range Ahead(me, all) {
		if Conflicts(me.Kind, e.Kind) {
			q.ahead = append(q.ahead, e)
		}
	}
	q.truncated = more
	if len(q.ahead) > ViewKeep {
		q.ahead, q.truncated = slices.Clone(q.ahead[len(q.ahead)-ViewKeep:]), true
	}
	if q.truncated {
		q.floor = q.me.Seq
		if len(q.ahead) > 0 {
			q.floor = q.ahead[0].Seq
		}
	}
	return q
}

// MustRead reports that the view cannot tell whether its owner holds: no
// known conflicting entry is left while older ones may exist. The waiter
// must read the store (the driver's SurvivorsAll, below the returned
// position) before it goes on.
func (q *Queue) MustRead() (below int64, must bool) {
	if q.truncated && len(q.ahead) == 0 {
		return q.floor, true
	}
	return 0, false
}

// Me returns the waiter's own entry.
func (q *Queue) Me() Entry { return q.me }

// Next returns the entry q's owner waits on now (see Rule.Waits); ok is
// false when it holds the lock, or when it must read first (see MustRead).
func (q *Queue) Next() (Entry, bool) { return q.rule.Waits(q.ahead) }

// Gone removes the entry with key from the snapshot, after the driver saw
// it deleted. Removing an unknown key does nothing.
func (q *Queue) Gone(key string) {
	q.ahead = slices.DeleteFunc(q.ahead, func(e Entry) bool { return e.Key == key })
}

// Ahead returns a copy of the known conflicting entries still ahead,
// oldest first.
func (q *Queue) Ahead() []Entry { return slices.Clone(q.ahead) }

// Older returns, oldest first, the entries still ahead that are older
// than below and conflict with q's owner: those a read of the store may
// find gone (see Observed).
func (q *Queue) Older(below int64) []Entry {
	var out []Entry
	for _, a := range q.ahead {
		if a.Seq < below && Conflicts(q.me.Kind, a.Kind) {
			out = append(out, a)
		}
	}
	return out
}

// Observed records what a read of the store showed after the entry with
// sequence below went: among the entries older than below that conflict
// with q's owner, nearest is the newest still present (or, if found is
// false, none is). Entries of the view between the two are dropped
// without being waited on one by one; a nearest the view did not know of
// (older than what it kept) joins it.
//
// The read may be stale (a member lagging behind): an entry it reports
// present may be gone already, and waiting on it will show that; but one it
// reports absent is absent for good, because nothing rejoins the queue
// ahead of a waiter. So any read, at any revision after the enqueue, is
// safe to apply.
func (q *Queue) Observed(below int64, nearest Entry, found bool) {
	q.ahead = slices.DeleteFunc(q.ahead, func(e Entry) bool {
		return e.Seq < below && Conflicts(q.me.Kind, e.Kind) && (!found || e.Seq > nearest.Seq)
	})
	if !q.truncated || below < q.floor {
		return // the unknown entries are older than what the read covered
	}
	switch {
	case !found:
		q.truncated = false
	case nearest.Seq < q.floor && Conflicts(q.me.Kind, nearest.Kind):
		// One of the entries the view left out: know it, and everything
		// between it and the floor is gone.
		q.ahead = slices.Insert(q.ahead, 0, nearest)
		q.floor = nearest.Seq
	case nearest.Seq >= q.floor:
		// Still one the view knows: nothing between the floor and it has
		// been shown absent, so the older unknowns stay unknown.
	}
}
