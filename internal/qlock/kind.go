package qlock

import "github.com/distlock/distlock"

// Kind says which queue an entry is in and whom it waits for.
type Kind uint8

const (
	// Exclusive entries (Mutex, RWMutex writers) wait for every lock entry
	// ahead of them.
	Exclusive Kind = iota
	// Shared entries (RWMutex readers) wait only for exclusive entries.
	Shared
	// Candidate entries (Election) are a queue of their own, beside the
	// lock entries of the same name: they wait for every candidate ahead.
	Candidate
	// Counted entries are a semaphore's line, a queue of their own too:
	// each waits for every line entry ahead of it, like a Mutex's, and
	// the head claims one of the semaphore's slots (see semaphore.go).
	Counted
)

// View returns how the entry shows in a lock's queue view
// (distlock.QueueEntry).
func (k Kind) View() distlock.Kind {
	switch k {
	case Shared:
		return distlock.Shared
	case Counted:
		return distlock.Counted
	case Candidate:
		return distlock.Candidate
	}
	return distlock.Exclusive
}

// Mark is the letter that names an entry of kind k in its store (etcd key,
// znode name): both stores use the same ones, so that a reader of either
// knows an entry's kind at a glance. A semaphore's line entries are
// Counted; its slots are named apart (see the drivers).
func (k Kind) Mark() byte {
	return "wrec"[k]
}

func (k Kind) String() string {
	switch k {
	case Shared:
		return "shared"
	case Candidate:
		return "candidate"
	case Counted:
		return "counted"
	}
	return "exclusive"
}

// Conflicts reports whether an entry of kind me must wait for an older
// entry of kind ahead: only two shared lock entries may hold together;
// candidates and counted entries wait only for their own kind.
func Conflicts(me, ahead Kind) bool {
	switch me {
	case Exclusive:
		return ahead == Exclusive || ahead == Shared
	case Shared:
		return ahead == Exclusive
	}
	return ahead == me
}

// Rule is the holding rule of one entry: an entry holds when no entry
// ahead of it conflicts with it (Conflicts).
type Rule struct {
	Kind Kind
}

// RuleOf returns the rule of an entry of kind k.
func RuleOf(k Kind) Rule { return Rule{Kind: k} }

// Waits returns the one entry an entry with rule r waits on, given the
// entries still ahead of it, oldest first: the nearest one that conflicts
// with it (for an exclusive waiter, the immediate predecessor; for a
// shared one, the nearest exclusive entry ahead). ok is false when none
// conflicts: it holds. Waiting on that entry alone, never on the whole
// queue, is what spares the herd.
func (r Rule) Waits(ahead []Entry) (e Entry, ok bool) {
	for i := len(ahead) - 1; i >= 0; i-- {
		if Conflicts(r.Kind, ahead[i].Kind) {
			return ahead[i], true
		}
	}
	return Entry{}, false
}

// Holding reports, for a lock's entries in queue order (oldest first),
// which of them hold the lock: each entry holds when no entry ahead
// conflicts with it. The result has one element per entry.
func Holding(kinds []Kind) []bool {
	out := make([]bool, len(kinds))
	for i, k := range kinds {
		out[i] = true
		for _, a := range kinds[:i] {
			if Conflicts(k, a) {
				out[i] = false
				break
			}
		}
	}
	return out
}
