package zkq

import (
	"path"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/qlock"
)

// TestElectionEntryPriority: the priorities in candidates' names as the
// driver writes them, and names that are no candidate's.
func TestElectionEntryPriority(t *testing.T) {
	const guid = "0123456789abcdef0123456789abcdef"
	for key, want := range map[string]int{
		"/distlock/sched/@e-" + guid + "-0000000007":      0,
		"/distlock/sched/@e-" + guid + "-p3-0000000007":   3,
		"/distlock/sched/@e-" + guid + "-p-12-0000000007": -12,
	} {
		_, got, _, ok := parseElectionEntry(path.Base(key))
		if !ok || got != want {
			t.Errorf("parseElectionEntry(%q) = %d, %v; want %d", key, got, ok, want)
		}
		if !CandidateNode("/distlock", "sched", key) {
			t.Errorf("CandidateNode(%q) = false", key)
		}
	}
	for _, key := range []string{
		"/distlock/sched/@w-" + guid + "-0000000007",
		"/distlock/sched/x/@e-" + guid + "-0000000007", // election sched/x's
		"/distlock/@revoke/sched/00000000000000000007",
	} {
		if CandidateNode("/distlock", "sched", key) {
			t.Errorf("CandidateNode(%q) = true", key)
		}
	}
}

// compatCase is one entry's name in one mode, as the driver makes it.
type compatCase struct {
	mode distlock.Compat
	kind qlock.Kind
	rw   bool
	want string // the base, after "@<kind>-<guid>"
}

var compatCases = []compatCase{
	{"", qlock.Exclusive, false, "-"},
	{"", qlock.Shared, true, "-"},
	{"", qlock.Candidate, false, "-"},
	{"", qlock.Counted, false, "-"},
	{distlock.CompatCurator, qlock.Exclusive, false, "-lock-"},
	{distlock.CompatGoZookeeper, qlock.Exclusive, false, "-lock-"},
	{distlock.CompatCurator, qlock.Exclusive, true, "-__WRIT__"},
	{distlock.CompatCurator, qlock.Shared, true, "-__READ__"},
	{distlock.CompatCurator, qlock.Candidate, false, "-lock-"},
	{distlock.CompatCuratorLatch, qlock.Candidate, false, "-latch-"},
	{distlock.CompatKazoo, qlock.Exclusive, false, "__lock__"},
	{distlock.CompatKazoo, qlock.Exclusive, true, "__lock__"},
	{distlock.CompatKazoo, qlock.Shared, true, "__rlock__"},
	{distlock.CompatKazoo, qlock.Candidate, false, "__lock__"},
	// A semaphore's line has no mode (the engine refuses one).
	{distlock.CompatCurator, qlock.Counted, false, "-"},
}

// TestCompatNames: every mode's names round-trip as distlock's own, of
// their kind and in their queue only, and the foreign classifier never
// takes one.
func TestCompatNames(t *testing.T) {
	const guid = "0123456789abcdef0123456789abcdef"
	for _, c := range compatCases {
		base := entryBase(c.kind, guid, 0, c.mode, c.rw)
		if want := "@" + string(c.kind.Mark()) + "-" + guid + c.want; base != want {
			t.Errorf("entryBase(%v, %q, rw %v) = %q; want %q", c.kind, c.mode, c.rw, base, want)
		}
		child := base + "0000000042"
		k, g, seq, ok := parseAny(child)
		if !ok || k != c.kind || g != guid || seq != 42 {
			t.Errorf("parseAny(%q) = %v, %q, %d, %v", child, k, g, seq, ok)
		}
		_, _, _, lockOK := parseEntry(child)
		_, prio, _, elOK := parseElectionEntry(child)
		if lockOK == (c.kind == qlock.Candidate) || elOK != (c.kind == qlock.Candidate) || prio != 0 {
			t.Errorf("%q: parseEntry ok %v, parseElectionEntry ok %v (priority %d)", child, lockOK, elOK, prio)
		}
		if _, ok := parseForeign(child); ok {
			t.Errorf("parseForeign(%q) takes distlock's entry", child)
		}
		if unknownChild(child) {
			t.Errorf("unknownChild(%q) = true", child)
		}
		for _, k := range []qlock.Kind{qlock.Exclusive, qlock.Candidate, qlock.Counted} {
			es := entries("/d", k, []string{child})
			if want := queueOf(k) == queueOf(c.kind); len(es) != map[bool]int{false: 0, true: 1}[want] || len(es) == 1 && es[0].Client != "" {
				t.Errorf("entries(%v, %q) = %+v", k, child, es)
			}
		}
		// Priorities never appear in a compatibility name.
		if c.mode != "" && c.kind == qlock.Candidate {
			if b := entryBase(c.kind, guid, 7, c.mode, false); b != base {
				t.Errorf("entryBase with priority in mode %q = %q; want %q", c.mode, b, base)
			}
		}
	}
	// A marker of another kind, or a malformed suffix, makes no entry.
	for _, child := range []string{
		"@w-" + guid + "-__READ__0000000001",
		"@r-" + guid + "-lock-0000000001",
		"@r-" + guid + "__lock__0000000001",
		"@w-" + guid + "-latch-0000000001",
		"@e-" + guid + "-__WRIT__0000000001",
		"@c-" + guid + "-lock-0000000001",
		"@w-" + guid + "-lock-",
		"@w-" + guid + "-lock-00x1",
		"@w-" + guid + "__lock_0000000001",
		"@e-" + guid + "-p3-lock-0000000001",
	} {
		if _, _, _, ok := parseAny(child); ok {
			t.Errorf("parseAny(%q) = ok", child)
		}
	}
}

