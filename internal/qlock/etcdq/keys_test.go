package etcdq

import (
	"strings"
	"testing"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/qlock"
)

// TestCandidatePriority: the priorities in candidates' keys as the
// driver writes them, and keys that are no priority candidate's.
func TestCandidatePriority(t *testing.T) {
	for key, want := range map[string]int{
		"/distlock/sched/@e694d9b1c2a3f4e01_1":      0,
		"/distlock/sched/@ep3.694d9b1c2a3f4e01_1":   3,
		"/distlock/sched/@ep-12.694d9b1c2a3f4e01_a": -12,
		"/distlock/sched/@epx.694d_1":               0, // not a priority
	} {
		if got := candidatePriority("/distlock/sched/@", key); got != want {
			t.Errorf("candidatePriority(%q) = %d, want %d", key, got, want)
		}
	}
	if got := candidatePriority("/distlock/a/b/@", "/distlock/a/b/@ep1073741824.694d_1"); got != distlock.MaxPriority {
		t.Errorf("candidatePriority of MaxPriority's key = %d", got)
	}
	for key, want := range map[string]bool{
		"/distlock/sched/@e694d9b1c2a3f4e01_1":         true,
		"/distlock/sched/@ep3.694d9b1c2a3f4e01_1":      true,
		"/distlock/sched/@w694d9b1c2a3f4e01_1":         false,
		"/distlock/sched/x/@e694d9b1c2a3f4e01_1":       false, // lock sched/x's
		"/distlock/@revoke/sched/00000000000000000007": false,
	} {
		if got := CandidateKey("/distlock/", "sched", key); got != want {
			t.Errorf("CandidateKey(%q) = %v, want %v", key, got, want)
		}
	}
}

// TestExclusiveEntryLock: the lock of an exclusive entry's key, and none
// for other keys under the prefix.
func TestExclusiveEntryLock(t *testing.T) {
	for key, want := range map[string]string{
		"/distlock/a/b/@w694d_1":   "a/b",
		"/distlock/a/@w694d_1f":    "a",
		"/distlock/a/@r694d_1":     "",
		"/distlock/a/@e694d_1":     "",
		"/distlock/a/@p0_":         "",
		"/distlock/@revoke/a/0001": "",
		"/other/a/@w694d_1":        "",
	} {
		got, ok := exclusiveEntryLock("/distlock/", key)
		if !ok {
			got = ""
		}
		if got != want {
			t.Errorf("exclusiveEntryLock(%q) = %q, want %q", key, got, want)
		}
	}
}

// TestMovedWriterKey: an RWMutex writer's key in CompatEtcdRecipes is
// under name + "/write/", where the contrib recipes' readers look; the
// driver reads it as its own exclusive entry of that lock, with its
// lease, and as no entry of lock name + "/write" or of any other lock.
func TestMovedWriterKey(t *testing.T) {
	const prefix = "/distlock/"
	dir := QueueDir(prefix, "db")
	w := qlock.Request{Kind: qlock.Exclusive, RW: true, Compat: distlock.CompatEtcdRecipes}
	key := entryKey(dir, w, 0x694d, 0x1f)
	if want := "/distlock/db/write/#w694d_1f"; key != want {
		t.Fatalf("moved writer's key = %q, want %q", key, want)
	}
	// The other entries of the mode, and every entry without it, keep
	// the queue's layout.
	for _, r := range []qlock.Request{
		{Kind: qlock.Shared, RW: true, Compat: distlock.CompatEtcdRecipes},
		{Kind: qlock.Exclusive, RW: true},
		{Kind: qlock.Exclusive, Compat: distlock.CompatEtcd},
		{Kind: qlock.Exclusive, Compat: distlock.CompatEtcdRecipes}, // a Mutex's: no RW
	} {
		if k := entryKey(dir, r, 0x694d, 1); !strings.HasPrefix(k, dir) {
			t.Errorf("entryKey(%+v) = %q, not in the queue %q", r, k, dir)
		}
	}
	if k, ok := entryKind(dir, key); !ok || k != qlock.Exclusive {
		t.Errorf("entryKind(%q) = %v, %v; want Exclusive", key, k, ok)
	}
	if id, ok := leaseOf(key); !ok || id != 0x694d {
		t.Errorf("leaseOf(%q) = %x, %v", key, id, ok)
	}
	if id, ok := leaseOf(dir + "w694d_1"); !ok || id != 0x694d {
		t.Errorf("leaseOf of a queue's writer = %x, %v", id, ok)
	}
	if lock, ok := exclusiveEntryLock(prefix, key); !ok || lock != "db" {
		t.Errorf("exclusiveEntryLock(%q) = %q, %v", key, lock, ok)
	}
	// Lock db's own: in the foreign ranges, with no Client.
	f, c := classifyForeign(foreignBase(prefix, "db"), key)
	if c != foreignKnown || f.Client != "" || f.Lock != qlock.Exclusive || f.Candidate || f.Lease != 0x694d {
		t.Errorf("classifyForeign(db, %q) = %+v, %v", key, f, c)
	}
	if r := foreignRanges(foreignBase(prefix, "db"))[1]; !(r[0] <= key && key < r[1]) {
		t.Errorf("%q is not in db's foreign range %q", key, r)
	}
	seen := false
	for _, r := range foreignCompareRanges(foreignBase(prefix, "db"), qlock.Shared) {
		seen = seen || r[0] <= key && key < r[1]
	}
	if !seen {
		t.Errorf("a reader's compare ranges leave %q out", key)
	}
	// No other lock's: not lock db/write's (its base is db/write/).
	if _, c := classifyForeign(foreignBase(prefix, "db/write"), key); c != notForeign {
		t.Errorf("classifyForeign(db/write, %q) = %v, want notForeign", key, c)
	}
	for _, o := range []string{"db/write", "d"} {
		if _, ok := entryKind(QueueDir(prefix, o), key); ok {
			t.Errorf("entryKind(%s, %q) says an entry", o, key)
		}
	}
	if _, c := classifyForeign(prefix+"a/", prefix+"a/db/write/#w694d_1"); c != notForeign {
		t.Errorf("a longer name's moved writer under a/ = %v, want notForeign", c)
	}
	// No name's own keys start with '#' after "write/": no segment can.
	if distlock.ValidateName("db/write/#w694d_1") == nil || distlock.ValidateName("#w") == nil {
		t.Error("a name segment may start with '#'")
	}
	// Near misses are no moved writer's.
	for _, k := range []string{"write/#r694d_1", "write/#w694d", "write/#wxyz_1", "write/#w694d_", "write/w694d_1"} {
		if _, ok := movedKey(k); ok {
			t.Errorf("movedKey(%q) ok", k)
		}
	}
}
