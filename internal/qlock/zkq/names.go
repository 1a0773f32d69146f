package zkq

import (
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"strings"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/qlock"
)

// Entry names. A lock named N under the session's prefix P keeps its queue
// in the directory P + "/" + N; each entry is one ephemeral sequential
// child "@<kind>-<guid>-<seq>": kind "w" for exclusive entries, "r" for
// readers, "e" for an Election's candidates. A candidate of a priority
// other than 0 is "@e-<guid>-p<prio>-<seq>" (prio in decimal, with its
// sign if negative): the priority is in the name so that every watcher of
// the election knows it from a listing, without reading the nodes. '@'
// cannot start a lock-name segment, so entries are never mistaken for a
// sub-lock's directory. The GUID lets a create cut off by a connection
// loss find its node again.
var (
	exclusiveMark = qlock.Exclusive.Mark()
	sharedMark    = qlock.Shared.Mark()
	// electionMark marks an Election's entries. parseEntry does not accept
	// them, so lock queues (Mutex, RWMutex) and elections never see each
	// other's entries, even in a directory of the same name: an election's
	// waiters must not take a Proclaim (a data change) for a release, as a
	// lock's waiters do (see WaitGone).
	electionMark = qlock.Candidate.Mark()
	// lineMark marks a semaphore's line entries ("@c-..."); its slots are
	// the children of the "@permits" child (see claim.go).
	lineMark = qlock.Counted.Mark()
)

const guidLen = 32

// Dir returns the znode under which lock name keeps its entries.
func (s *Session) Dir(name string) string { return s.prefix + "/" + name }

// Compatibility names. In a compatibility mode (qlock.Request.Compat) an
// entry's name keeps distlock's head "@<kind>-<guid>", so that it stays
// distlock's own (parsed as such first, found by its GUID after a create
// cut off by a connection loss, never taken for a foreign entry), and
// puts the foreign recipe's marker between the head and ZooKeeper's
// suffix, where that recipe finds it:
//
//   - Curator's InterProcessMutex and LeaderSelector, and go-zookeeper's
//     zk.Lock: "@w-<guid>-lock-<seq>", "@e-<guid>-lock-<seq>": Curator
//     sorts by what follows the last "lock-", zk.Lock splits at it;
//   - Curator's InterProcessReadWriteLock: "@w-<guid>-__WRIT__<seq>",
//     "@r-<guid>-__READ__<seq>": Curator strips either marker to sort,
//     and a reader waits for every name containing "__WRIT__";
//   - Curator's LeaderLatch: "@e-<guid>-latch-<seq>";
//   - kazoo's Lock, WriteLock, ReadLock and Election:
//     "@w-<guid>__lock__<seq>", "@r-<guid>__rlock__<seq>",
//     "@e-<guid>__lock__<seq>": kazoo matches
//     "(?:__lock__|__rlock__)(-?\d{10})$" anywhere in a name.
//
// A compatibility name carries no priority: the engine refuses one in a
// compatibility election.
const (
	tailPlain        = "-"
	tailCuratorLock  = "-" + curatorLock
	tailCuratorLatch = "-" + curatorLatch
	tailCuratorWrite = "-" + curatorWrite
	tailCuratorRead  = "-" + curatorRead
	tailKazooLock    = kazooLock
	tailKazooRead    = kazooRead
)

// tails lists, for each kind, the markers its entries' names may have
// between "@<kind>-<guid>" and the sequence suffix; one kind's marker
// in another's name makes it no entry of distlock's.
var tails = map[qlock.Kind][]string{
	qlock.Exclusive: {tailPlain, tailCuratorLock, tailCuratorWrite, tailKazooLock},
	qlock.Shared:    {tailPlain, tailCuratorRead, tailKazooRead},
	qlock.Candidate: {tailPlain, tailCuratorLock, tailCuratorLatch, tailKazooLock},
	qlock.Counted:   {tailPlain},
}

// compatTail returns the marker of an entry of kind k in mode c, rw for
// an RWMutex's: tailPlain where the mode has none for it (no mode, a
// semaphore's line, or a mode of etcd's, which the engine does not let
// through).
func compatTail(c distlock.Compat, k qlock.Kind, rw bool) string {
	switch c {
	case distlock.CompatCurator, distlock.CompatGoZookeeper:
		switch k {
		case qlock.Exclusive:
			if rw && c == distlock.CompatCurator {
				return tailCuratorWrite
			}
			return tailCuratorLock
		case qlock.Shared:
			return tailCuratorRead
		case qlock.Candidate:
			return tailCuratorLock
		}
	case distlock.CompatCuratorLatch:
		if k == qlock.Candidate {
			return tailCuratorLatch
		}
	case distlock.CompatKazoo:
		switch k {
		case qlock.Exclusive, qlock.Candidate:
			return tailKazooLock
		case qlock.Shared:
			return tailKazooRead
		}
	}
	return tailPlain
}

// entryBase returns the name, without the sequence suffix the server
// appends, of a new entry of kind k in mode c (rw for an RWMutex's):
// "@w-<guid>-", a compatibility name's head and marker (see above), or
// for a candidate of priority prio other than 0 "@e-<guid>-p<prio>-".
func entryBase(k qlock.Kind, guid string, prio int, c distlock.Compat, rw bool) string {
	b := "@" + string(k.Mark()) + "-" + guid
	if t := compatTail(c, k, rw); t != tailPlain {
		return b + t
	}
	b += "-"
	if k == qlock.Candidate && prio != 0 {
		b += "p" + strconv.Itoa(prio) + "-"
	}
	return b
}

