package etcdq

import (
	"testing"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/qlock"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// TestForeignClassify: every key form under a lock's name + "/": the
// foreign recipes' entries, the library's own and longer names' keys
// (noise), and keys of no known client.
func TestForeignClassify(t *testing.T) {
	const base = "/distlock/db/"
	type want struct {
		class  foreignClass
		client string
		kind   qlock.Kind
		cand   bool
		lease  int64
	}
	known := func(client string, k qlock.Kind, cand bool, lease int64) want {
		return want{foreignKnown, client, k, cand, lease}
	}
	for key, w := range map[string]want{
		base + "694d9b1c2a3f4e01":            known(distlock.ClientEtcd, qlock.Exclusive, true, 0x694d9b1c2a3f4e01),
		base + "1":                           known(distlock.ClientEtcd, qlock.Exclusive, true, 1),
		base + "write/1733400000000000000":   known(distlock.ClientEtcdRecipes, qlock.Exclusive, false, 0),
		base + "read/1733400000000000001":    known(distlock.ClientEtcdRecipes, qlock.Shared, false, 0),
		base + "@w694d_1":                    {class: notForeign},
		base + "sub/@w694d_1":                {class: notForeign},     // lock "db/sub"
		base + "a/b/@r694d_2":                {class: notForeign},     // lock "db/a/b"
		base + "slot-2/@c694d_3":             {class: notForeign},     // a semaphore's slot lock
		base + "sub/694d9b1c2a3f4e01":        {class: notForeign},     // etcd's lock of "db/sub"
		base + "sub/write/17334":             {class: notForeign},     // recipes' lock of "db/sub"
		base + "write/abc":                   {class: notForeign},     // etcd's lock of "db/write"
		base + "694D9B1C":                    {class: foreignUnknown}, // upper-case: no lease
		base + "ffffffffffffffffff":          {class: foreignUnknown}, // no int64
		base + "0":                           {class: foreignUnknown}, // lease 0 is none
		base:                                 {class: foreignUnknown},
		base + "config":                      {class: foreignUnknown},
		base + "write/":                      {class: foreignUnknown},
		base + "read/12x":                    {class: foreignUnknown},
		base + "x y/@w1_1":                   {class: foreignUnknown}, // no valid name before "/@"
		base + "write/1733400000000000000/x": {class: foreignUnknown},
	} {
		f, c := classifyForeign(base, key)
		if c != w.class {
			t.Errorf("classifyForeign(%q) = class %d, want %d", key, c, w.class)
			continue
		}
		if c != foreignKnown {
			continue
		}
		if f.Client != w.client || f.Lock != w.kind || f.Candidate != w.cand || int64(f.Lease) != w.lease {
			t.Errorf("classifyForeign(%q) = %+v, want %+v", key, f, w)
		}
	}
}

// TestForeignRanges: the two ranges leave out exactly the queue's
// directory, and a reader's compare ranges leave out the recipes'
// readers.
func TestForeignRanges(t *testing.T) {
	const base = "/distlock/db/"
	in := func(rs [][2]string, key string) bool {
		for _, r := range rs {
			if r[0] <= key && key < r[1] {
				return true
			}
		}
		return false
	}
	r := foreignRanges(base)
	all := r[:]
	for key, want := range map[string]bool{
		base:               true,
		base + "0abc":      true,
		base + "@w1_1":     false,
		base + "@":         false,
		base + "A":         true,
		base + "write/1":   true,
		base + "zzz":       true,
		"/distlock/db0":    false,
		"/distlock/db":     false,
		"/distlock/dbx/1":  false,
		base + "sub/@e1_1": true, // noise, skipped client-side
	} {
		if got := in(all, key); got != want {
			t.Errorf("%q in foreignRanges = %v, want %v", key, got, want)
		}
	}
	shared := foreignCompareRanges(base, qlock.Shared)
	for key, want := range map[string]bool{
		base + "read/17":  false,
		base + "write/17": true,
		base + "694d":     true,
		base + "readme":   true,
		base + "read0":    true,
	} {
		if got := in(shared, key); got != want {
			t.Errorf("%q in a reader's foreignCompareRanges = %v, want %v", key, got, want)
		}
	}
	cr := candidateRanges(base)
	for key, want := range map[string]bool{base + "694d": true, base + "f1": true, base + "write/1": false, base + "@e1_1": false} {
		if got := in(cr[:], key); got != want {
			t.Errorf("%q in candidateRanges = %v, want %v", key, got, want)
		}
	}
}

// TestForeignMerge: a foreign page cut short by its limit drops from
// the enqueue's view what is older than its oldest key, so that the
// view's floor covers what that read did not see.
func TestForeignMerge(t *testing.T) {
	ent := func(seq int64, c string) qlock.Entry {
		return qlock.Entry{Key: string(rune('a' + seq)), Seq: seq, Kind: qlock.Exclusive, Client: c}
	}
	own := []qlock.Entry{ent(10, "")}
	// No foreign keys: the own read as it was.
	if all, more := mergeForeign(own, false, 10, []foreignPage{{}, {}}); len(all) != 1 || more {
		t.Fatalf("no foreign: %v, %v", all, more)
	}
	// A complete foreign page: merged, nothing more.
	all, more := mergeForeign(own, false, 10, []foreignPage{{entries: []qlock.Entry{ent(5, distlock.ClientEtcd)}, oldest: 5}, {}})
	if len(all) != 2 || more {
		t.Fatalf("complete page: %v, %v", all, more)
	}
	// A page of noise cut short at 60: the own entry at 10 is older
	// than what it saw, so it is left for the read below the floor.
	all, more = mergeForeign(own, false, 10, []foreignPage{{entries: []qlock.Entry{ent(90, distlock.ClientEtcd)}, more: true, oldest: 60}, {}})
	if !more || len(all) != 1 || all[0].Seq != 90 {
		t.Fatalf("cut-short page: %v, %v", all, more)
	}
	q := qlock.NewQueue(ent(100, ""), all, more)
	if e, ok := q.Next(); !ok || e.Seq != 90 {
		t.Fatalf("waits on %v, %v; want the foreign entry 90", e, ok)
	}
	q.Gone(all[0].Key)
	if below, must := q.MustRead(); !must || below != 90 {
		t.Fatalf("MustRead = %d, %v; want a read below 90", below, must)
	}
}

// TestForeignLockPage: a page's foreign entries, its noise skipped.
func TestForeignLockPage(t *testing.T) {
	const base = "/distlock/db/"
	rr := &pb.RangeResponse{More: true, Kvs: []*mvccpb.KeyValue{
		{Key: []byte(base + "read/2"), CreateRevision: 9},
		{Key: []byte(base + "sub/@w1_1"), CreateRevision: 8},
		{Key: []byte(base + "1a2b"), CreateRevision: 7},
	}}
	var s *Session
	p := s.lockPage(base, rr)
	if !p.more || p.oldest != 7 || len(p.entries) != 2 {
		t.Fatalf("page = %+v", p)
	}
	if p.entries[0].Kind != qlock.Shared || p.entries[0].Client != distlock.ClientEtcdRecipes ||
		p.entries[1].Kind != qlock.Exclusive || p.entries[1].Client != distlock.ClientEtcd {
		t.Fatalf("entries = %+v", p.entries)
	}
}
