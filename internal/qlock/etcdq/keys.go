package etcdq

import (
	"strconv"
	"strings"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/qlock"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Entry keys. Lock name N under the session's prefix P keeps its queue
// under P + N + "/@" (no lock-name segment starts with '@', so the entries
// of lock "a" are never mistaken for those of lock "a/b"). Each entry is
// one key: a kind marker, the lease ID in hex, "_", and a counter in hex
// that makes it unique within the lease.
//
// Writers and readers live under different markers, so that a TryLock can
// ask "is there any writer?" with a single prefix compare. An Election's
// candidates have a marker of their own, sorting before both, so that an
// Election and a Mutex (or RWMutex) of the same name are separate queues:
// the lock entries are the key range from the readers' marker to the end
// of the writers' sub-prefix, which holds no candidate, and the candidates
// are the "e" sub-prefix, which holds no lock entry.
var (
	exclusiveMark = string(qlock.Exclusive.Mark())
	sharedMark    = string(qlock.Shared.Mark())
	electionMark  = string(qlock.Candidate.Mark())
	lineMark      = string(qlock.Counted.Mark())
	// slotMark starts a semaphore's slot keys, dir + "p" + slot + "_":
	// one fixed key per slot, so that "create if absent" claims it. 'p'
	// sorts outside the lock entries' range ("r" to "w…") and apart from
	// the line ("c") and the candidates ("e").
	slotMark = "p"
)

// A writer of an RWMutex in distlock.CompatEtcdRecipes keeps its entry
// beside the queue's directory instead, where the contrib recipes'
// readers look for writers (every key under name + "/write"):
//
//	name + "/write/#w" + lease hex + "_" + counter hex
//
// '#' starts no lock-name segment and is no '@', so the key is no entry
// of lock name + "/write" (whose own are under name + "/write/@") nor of
// any longer name, and no foreign client's (the recipes' keys there are
// decimal, etcd's lease hex). Such an entry is the library's own: the
// foreign reads beside the queue (foreign.go), which every lock waiter
// makes, find it, and classifyForeign names it with no Client.
const (
	movedDir  = "write/"
	movedMark = "#"
)

// movesWriter reports whether r's entry is a moved writer's (see
// movedDir).
func movesWriter(r qlock.Request) bool {
	return r.Kind == qlock.Exclusive && r.RW && r.Compat == distlock.CompatEtcdRecipes
}

// entryKey returns the key of r's entry in queue dir: lease id's n-th.
func entryKey(dir string, r qlock.Request, id clientv3.LeaseID, n uint64) string {
	tail := strconv.FormatInt(int64(id), 16) + "_" + strconv.FormatUint(n, 16)
	if movesWriter(r) {
		return baseOfDir(dir) + movedDir + movedMark + exclusiveMark + tail
	}
	return dir + string(r.Kind.Mark()) + priorityTag(r) + tail
}

// movedKey parses rest, a key under a lock's name + "/", as a moved
// writer's entry (movedDir) and returns its lease.
func movedKey(rest string) (clientv3.LeaseID, bool) {
	s, ok := strings.CutPrefix(rest, movedDir+movedMark+exclusiveMark)
	if !ok {
		return 0, false
	}
	lease, n, ok := strings.Cut(s, "_")
	if !ok || !isHex(n) {
		return 0, false
	}
	return leaseHex(lease)
}

// Dir returns the prefix under which lock name keeps its entries.
func (s *Session) Dir(name string) string { return QueueDir(s.prefix, name) }

// QueueDir returns the prefix under which lock name keeps its entries on
// key prefix prefix.
func QueueDir(prefix, name string) string { return prefix + name + "/@" }

// conflictRange returns the key range [key, end) of the entries a waiter
// of kind k must wait for: for a lock, every lock entry for an exclusive
// waiter, writers for a shared one; for an election's candidate, every
// candidate. Lock entries and candidates never conflict.
func conflictRange(dir string, k qlock.Kind) (key, end string) {
	switch k {
	case qlock.Candidate:
		key = dir + electionMark
	case qlock.Counted:
		key = dir + lineMark
	case qlock.Shared:
		key = dir + exclusiveMark
	default:
		// Readers and writers: from "r" to the end of "w…"; "e" sorts
		// before them.
		return dir + sharedMark, clientv3.GetPrefixRangeEnd(dir + exclusiveMark)
	}
	return key, clientv3.GetPrefixRangeEnd(key)
}

// entryKind returns the kind of the entry key in dir; ok is false for a
// key that is not an entry.
func entryKind(dir, key string) (k qlock.Kind, ok bool) {
	rest, found := strings.CutPrefix(key, dir)
	if !found || rest == "" {
		if rest, found := strings.CutPrefix(key, baseOfDir(dir)); found && strings.HasSuffix(dir, "/@") {
			if _, ok := movedKey(rest); ok {
				return qlock.Exclusive, true
			}
		}
		return 0, false
	}
	switch rest[:1] {
	case exclusiveMark:
		k = qlock.Exclusive
	case sharedMark:
		k = qlock.Shared
	case electionMark:
		k = qlock.Candidate
	case lineMark:
		k = qlock.Counted
	default:
		return 0, false
	}
	rest = rest[1:]
	if k == qlock.Candidate {
		if _, tail, ok := cutPriority(rest); ok {
			rest = tail
		}
	}
	lease, n, ok := strings.Cut(rest, "_")
	if !ok || !isHex(lease) || !isHex(n) {
		return 0, false
	}
	return k, true
}

// exclusiveEntryLock returns the lock whose exclusive entry key is, under
// prefix (prefix + NAME + "/@w" + lease + "_" + counter); ok is false for
// any other key under prefix: other kinds of entries, a session's guard,
// revocation records, done-markers, foreign keys.
func exclusiveEntryLock(prefix, key string) (string, bool) {
	rel, ok := strings.CutPrefix(key, prefix)
	if !ok {
		return "", false
	}
	i := strings.LastIndex(rel, "/@")
	if j := strings.LastIndex(rel, "/"+movedDir+movedMark); j > i {
		i = j
	}
	if i < 0 || distlock.ValidateName(rel[:i]) != nil {
		return "", false
	}
	k, ok := entryKind(QueueDir(prefix, rel[:i]), key)
	return rel[:i], ok && k == qlock.Exclusive
}

// CandidateKey reports whether key is the entry of a candidate of
// election name under prefix (and not a lock's, a semaphore's, or no
// entry at all): what a revocation record's Key is for a leader.
func CandidateKey(prefix, name, key string) bool {
	k, ok := entryKind(QueueDir(prefix, name), key)
	return ok && k == qlock.Candidate
}

// A candidate of a priority other than 0 has it in its key, before the
// lease: "e" + "p" + priority in decimal + "." + lease + "_" + counter.
// 'p' is no hex digit, so a key without it is a priority-0 candidate's.

// priorityTag is what r's key has between its kind's mark and its lease.
func priorityTag(r qlock.Request) string {
	if r.Kind != qlock.Candidate || r.Priority == 0 {
		return ""
	}
	return "p" + strconv.Itoa(r.Priority) + "."
}

// cutPriority parses the priority at the start of a candidate key's rest
// (after the kind's mark); ok is false when there is none.
func cutPriority(rest string) (prio int, tail string, ok bool) {
	tag, tail, found := strings.Cut(rest, ".")
	if !found || !strings.HasPrefix(tag, "p") {
		return 0, rest, false
	}
	p, err := strconv.Atoi(tag[1:])
	if err != nil {
		return 0, rest, false
	}
	return p, tail, true
}

// candidatePriority returns the priority in candidate key's name (dir is
// its election's).
func candidatePriority(dir, key string) int {
	p, _, _ := cutPriority(strings.TrimPrefix(key, dir+electionMark))
	return p
}

func isHex(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// queueKind is entryKind for a key read from a queue's range, which holds
// only entries unless someone else wrote there: such a key is waited for
// like an entry of its range, as TryLock's compare counts it too.
func queueKind(dir, key string) qlock.Kind {
	if k, ok := entryKind(dir, key); ok {
		return k
	}
	switch {
	case strings.HasPrefix(key, dir+sharedMark):
		return qlock.Shared
	case strings.HasPrefix(key, dir+electionMark):
		return qlock.Candidate
	case strings.HasPrefix(key, dir+lineMark):
		return qlock.Counted
	}
	return qlock.Exclusive
}

// slotPrefix returns the prefix of semaphore dir's slot keys.
func slotPrefix(dir string) string { return dir + slotMark }

// slotKey returns the key of slot i of semaphore dir. It ends in '_', so
// that its follower (followPrefix) watches this one key.
func slotKey(dir string, i int) string { return dir + slotMark + strconv.Itoa(i) + "_" }

// parseSlot returns the slot of a slot key of dir.
func parseSlot(dir, key string) (int, bool) {
	rest, ok := strings.CutPrefix(key, dir+slotMark)
	if !ok {
		return 0, false
	}
	rest, ok = strings.CutSuffix(rest, "_")
	if !ok {
		return 0, false
	}
	i, err := strconv.Atoi(rest)
	return i, err == nil && i >= 0 && strconv.Itoa(i) == rest
}
