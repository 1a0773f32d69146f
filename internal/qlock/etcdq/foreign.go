package etcdq

import (
	"context"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/qlock"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Foreign entries. etcd's own lock and election (the concurrency
// package's Mutex and Election, the v3lock and v3election services,
// etcdctl lock and elect) put one key per lease under the lock's name,
// name + "/" + the lease ID in hex; the contrib recipes' RWMutex puts
// name + "/write/<nanos>" and name + "/read/<nanos>". Both order their
// waiters by create revision, as this library does, so their keys and
// its entries make one queue: a waiter of either waits for every older
// conflicting key of both. The keys live beside the queue's own
// directory (name + "/@"), in the two ranges of name + "/" that leave it
// out (foreignRanges). Those ranges also hold the keys of longer lock
// names ("name/sub"), which are no entries of name's and are skipped; a
// key that is neither is reported (ClientUnknown) and not waited for.

// foreignClass says what a key under a lock's name + "/" is.
type foreignClass int

const (
	// notForeign is one of the library's own keys, or one of a longer
	// lock name's (its own, or a foreign client's): noise for this lock.
	notForeign foreignClass = iota
	// foreignKnown is an entry of a recipe the library knows.
	foreignKnown
	// foreignUnknown is a key no recipe the library knows made.
	foreignUnknown
)

// foreignKey is what a recognised foreign key is.
type foreignKey struct {
	// Client is the recipe's client (distlock.ClientEtcd, ...); "" for
	// the library's own writer moved beside the queue (movedDir).
	Client string
	// Lock is its kind in the lock's queue (Exclusive, Shared).
	Lock qlock.Kind
	// Candidate says it is a candidate in the election's queue too:
	// etcd's Election makes the same key as its Mutex.
	Candidate bool
	// Lease is the lease the key's name gives (ClientEtcd), 0 if none.
	Lease clientv3.LeaseID
}

// classifyForeign tells what key, under base (a lock's name + "/"), is.
func classifyForeign(base, key string) (foreignKey, foreignClass) {
	rest, ok := strings.CutPrefix(key, base)
	if !ok || strings.HasPrefix(rest, "@") || strings.HasPrefix(rest, movedMark) {
		// The queue's own; or, under lock name + "/write/", a writer
		// of lock name's, moved there (keys.go).
		return foreignKey{}, notForeign
	}
	if id, ok := movedKey(rest); ok {
		// The library's own writer, moved beside the queue: no Client.
		return foreignKey{Lock: qlock.Exclusive, Lease: id}, foreignKnown
	}
	if id, ok := leaseHex(rest); ok {
		return foreignKey{Client: distlock.ClientEtcd, Lock: qlock.Exclusive, Candidate: true, Lease: id}, foreignKnown
	}
	if k, ok := recipesKey(rest); ok {
		return foreignKey{Client: distlock.ClientEtcdRecipes, Lock: k}, foreignKnown
	}
	// A longer lock name's key: its queue's (sub + "/@..."), or a foreign
	// client's entry of that name.
	if i := strings.Index(rest, "/@"); i > 0 && distlock.ValidateName(rest[:i]) == nil {
		return foreignKey{}, notForeign
	}
	if i := strings.Index(rest, "/"+movedDir+movedMark); i > 0 && distlock.ValidateName(rest[:i]) == nil {
		if _, ok := movedKey(rest[i+1:]); ok {
			return foreignKey{}, notForeign
		}
	}
	if i := strings.LastIndex(rest, "/"); i > 0 {
		sub, last := rest[:i], rest[i+1:]
		if _, ok := leaseHex(last); ok && distlock.ValidateName(sub) == nil {
			return foreignKey{}, notForeign
		}
		if j := strings.LastIndex(sub, "/"); j > 0 {
			if _, ok := recipesKey(rest[j+1:]); ok && distlock.ValidateName(sub[:j]) == nil {
				return foreignKey{}, notForeign
			}
		}
	}
	return foreignKey{}, foreignUnknown
}

// leaseHex parses a lease ID in lowercase hex, as etcd's recipes write it.
func leaseHex(s string) (clientv3.LeaseID, bool) {
	if !isHex(s) {
		return 0, false
	}
	id, err := strconv.ParseInt(s, 16, 64)
	if err != nil || id <= 0 {
		return 0, false
	}
	return clientv3.LeaseID(id), true
}

// recipesKey parses the rest of a contrib RWMutex key: "write/" or
// "read/" and a decimal number.
func recipesKey(rest string) (qlock.Kind, bool) {
	var k qlock.Kind
	var n string
	if s, ok := strings.CutPrefix(rest, "write/"); ok {
		k, n = qlock.Exclusive, s
	} else if s, ok := strings.CutPrefix(rest, "read/"); ok {
		k, n = qlock.Shared, s
	} else {
		return 0, false
	}
	if n == "" {
		return 0, false
	}
	for _, c := range n {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	return k, true
}

// foreignBase returns the key prefix of lock name under prefix that
// foreign clients share with it: name + "/".
func foreignBase(prefix, name string) string { return prefix + name + "/" }

// baseOfDir returns foreignBase of queue directory dir (QueueDir).
func baseOfDir(dir string) string { return strings.TrimSuffix(dir, "@") }

// foreignRanges returns the two key ranges of base (a lock's name + "/")
// that leave out its queue's directory (base + "@"): where foreign keys
// are. 'A' is '@' + 1.
func foreignRanges(base string) [2][2]string {
	return [2][2]string{{base, base + "@"}, {base + "A", clientv3.GetPrefixRangeEnd(base)}}
}

// foreignCompareRanges returns the ranges that hold the foreign keys a
// waiter of kind k conflicts with, and perhaps others (noise): a reader's
// leave the recipes' readers out.
func foreignCompareRanges(base string, k qlock.Kind) [][2]string {
	r := foreignRanges(base)
	if k != qlock.Shared {
		return r[:]
	}
	return [][2]string{r[0], {base + "A", base + "read/"}, {base + "read0", r[1][1]}}
}

// foreignLimit is how many keys one read of a foreign range takes: a few,
// so that a page of a longer lock name's keys rarely hides an entry,
// while a queue without foreign keys costs nothing more.
const foreignLimit = 4

// foreignsApply reports whether a waiter of kind k waits for foreign lock
// entries: lock waiters do; candidates have ElectionState.Foreign, a
// semaphore's entries none.
func foreignsApply(k qlock.Kind) bool { return k == qlock.Exclusive || k == qlock.Shared }

// foreignGet returns the read of foreign range r, keys-only, newest
// first, below maxRev if it is set.
func foreignGet(r [2]string, maxRev int64, opts ...clientv3.OpOption) clientv3.Op {
	o := append([]clientv3.OpOption{clientv3.WithRange(r[1]), clientv3.WithKeysOnly(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend), clientv3.WithLimit(foreignLimit)}, opts...)
	if maxRev > 0 {
		o = append(o, clientv3.WithMaxCreateRev(maxRev))
	}
	return clientv3.OpGet(r[0], o...)
}

// foreignGets returns the reads of base's two foreign ranges (foreignGet).
func foreignGets(base string, maxRev int64, opts ...clientv3.OpOption) []clientv3.Op {
	r := foreignRanges(base)
	return []clientv3.Op{foreignGet(r[0], maxRev, opts...), foreignGet(r[1], maxRev, opts...)}
}

// foreignPage is what one read of a foreign range showed.
type foreignPage struct {
	entries []qlock.Entry // recognised lock entries, newest first
	more    bool          // older keys exist in the range
	oldest  int64         // the oldest key's create revision, 0 if none
}

// lockPage reads rr, a page of base's foreign range newest first, as lock
// entries; unknown keys are logged once per lock (warnUnknown).
func (s *Session) lockPage(base string, rr *pb.RangeResponse) foreignPage {
	var p foreignPage
	if rr == nil {
		return p
	}
	p.more = rr.More
	for _, kv := range rr.Kvs {
		p.oldest = kv.CreateRevision
		key := string(kv.Key)
		f, c := classifyForeign(base, key)
		switch c {
		case foreignKnown:
			p.entries = append(p.entries, qlock.Entry{Key: key, Seq: kv.CreateRevision, Kind: f.Lock, Client: f.Client})
		case foreignUnknown:
			s.warnUnknown(base, key)
		}
	}
	return p
}

// warnUnknown logs, once per lock per session, a key under lock base
// that no recipe the library knows made.
func (s *Session) warnUnknown(base, key string) {
	if s == nil {
		return
	}
	if _, seen := s.unknownWarned.LoadOrStore(base, true); !seen {
		s.Log().Warn("etcdlock: a key of no known client is in the lock's queue; it is not waited for",
			"lock", strings.TrimSuffix(strings.TrimPrefix(base, s.prefix), "/"), "key", key)
	}
}

// mergeForeign merges the foreign pages of a lock's enqueue into the
// entries its own range read showed (own, with ownMore and ownOldest
// from that read), for qlock.NewQueue. A read cut short by its limit
// knows nothing older than its oldest key; the merged view keeps only
// the entries newer than every cut-off read's oldest key, so that what
// none of them knows is older than all the view keeps (the view's
// floor): whatever was dropped, a read below the floor finds again.
func mergeForeign(own []qlock.Entry, ownMore bool, ownOldest int64, pages []foreignPage) ([]qlock.Entry, bool) {
	var bound int64
	more := ownMore
	if ownMore {
		bound = ownOldest
	}
	n := 0
	for _, p := range pages {
		n += len(p.entries)
		if p.more {
			more = true
			bound = max(bound, p.oldest)
		}
	}
	if n == 0 && !more {
		return own, false
	}
	all := make([]qlock.Entry, 0, len(own)+n)
	keep := func(es []qlock.Entry) {
		for _, e := range es {
			if e.Seq >= bound {
				all = append(all, e)
			}
		}
	}
	keep(own)
	for _, p := range pages {
		keep(p.entries)
	}
	return all, more
}

// nearestForeign returns the newest recognised foreign entry of base
// that conflicts with a waiter of kind k and is older than below, given
// the first pages read (rrs, one per range of ranges, newest first); a
// page that was cut short without one is followed by reads of the next
// older keys, at rev. ok is false when there is none, or when a read
// failed (err).
func (s *Session) nearestForeign(ctx context.Context, base string, ranges [][2]string, k qlock.Kind, rrs []*pb.RangeResponse, below, rev int64) (qlock.Entry, bool, error) {
	var best qlock.Entry
	found := false
	for i, rr := range rrs {
		for rr != nil {
			p := s.lockPage(base, rr)
			hit := false
			for _, e := range p.entries {
				if e.Seq < below && qlock.Conflicts(k, e.Kind) {
					if !found || e.Seq > best.Seq {
						best, found = e, true
					}
					hit = true
					break
				}
			}
			if hit || !p.more || p.oldest <= 1 {
				break
			}
			resp, err := s.client.Get(ctx, ranges[i][0], opOptions(ranges[i], p.oldest-1, rev)...)
			if err != nil {
				return qlock.Entry{}, false, err
			}
			rr = (*pb.RangeResponse)(resp)
		}
	}
	return best, found, nil
}

// opOptions is foreignGet's options for a Get at revision rev.
func opOptions(r [2]string, maxRev, rev int64) []clientv3.OpOption {
	return []clientv3.OpOption{clientv3.WithRange(r[1]), clientv3.WithKeysOnly(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend), clientv3.WithLimit(foreignLimit),
		clientv3.WithMaxCreateRev(maxRev), clientv3.WithRev(rev)}
}

// A writer conflicts with every lock entry under its name, its own
// queue's and the foreign ones alike: it reads them all with one range,
// base itself (wideGet), where a reader reads its own range and the two
// foreign ones. That keeps a multi-lock's Txn, up to distlock's
// MaxMultiNames writers, within etcd's operations per Txn.

// foreignOps returns the reads of the foreign keys of base that a Try of
// kind k makes beside its own range's: newest first, keys-only.
func foreignOps(base string, k qlock.Kind) []clientv3.Op {
	if k == qlock.Exclusive {
		return []clientv3.Op{wideGet(base, 0, 0)}
	}
	return foreignGets(base, 0)
}

// foreignReadRanges returns the ranges foreignOps reads.
func foreignReadRanges(base string, k qlock.Kind) [][2]string {
	if k == qlock.Exclusive {
		return [][2]string{{base, clientv3.GetPrefixRangeEnd(base)}}
	}
	r := foreignRanges(base)
	return r[:]
}

// foreignCmps returns the compares that hold only while none of the
// foreign keys of base that a waiter of kind k conflicts with exists (and
// fail too for some other keys: noise).
func foreignCmps(base string, k qlock.Kind) []clientv3.Cmp {
	if k == qlock.Exclusive {
		return []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(base), "=", 0).WithPrefix()}
	}
	var out []clientv3.Cmp
	for _, fr := range foreignCompareRanges(base, k) {
		out = append(out, clientv3.Compare(clientv3.CreateRevision(fr[0]), "=", 0).WithRange(fr[1]))
	}
	return out
}

