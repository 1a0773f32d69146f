package zkq

import (
	"testing"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/qlock"
)

// TestForeignNames: the names the foreign recipes make, as their clients
// write them, and what each is in the lock queue and the election's.
func TestForeignNames(t *testing.T) {
	const (
		uuid = "3f1d2c4b-5a69-4e7f-8a9b-0c1d2e3f4a5b" // Curator's protection id
		hex  = "0123456789abcdef0123456789abcdef"     // kazoo's, zk.Lock's
	)
	type want struct {
		client    string
		lock      qlock.Kind
		inLock    bool
		candidate bool
		seq       int64
	}
	for name, w := range map[string]want{
		// Curator InterProcessMutex, LeaderSelector.
		"lock-0000000007":                 {distlock.ClientCurator, qlock.Exclusive, true, true, 7},
		"_c_" + uuid + "-lock-0000000042": {distlock.ClientCurator, qlock.Exclusive, true, true, 42},
		// Curator InterProcessReadWriteLock.
		"_c_" + uuid + "-__WRIT__0000000003": {distlock.ClientCurator, qlock.Exclusive, true, false, 3},
		"_c_" + uuid + "-__READ__0000000004": {distlock.ClientCurator, qlock.Shared, true, false, 4},
		"__WRIT__0000000005":                 {distlock.ClientCurator, qlock.Exclusive, true, false, 5},
		"__READ__0000000006":                 {distlock.ClientCurator, qlock.Shared, true, false, 6},
		"x__READ__0000000008":                {distlock.ClientCurator, qlock.Shared, true, false, 8},
		// Curator LeaderLatch.
		"latch-0000000001":                 {distlock.ClientCurator, 0, false, true, 1},
		"_c_" + uuid + "-latch-0000000002": {distlock.ClientCurator, 0, false, true, 2},
		// kazoo Lock, WriteLock, Election; ReadLock.
		hex + "__lock__0000000011":  {distlock.ClientKazoo, qlock.Exclusive, true, true, 11},
		hex + "__rlock__0000000012": {distlock.ClientKazoo, qlock.Shared, true, false, 12},
		// go-zookeeper zk.Lock.
		"_c_" + hex + "-lock-0000000013": {distlock.ClientGoZookeeper, qlock.Exclusive, true, true, 13},
		// A wrapped counter orders after the numbers before the wrap.
		"lock--000000005":  {distlock.ClientCurator, qlock.Exclusive, true, true, 1<<32 - 5},
		"lock--2147483648": {distlock.ClientCurator, qlock.Exclusive, true, true, 1 << 31},
		"lock-2147483647":  {distlock.ClientCurator, qlock.Exclusive, true, true, 1<<31 - 1},
	} {
		f, ok := parseForeign(name)
		got := want{f.client, f.lock, f.inLock, f.candidate, f.seq}
		if !ok || got != w {
			t.Errorf("parseForeign(%q) = %+v, %v; want %+v", name, got, ok, w)
		}
		if unknownChild(name) {
			t.Errorf("unknownChild(%q) = true for a recognised entry", name)
		}
	}
	const guid = hex
	for name, unknown := range map[string]bool{
		// distlock's own entries and children.
		"@w-" + guid + "-0000000001":       false,
		"@r-" + guid + "-0000000001":       false,
		"@e-" + guid + "-p3-0000000001":    false,
		"@c-" + guid + "-0000000001":       false,
		"@permits":                         false,
		"@x-" + guid + "-0000000001":       true,  // no entry of distlock's, yet sequential
		"reports":                          false, // a sub-lock's directory
		"ledger.v2":                        false,
		"locks":                            false, // Curator's semaphore: a valid segment
		"leases":                           false,
		hex:                                false, // kazoo's Semaphore lease: as a sub-lock
		"lock-":                            false, // no suffix: a valid segment
		"x-0000000009":                     true,  // an unknown recipe's entry
		"0000000009":                       true,
		"lease-0000000001":                 true, // Curator's semaphore lease, were it here
		"_c_" + uuid + "-lease-0000000001": true,
		"_c_" + hex + "-latch-0000000001":  true, // zk.Lock makes only "lock-"
		"_c_" + uuid + "lock-0000000001":   true, // no '-' after the id
		hex[:31] + "__lock__0000000001":    true, // 31 hex digits
		"kazoo lock":                       true, // no lock-name segment
		"a:b":                              true,
		"lock-00000001":                    false, // 8 digits: no suffix, a valid segment
	} {
		if _, ok := parseForeign(name); ok {
			t.Errorf("parseForeign(%q) recognised it", name)
		}
		if got := unknownChild(name); got != unknown {
			t.Errorf("unknownChild(%q) = %v, want %v", name, got, unknown)
		}
	}
}