// The foreign recipes' rules, re-implemented from their sources: what
// each takes from a child's name to order it, and which children it
// waits for.

// curatorFixForSorting is Curator's StandardLockInternalsDriver
// fixForSorting: what follows the last lockName, or the whole name.
func curatorFixForSorting(s, lockName string) string {
	if i := strings.LastIndex(s, lockName); i >= 0 {
		return s[i+len(lockName):]
	}
	return s
}

// curatorRWSort is InterProcessReadWriteLock's sort key: both markers
// stripped.
func curatorRWSort(s string) string {
	return curatorFixForSorting(curatorFixForSorting(s, "__READ__"), "__WRIT__")
}

var (
	kazooContenders     = regexp.MustCompile(`(?:__lock__|__rlock__)(-?\d{10})$`)
	kazooReadContenders = regexp.MustCompile(`(?:__lock__)(-?\d{10})$`)
)

// zkParseSeq is go-zookeeper v1.0.4's parseSeq.
func zkParseSeq(p string) (int, error) {
	parts := strings.Split(p, "lock-")
	if len(parts) == 1 {
		parts = strings.Split(p, "__")
	}
	return strconv.Atoi(parts[len(parts)-1])
}

// TestCompatNamesForeignRules: by each foreign recipe's rule, distlock's
// entry in that recipe's mode orders by its sequence number, so that a
// younger foreign entry waits for it and an older one is waited for.
func TestCompatNamesForeignRules(t *testing.T) {
	const guid = "0123456789abcdef0123456789abcdef"
	name := func(m distlock.Compat, k qlock.Kind, rw bool, seq string) string {
		return entryBase(k, guid, 0, m, rw) + seq
	}
	const older, mine, younger = "0000000004", "0000000005", "0000000006"
	// Curator's InterProcessMutex and LeaderSelector ("lock-"), LeaderLatch
	// ("latch-").
	for _, c := range []struct {
		m        distlock.Compat
		k        qlock.Kind
		lockName string
	}{
		{distlock.CompatCurator, qlock.Exclusive, "lock-"},
		{distlock.CompatGoZookeeper, qlock.Exclusive, "lock-"},
		{distlock.CompatCurator, qlock.Candidate, "lock-"},
		{distlock.CompatCuratorLatch, qlock.Candidate, "latch-"},
	} {
		d := curatorFixForSorting(name(c.m, c.k, false, mine), c.lockName)
		if d != mine {
			t.Errorf("%q %v: Curator sorts it as %q", c.m, c.k, d)
		}
		if !(curatorFixForSorting("_c_"+uuid+"-"+c.lockName+older, c.lockName) < d && d < curatorFixForSorting("_c_"+uuid+"-"+c.lockName+younger, c.lockName)) {
			t.Errorf("%q %v: not between Curator's older and younger entries", c.m, c.k)
		}
	}
	// Curator's InterProcessReadWriteLock: a reader holds if no child
	// containing "__WRIT__" sorts before it; a writer waits for all.
	w, r := name(distlock.CompatCurator, qlock.Exclusive, true, mine), name(distlock.CompatCurator, qlock.Shared, true, mine)
	if !strings.Contains(w, "__WRIT__") || strings.Contains(r, "__WRIT__") || curatorRWSort(w) != mine || curatorRWSort(r) != mine {
		t.Errorf("Curator's read-write lock takes %q as %q, %q as %q", w, curatorRWSort(w), r, curatorRWSort(r))
	}
	// kazoo: Lock and WriteLock wait for both, ReadLock for "__lock__".
	for _, c := range []struct {
		k          qlock.Kind
		rw         bool
		lock, read bool // a kazoo Lock, a kazoo ReadLock waits for it
	}{
		{qlock.Exclusive, false, true, true},
		{qlock.Exclusive, true, true, true},
		{qlock.Shared, true, true, false},
		{qlock.Candidate, false, true, true},
	} {
		n := name(distlock.CompatKazoo, c.k, c.rw, mine)
		m := kazooContenders.FindStringSubmatch(n)
		if (m != nil) != c.lock || m != nil && m[1] != mine {
			t.Errorf("kazoo's Lock takes %q as %v", n, m)
		}
		if m := kazooReadContenders.FindStringSubmatch(n); (m != nil) != c.read {
			t.Errorf("kazoo's ReadLock takes %q as %v", n, m)
		}
	}
	// zk.Lock parses every child; in CompatGoZookeeper and CompatCurator
	// (a Mutex's) distlock's parse to their sequence number.
	for _, m := range []distlock.Compat{distlock.CompatGoZookeeper, distlock.CompatCurator} {
		n := name(m, qlock.Exclusive, false, mine)
		if seq, err := zkParseSeq(n); err != nil || seq != 5 {
			t.Errorf("zk.Lock parses %q as %d, %v", n, seq, err)
		}
	}
	if _, err := zkParseSeq(name("", qlock.Exclusive, false, mine)); err == nil {
		t.Errorf("zk.Lock parses a name of no mode (the caveat zklock's doc states is gone)")
	}
}

const uuid = "3f1d2c4b-5a69-4e7f-8a9b-0c1d2e3f4a5b"