// widePage reads rr, a wideGet page of queue dir's base, as a writer's
// enqueue sees it: its own queue's lock entries (those of the conflict
// range) and the foreign ones, newest first, the rest skipped.
func (s *Session) widePage(dir string, rr *pb.RangeResponse) foreignPage {
	base := baseOfDir(dir)
	ckey, cend := conflictRange(dir, qlock.Exclusive)
	p := foreignPage{more: rr.More}
	for _, kv := range rr.Kvs {
		key := string(kv.Key)
		p.oldest = kv.CreateRevision
		if ckey <= key && key < cend {
			p.entries = append(p.entries, qlock.Entry{Key: key, Seq: kv.CreateRevision, Kind: queueKind(dir, key)})
			continue
		}
		switch f, c := classifyForeign(base, key); c {
		case foreignKnown:
			p.entries = append(p.entries, qlock.Entry{Key: key, Seq: kv.CreateRevision, Kind: f.Lock, Client: f.Client})
		case foreignUnknown:
			s.warnUnknown(base, key)
		}
	}
	return p
}

// foreignQueueEntries returns the foreign keys of lock name's base among
// kvs (any order) as an inspection lists them, oldest first: recognised
// lock entries (lock), candidates (cand), keys of no known client
// (unknown).
func foreignQueueEntries(name, base string, kvs []*mvccpb.KeyValue) (lock, cand []distlock.QueueEntry, lockKinds []qlock.Kind, unknown []distlock.QueueEntry) {
	for _, kv := range kvs {
		key := string(kv.Key)
		f, c := classifyForeign(base, key)
		if c == notForeign {
			continue
		}
		e := distlock.QueueEntry{Key: key, Owner: strconv.FormatInt(kv.Lease, 16),
			Token: distlock.Token{Name: name, Seq: kv.CreateRevision, Owner: uint64(kv.Lease)}}
		if utf8.Valid(kv.Value) {
			e.Holder = string(kv.Value)
		}
		if c == foreignUnknown {
			e.Client, e.Kind = distlock.ClientUnknown, distlock.Exclusive
			unknown = append(unknown, e)
			continue
		}
		e.Client, e.Kind = f.Client, f.Lock.View()
		lock, lockKinds = append(lock, e), append(lockKinds, f.Lock)
		if f.Candidate {
			ce := e
			ce.Kind = distlock.Candidate
			cand = append(cand, ce)
		}
	}
	return lock, cand, lockKinds, unknown
}

