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
	// Counted entries (a semaphore of Request.Limit permits) are a queue of
	// their own too: an entry holds while fewer than Limit entries are
	// ahead of it. No store driver writes them yet.
	Counted
)

// View returns how the entry shows in a lock's queue view
// (distlock.QueueEntry): shared for readers, exclusive otherwise.
func (k Kind) View() distlock.Kind {
	if k == Shared {
		return distlock.Shared
	}
	return distlock.Exclusive
}

// Mark is the letter that names an entry of kind k in its store (etcd key,
// znode name): both stores use the same ones, so that a reader of either
// knows an entry's kind at a glance. Counted entries have one reserved.
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

// Conflicts reports whether an entry of kind me must count an older entry
// of kind ahead against its limit: only two shared lock entries may hold
// together; candidates and counted entries count only their own kind.
func Conflicts(me, ahead Kind) bool {
	switch me {
	case Exclusive:
		return ahead == Exclusive || ahead == Shared
	case Shared:
		return ahead == Exclusive
	}
	return ahead == me
}

// Rule is the holding rule of one entry: its kind, and how many
// conflicting entries may be ahead of it while it holds (Limit; 1 for
// every kind but Counted).
type Rule struct {
	Kind  Kind
	Limit int
}

// RuleOf returns the rule of an entry of kind k; limit matters only for
// Counted entries, and is at least 1.
func RuleOf(k Kind, limit int) Rule {
	if k != Counted || limit < 1 {
		limit = 1
	}
	return Rule{Kind: k, Limit: limit}
}

// Waits returns what an entry with rule r waits for, given the entries
// still ahead of it, oldest first: nothing when fewer than r.Limit of them
// conflict with it (it holds); otherwise the entries whose departure can
// let it hold. With a limit of 1 that is one entry, the nearest
// conflicting one (for an exclusive waiter, the immediate predecessor; for
// a shared one, the nearest exclusive entry ahead): waiting on that entry
// alone, never on the whole queue, is what spares the herd. With a limit
// of N it is every conflicting entry ahead, any of which may free a
// permit.
func (r Rule) Waits(ahead []Entry) []Entry {
	if r.Limit == 1 {
		if e, ok := r.nearest(ahead); ok {
			return []Entry{e}
		}
		return nil
	}
	var c []Entry
	for i := len(ahead) - 1; i >= 0; i-- {
		if Conflicts(r.Kind, ahead[i].Kind) {
			c = append(c, ahead[i])
		}
	}
	if len(c) < r.Limit {
		return nil
	}
	return c
}

// nearest returns the nearest entry ahead that conflicts with r's kind.
func (r Rule) nearest(ahead []Entry) (Entry, bool) {
	for i := len(ahead) - 1; i >= 0; i-- {
		if Conflicts(r.Kind, ahead[i].Kind) {
			return ahead[i], true
		}
	}
	return Entry{}, false
}

// Holding reports, for a lock's entries in queue order (oldest first),
// which of them hold the lock: each entry holds when fewer than one entry
// ahead conflicts with it. The result has one element per entry.
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