// TestForeignEntries: a directory's foreign entries are in the queues
// they belong to, with their kind and client, ordered with distlock's own
// by their sequence numbers; semaphores see none.
func TestForeignEntries(t *testing.T) {
	const (
		dir  = "/distlock/jobs"
		guid = "0123456789abcdef0123456789abcdef"
		uuid = "3f1d2c4b-5a69-4e7f-8a9b-0c1d2e3f4a5b"
	)
	children := []string{
		"@w-" + guid + "-0000000004",
		"@e-" + guid + "-0000000005",
		"@c-" + guid + "-0000000006",
		"_c_" + uuid + "-lock-0000000001",
		"_c_" + uuid + "-__READ__0000000002",
		"_c_" + uuid + "-latch-0000000003",
		"x-0000000007",
		"sub",
		"@permits",
	}
	keys := func(es []qlock.Entry) map[string]qlock.Entry {
		m := map[string]qlock.Entry{}
		for _, e := range es {
			m[e.Key[len(dir)+1:]] = e
		}
		return m
	}
	lock := keys(entries(dir, qlock.Exclusive, children))
	if len(lock) != 3 {
		t.Errorf("lock queue: %v, want the writer, the mutex and the reader", lock)
	}
	if e := lock["_c_"+uuid+"-lock-0000000001"]; e.Kind != qlock.Exclusive || e.Seq != 1 || e.Client != distlock.ClientCurator {
		t.Errorf("Curator's mutex in the lock queue: %+v", e)
	}
	if e := lock["_c_"+uuid+"-__READ__0000000002"]; e.Kind != qlock.Shared || e.Seq != 2 {
		t.Errorf("Curator's reader in the lock queue: %+v", e)
	}
	if e := lock["@w-"+guid+"-0000000004"]; e.Client != "" || e.Seq != 4 {
		t.Errorf("distlock's writer: %+v", e)
	}
	el := keys(entries(dir, qlock.Candidate, children))
	if len(el) != 3 {
		t.Errorf("election: %v, want the candidate, the selector and the latch", el)
	}
	for _, c := range []string{"_c_" + uuid + "-lock-0000000001", "_c_" + uuid + "-latch-0000000003"} {
		if e := el[c]; e.Kind != qlock.Candidate || e.Client != distlock.ClientCurator {
			t.Errorf("%s in the election: %+v", c, e)
		}
	}
	if line := entries(dir, qlock.Counted, children); len(line) != 1 || line[0].Client != "" {
		t.Errorf("semaphore line: %v, want distlock's entry alone", line)
	}
	// A reader waits for the mutex, not for Curator's reader; a writer
	// for the nearest of them.
	q := qlock.NewQueue(qlock.Entry{Key: dir + "/r", Seq: 8, Kind: qlock.Shared}, entries(dir, qlock.Shared, children), false)
	if p, ok := q.Next(); !ok || p.Seq != 4 {
		t.Errorf("a reader waits on %+v, want distlock's writer", p)
	}
	q = qlock.NewQueue(qlock.Entry{Key: dir + "/w", Seq: 3, Kind: qlock.Shared}, entries(dir, qlock.Shared, children), false)
	if p, ok := q.Next(); !ok || p.Seq != 1 || p.Client != distlock.ClientCurator {
		t.Errorf("an older reader waits on %+v, want Curator's mutex", p)
	}
}

// TestForeignInspectQueues: a foreign entry that is both a lock entry
// and a candidate shows where the directory's other entries say it is.
func TestForeignInspectQueues(t *testing.T) {
	const dir = "/d"
	mutex := qlock.Entry{Key: dir + "/lock-0000000001", Seq: 1, Kind: qlock.Exclusive, Client: distlock.ClientCurator}
	asCand := mutex
	asCand.Kind = qlock.Candidate
	own := qlock.Entry{Key: dir + "/@w", Seq: 2, Kind: qlock.Exclusive}
	cand := qlock.Entry{Key: dir + "/@e", Seq: 3, Kind: qlock.Candidate}
	for _, c := range []struct {
		what         string
		locks, cands []qlock.Entry
		wantL, wantC int
	}{
		{"alone", []qlock.Entry{mutex}, []qlock.Entry{asCand}, 1, 0},
		{"with a lock", []qlock.Entry{mutex, own}, []qlock.Entry{asCand}, 2, 0},
		{"with a candidate", []qlock.Entry{mutex}, []qlock.Entry{asCand, cand}, 0, 2},
		{"with both", []qlock.Entry{mutex, own}, []qlock.Entry{asCand, cand}, 2, 2},
	} {
		l, n := 0, 0
		for _, e := range lockAndElection(c.locks, c.cands) {
			if e.Kind == qlock.Candidate {
				n++
			} else {
				l++
			}
		}
		if l != c.wantL || n != c.wantC {
			t.Errorf("%s: %d lock entries and %d candidates, want %d and %d", c.what, l, n, c.wantL, c.wantC)
		}
	}
}