// wideGet reads the newest keys of all of base (a lock's name + "/")
// created at maxRev or before, keys-only, at rev if it is set: for a
// writer, whom every lock entry there conflicts with, its own and the
// foreign ones.
func wideGet(base string, maxRev, rev int64, opts ...clientv3.OpOption) clientv3.Op {
	o := append([]clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithKeysOnly(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend), clientv3.WithLimit(foreignLimit),
		clientv3.WithMaxCreateRev(maxRev)}, opts...)
	if rev > 0 {
		o = append(o, clientv3.WithRev(rev))
	}
	return clientv3.OpGet(base, o...)
}

// nearestWide returns the newest entry a writer of queue dir conflicts
// with in rr (a wideGet page at rev), reading on at rev while a page cut
// short holds none.
func (s *Session) nearestWide(ctx context.Context, dir string, rr *pb.RangeResponse, rev int64) (qlock.Entry, bool, error) {
	base := baseOfDir(dir)
	ckey, cend := conflictRange(dir, qlock.Exclusive)
	for {
		var oldest int64
		for _, kv := range rr.Kvs {
			key := string(kv.Key)
			oldest = kv.CreateRevision
			if ckey <= key && key < cend {
				return qlock.Entry{Key: key, Seq: kv.CreateRevision, Kind: queueKind(dir, key)}, true, nil
			}
			switch f, c := classifyForeign(base, key); c {
			case foreignKnown:
				return qlock.Entry{Key: key, Seq: kv.CreateRevision, Kind: f.Lock, Client: f.Client}, true, nil
			case foreignUnknown:
				s.warnUnknown(base, key)
			}
		}
		if !rr.More || oldest <= 1 {
			return qlock.Entry{}, false, nil
		}
		resp, err := s.client.Do(ctx, wideGet(base, oldest-1, rev))
		if err != nil {
			return qlock.Entry{}, false, err
		}
		rr = (*pb.RangeResponse)(resp.Get())
	}
}
