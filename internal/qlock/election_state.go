package qlock

import (
	"cmp"
	"strconv"

	"github.com/distlock/distlock"
)

// Contender is one candidate of an election as its state shows it.
type Contender struct {
	// Entry is the candidate's entry: its key and queue position.
	Entry
	// Priority is the candidate's priority (in its key).
	Priority int
	// Value is the candidate's value (see Elections for when it is set).
	Value string
	// Owner is the candidate's session: its etcd lease or ZooKeeper
	// session ID.
	Owner uint64
}

// ElectionState is one consistent view of an election, or (Partial) of
// its term record alone.
type ElectionState struct {
	// Term is the term record's revision: the token of the term it
	// names. 0 when there is no record.
	Term int64
	// Leader is the key of the entry the term record names; "" for none.
	Leader string
	// Version is what ClaimTerm and HandOff compare the record against (its
	// mod revision on etcd, 0 for none; the directory's data version on
	// ZooKeeper).
	Version int64
	// Contenders are the election's candidates.
	Contenders []Contender
	// Partial says that only the term record (Term, Leader, Version) is
	// as of this state: Contenders holds the candidate the record names
	// alone, as the watch last listed it, and its entry may have gone
	// since. A watch sends one as soon as a write of the record is seen
	// naming a candidate it knows, before it reads the rest (see
	// Elections.WatchElection): a successor that a handoff named leads
	// on it, its own entry's life being known to it without a read
	// (campaign). Everyone else waits for the full state that follows.
	Partial bool
	// Foreign are the candidates of other clients' elections in the
	// same queue (Curator's LeaderLatch and LeaderSelector, kazoo's
	// Election, etcd's Election and v3election, ...), oldest first, each
	// with its Client: no candidate leads while one of them is older (see
	// next). Empty in a Partial state.
	Foreign []Entry
}

// leader returns the leading candidate: the one the term record names, if
// its entry is still there.
func (s ElectionState) leader() (Contender, bool) {
	if s.Leader == "" {
		return Contender{}, false
	}
	for _, c := range s.Contenders {
		if c.Key == s.Leader {
			return c, true
		}
	}
	return Contender{}, false
}

// next returns the candidate that leads next: among the candidates other
// than the entry with key but, if value is not empty, with that value,
// that no foreign candidate is older than, the highest priority, the
// oldest among equals. A foreign client's rule is "the oldest leads"
// (Curator, kazoo, etcd): a candidate younger than one of its entries
// would lead beside it, whatever its priority, so it does not lead
// before that entry is gone; one older than all of them is what the
// foreign client takes for the leader too.
func (s ElectionState) next(but string, value string) (Contender, bool) {
	var best Contender
	found := false
	for _, c := range s.Contenders {
		if c.Key == but || value != "" && c.Value != value || s.behindForeign(c) {
			continue
		}
		if !found || before(c, best) {
			best, found = c, true
		}
	}
	return best, found
}

// behindForeign reports whether a foreign candidate is older than c.
func (s ElectionState) behindForeign(c Contender) bool {
	return len(s.Foreign) > 0 && s.Foreign[0].Seq < c.Seq
}

// foreignAhead returns the oldest foreign candidate, if it is older than
// every candidate other than but (with value, if set): what keeps them
// all from leading, for a step-down's error.
func (s ElectionState) foreignAhead(but, value string) (Entry, bool) {
	if len(s.Foreign) == 0 {
		return Entry{}, false
	}
	some := false
	for _, c := range s.Contenders {
		if c.Key != but && (value == "" || c.Value == value) {
			if !s.behindForeign(c) {
				return Entry{}, false
			}
			some = true
		}
	}
	return s.Foreign[0], some
}

// before reports whether candidate a leads before b.
func before(a, b Contender) bool {
	return cmp.Or(cmp.Compare(b.Priority, a.Priority), cmp.Compare(a.Seq, b.Seq)) < 0
}

// leaderEntry is leader l as a lock's holder (Inspect, Revoke).
func (s ElectionState) leaderEntry(name string, l Contender) distlock.QueueEntry {
	return distlock.QueueEntry{
		Key: l.Key, Kind: distlock.Candidate, Holding: true, Seq: l.Seq, Holder: l.Value,
		Owner: strconv.FormatUint(l.Owner, 16),
		Token: distlock.Token{Name: name, Seq: s.Term, Owner: l.Owner},
	}
}

// info returns the leader as users see it, the zero LeaderInfo for none.
func (s ElectionState) info(name string) distlock.LeaderInfo {
	l, ok := s.leader()
	if !ok {
		return distlock.LeaderInfo{}
	}
	return distlock.LeaderInfo{Value: l.Value, Token: distlock.Token{Name: name, Seq: s.Term, Owner: l.Owner}, Priority: l.Priority}
}