// ownName is what an entry's name of distlock's says.
type ownName struct {
	kind qlock.Kind
	guid string
	// tail is the marker before the sequence suffix (see tails).
	tail string
	prio int
	seq  int64
}

// parseOwn parses a child name of distlock's: "@<kind>-<guid>", a marker
// its kind may have (see tails) or, for a candidate, "-p<prio>-", and
// the sequence suffix. Only the canonical decimal form of a priority in
// range is accepted, so that one candidate has one name.
func parseOwn(child string) (ownName, bool) {
	const head = 3 + guidLen // "@w-<guid>"
	if len(child) < head+2 || child[0] != '@' || child[2] != '-' {
		return ownName{}, false
	}
	var n ownName
	switch child[1] {
	case exclusiveMark:
		n.kind = qlock.Exclusive
	case sharedMark:
		n.kind = qlock.Shared
	case lineMark:
		n.kind = qlock.Counted
	case electionMark:
		n.kind = qlock.Candidate
	default:
		return ownName{}, false
	}
	n.guid = child[3:head]
	for _, c := range []byte(n.guid) {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return ownName{}, false
		}
	}
	rest := child[head:]
	if n.kind == qlock.Candidate && strings.HasPrefix(rest, "-p") {
		num, tail, found := strings.Cut(rest[2:], "-")
		if num == "" { // a negative priority: its sign is the first '-'
			num, tail, found = strings.Cut(tail, "-")
			num = "-" + num
		}
		p, err := strconv.Atoi(num)
		if !found || err != nil || p == 0 || p > distlock.MaxPriority || p < -distlock.MaxPriority || strconv.Itoa(p) != num {
			return ownName{}, false
		}
		n.prio, n.tail, rest = p, tailPlain, tail
	} else {
		// The longest marker first: "-" starts most of the others.
		for _, t := range tails[n.kind] {
			if strings.HasPrefix(rest, t) && len(t) > len(n.tail) {
				n.tail = t
			}
		}
		if n.tail == "" {
			return ownName{}, false
		}
		rest = rest[len(n.tail):]
	}
	for _, c := range []byte(rest) {
		if c < '0' || c > '9' {
			return ownName{}, false
		}
	}
	seq, err := strconv.ParseInt(rest, 10, 64)
	if err != nil || rest == "" {
		return ownName{}, false
	}
	n.seq = seq
	return n, true
}

// parseEntry parses a lock entry's child name (kind "w" or "r", or "c"
// for a semaphore's line), in any mode's form. ok is false for anything
// else: other clients' znodes are foreign.go's.
func parseEntry(child string) (kind qlock.Kind, guid string, seq int64, ok bool) {
	n, ok := parseOwn(child)
	if !ok || n.kind == qlock.Candidate {
		return 0, "", 0, false
	}
	return n.kind, n.guid, n.seq, true
}

// parseElectionEntry parses an Election's child name, "@e-<guid>-<seq>"
// (priority 0), "@e-<guid>-p<prio>-<seq>", or a compatibility mode's
// (priority 0).
func parseElectionEntry(child string) (guid string, prio int, seq int64, ok bool) {
	n, ok := parseOwn(child)
	if !ok || n.kind != qlock.Candidate {
		return "", 0, 0, false
	}
	return n.guid, n.prio, n.seq, true
}

// CandidateNode reports whether p is the node of a candidate of election
// name under prefix (and not a lock's, a semaphore's, or no entry at all):
// what a revocation record's Key is for a leader.
func CandidateNode(prefix, name, p string) bool {
	i := strings.LastIndexByte(p, '/')
	if i < 0 || p[:i] != prefix+"/"+name {
		return false
	}
	_, _, _, ok := parseElectionEntry(p[i+1:])
	return ok
}

// parseAny parses a child name of either queue.
func parseAny(child string) (kind qlock.Kind, guid string, seq int64, ok bool) {
	n, ok := parseOwn(child)
	if !ok {
		return 0, "", 0, false
	}
	return n.kind, n.guid, n.seq, true
}

func newGUID() string {
	var b [guidLen / 2]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// entries returns the entries of an entry of kind k's queue among dir's
// children: candidates for a candidate, a semaphore's line for a counted
// entry, lock entries (readers and writers) otherwise. Recognised foreign
// entries of that queue (foreign.go) are among them, with their Client,
// so that they are waited for like distlock's own; anything else there is
// ignored. A child that is distlock's entry costs no more than before.
func entries(dir string, k qlock.Kind, children []string) []qlock.Entry {
	all := make([]qlock.Entry, 0, len(children))
	for _, c := range children {
		kind, _, sq, ok := parseAny(c)
		if ok {
			if queueOf(kind) == queueOf(k) {
				all = append(all, qlock.Entry{Key: dir + "/" + c, Seq: sq, Kind: kind})
			}
			continue
		}
		if e, ok := foreignOf(dir, k, c); ok {
			all = append(all, e)
		}
	}
	return all
}

// childName is the name of node p in its directory: what a term record
// holds.
func childName(p string) string { return p[strings.LastIndexByte(p, '/')+1:] }

// queueOf names the queue an entry of kind k is in: lock entries (0),
// candidates (1) or a semaphore's line (2).
func queueOf(k qlock.Kind) int {
	switch k {
	case qlock.Candidate:
		return 1
	case qlock.Counted:
		return 2
	}
	return 0
}
