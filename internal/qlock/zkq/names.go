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

// entryBase returns the name, without the sequence suffix the server
// appends, of a new entry of kind k: "@w-<guid>-", or for a candidate of
// priority prio other than 0 "@e-<guid>-p<prio>-".
func entryBase(k qlock.Kind, guid string, prio int) string {
	b := "@" + string(k.Mark()) + "-" + guid + "-"
	if k == qlock.Candidate && prio != 0 {
		b += "p" + strconv.Itoa(prio) + "-"
	}
	return b
}

// parseEntry parses a lock entry's child name "@<kind>-<guid>-<seq>"
// (kind "w" or "r", or "c" for a semaphore's line). ok is false for
// anything else: other clients' znodes are foreign.go's.
func parseEntry(child string) (kind qlock.Kind, guid string, seq int64, ok bool) {
	const head = 3 // "@w-"
	if len(child) < head+guidLen+2 || child[0] != '@' || child[2] != '-' || child[head+guidLen] != '-' {
		return 0, "", 0, false
	}
	switch child[1] {
	case exclusiveMark:
		kind = qlock.Exclusive
	case sharedMark:
		kind = qlock.Shared
	case lineMark:
		kind = qlock.Counted
	default:
		return 0, "", 0, false
	}
	guid = child[head : head+guidLen]
	for _, c := range guid {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return 0, "", 0, false
		}
	}
	num := child[head+guidLen+1:]
	for _, c := range num {
		if c < '0' || c > '9' {
			return 0, "", 0, false
		}
	}
	seq, err := strconv.ParseInt(num, 10, 64)
	if err != nil || num == "" {
		return 0, "", 0, false
	}
	return kind, guid, seq, true
}

// parseElectionEntry parses an Election's child name, "@e-<guid>-<seq>"
// (priority 0) or "@e-<guid>-p<prio>-<seq>". Only the canonical decimal
// form of a priority in range is accepted, so that one candidate has one
// name.
func parseElectionEntry(child string) (guid string, prio int, seq int64, ok bool) {
	const head = 3 + guidLen + 1 // "@e-<guid>-"
	if len(child) < head || child[0] != '@' || child[1] != electionMark {
		return "", 0, 0, false
	}
	rest := child[head:]
	if rest != "" && rest[0] == 'p' {
		num, tail, found := strings.Cut(rest[1:], "-")
		if num == "" { // a negative priority: its sign is the first '-'
			num, tail, found = strings.Cut(tail, "-")
			num = "-" + num
		}
		p, err := strconv.Atoi(num)
		if !found || err != nil || p == 0 || p > distlock.MaxPriority || p < -distlock.MaxPriority || strconv.Itoa(p) != num {
			return "", 0, 0, false
		}
		prio, rest = p, tail
	}
	_, guid, seq, ok = parseEntry("@" + string(exclusiveMark) + child[2:head] + rest)
	if !ok {
		return "", 0, 0, false
	}
	return guid, prio, seq, true
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
	if g, _, sq, ok := parseElectionEntry(child); ok {
		return qlock.Candidate, g, sq, true
	}
	return parseEntry(child)
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
