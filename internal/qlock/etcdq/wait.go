package etcdq

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/qlock"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// WaitGone waits until entry p is gone, with a watch from the current
// revision (qlock.Driver). It watches p alone: when p goes while older
// entries may be left (the view still holds some, or left some out), the
// engine reads which are (SurvivorsAll) — one read, where following the next
// older entry too would cost a watch create, a cancel and an event more
// for every handoff of a drained queue. The revision at which p was seen
// gone is recorded for ConfirmAll.
//
// How p went (released) costs a request only when the session has a
// lock-delay (see howGone).
func (s *Session) WaitGone(ctx context.Context, n *qlock.Node, _ *qlock.Queue, p qlock.Entry) (released bool, err error) {
	rev, err := s.waitDeleted(ctx, p.Key, p.Seq, n.Seq)
	if err != nil {
		return false, err
	}
	cleared(n, rev)
	if s.LockDelay() <= 0 {
		return true, nil
	}
	switch p.Client {
	case "":
		return s.howGone(ctx, p.Key, rev)
	case distlock.ClientEtcd:
		// No release mark; the key's name is its lease.
		if f, c := classifyForeign(p.Key[:strings.LastIndex(p.Key, "/")+1], p.Key); c == foreignKnown && f.Lease != 0 {
			return s.leaseIDAlive(ctx, p.Key, f.Lease)
		}
	}
	// A recipes RWMutex key's name tells no lease, and the waiter does
	// not read its value: its going counts as not released, and the
	// lock-delay applies.
	return false, nil
}

// The release mark. A session with a lock-delay puts, in every lock
// entry's release Txn (beside the delete, one round trip as before), the
// key "<prefix>@released/<lease hex>" bound to its lease: one key per
// session, overwritten by each release. A waiter that sees its
// predecessor's key deleted at revision rev reads that key of the
// predecessor's lease at rev: its mod revision rev says the delete was
// that Txn, a release. Without the mark (a holder without a lock-delay, a
// lease revoke or expiry, a waiter giving up, a foreign delete) the
// waiter asks for the lease (leaseAlive). The mark tells a release from a
// revoke that came right after it (Unlock then Close), which the lease
// alone cannot: by the time the waiter asks, the lease is gone either way.

// releaseMarkKey returns the release mark of lease id.
func releaseMarkKey(prefix string, id clientv3.LeaseID) string {
	return prefix + "@released/" + strconv.FormatInt(int64(id), 16)
}

// releaseMark returns the op that marks n's release, for its release
// Txn: none without a lock-delay, nor for a semaphore's or an election's
// entries (lock-delay is the locks').
func (s *Session) releaseMark(n *qlock.Node) []clientv3.Op {
	if s.LockDelay() <= 0 || (n.Kind != qlock.Exclusive && n.Kind != qlock.Shared) {
		return nil
	}
	return []clientv3.Op{clientv3.OpPut(releaseMarkKey(s.prefix, s.id), "", clientv3.WithLease(s.id))}
}

// howGone tells, for lock-delay, whether entry key, seen gone at revision
// rev, was released: the release mark of its lease written at rev, or
// else its lease still alive (leaseAlive).
func (s *Session) howGone(ctx context.Context, key string, rev int64) (bool, error) {
	id, ok := leaseOf(key)
	if !ok {
		return false, nil
	}
	get := func(opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
		gctx, cancel := context.WithTimeout(ctx, s.hedgeDelay())
		defer cancel()
		return s.client.Get(gctx, releaseMarkKey(s.prefix, id), append(opts, clientv3.WithRev(rev), clientv3.WithKeysOnly())...)
	}
	resp, err := get(clientv3.WithSerializable())
	if err != nil {
		resp, err = get() // the member has not applied rev yet
	}
	if err == nil && len(resp.Kvs) == 1 && resp.Kvs[0].ModRevision == rev {
		return true, nil
	}
	if ctx.Err() != nil {
		return false, context.Cause(ctx)
	}
	return s.leaseAlive(ctx, key)
}

// ReleaseMarked is false on etcd (qlock.Driver): a release and a waiter's
// giving up are both a delete by a live lease.
func (s *Session) ReleaseMarked() bool { return false }

// leaseAlive tells, for lock-delay, how entry key went: its lease still
// alive means its owner deleted it (a release, or a waiter giving up) or
// someone else did while the owner lives, which etcd does not tell apart;
// its lease gone (TTL -1) means the key went with it, revoked or expired.
// A lease that cannot be asked about (a key not of this library's form,
// a request that fails for good) counts as gone: a delay too many is
// safe, one too few is not.
//
// A holder that Unlocks and at once ends its session (Close revokes the
// lease) can have its lease gone by the time this asks: its successor
// then waits the delay as if the session had ended first.
func (s *Session) leaseAlive(ctx context.Context, key string) (bool, error) {
	id, ok := leaseOf(key)
	if !ok {
		return false, nil
	}
	return s.leaseIDAlive(ctx, key, id)
}

// leaseIDAlive is leaseAlive of entry key's lease id.
func (s *Session) leaseIDAlive(ctx context.Context, key string, id clientv3.LeaseID) (bool, error) {
	resp, err := hedged(ctx, s.hedgeDelay(), func(ctx context.Context) (*clientv3.LeaseTimeToLiveResponse, error) {
		return s.client.TimeToLive(ctx, id)
	})
	if err != nil {
		if ctx.Err() != nil {
			return false, context.Cause(ctx)
		}
		s.Log().Debug("etcdlock: lock-delay: lease check failed; counting the entry as not released", "key", key, "err", err)
		return false, nil
	}
	return resp.TTL >= 0, nil
}

// leaseOf returns the lease of entry key (see keys.go: a kind mark, a
// candidate's priority tag, the lease in hex, "_", a counter).
func leaseOf(key string) (clientv3.LeaseID, bool) {
	i := strings.LastIndex(key, "/@")
	if j := strings.LastIndex(key, "/"+movedMark); j > i {
		i = j // a moved writer's (keys.go): '#' and its kind's mark
	}
	if i < 0 || len(key) < i+3 {
		return 0, false
	}
	rest := key[i+3:]
	if _, tail, ok := cutPriority(rest); ok {
		rest = tail
	}
	hex, _, ok := strings.Cut(rest, "_")
	if !ok || !isHex(hex) {
		return 0, false
	}
	id, err := strconv.ParseUint(hex, 16, 64)
	if err != nil {
		return 0, false
	}
	return clientv3.LeaseID(id), true
}

// waiting is a waiting entry's driver state (qlock.Node.Store): the
// newest revision at which an entry ahead of it was seen gone, or read
// to be gone (SurvivorsAll). Once the last conflicting entry ahead is gone,
// that revision is one at which nothing conflicting is ahead any more.
type waiting struct{ cleared int64 }

// cleared records that n's view of the queue was true at revision rev.
func cleared(n *qlock.Node, rev int64) {
	w, ok := n.Store.(*waiting)
	if !ok {
		w = &waiting{}
		n.Store = w
	}
	w.cleared = max(w.cleared, rev)
}

// SurvivorsAll reads, for each view it is asked about, the nearest entry
// older than its below that still conflicts with the view's owner, and
// records it in the view (qlock.Driver): one Get for one view, one Txn of
// Gets (read-only, served like the Gets) for several, a multi-lock's. A
// lock's view reads the foreign keys beside its queue too (foreign.go):
// a writer's, the whole name's range (wideGet); a reader's, its own range
// and the two foreign ones, in one Txn. A page of other keys alone (an
// election's of the same name, a longer name's) costs a Get more.
// Serializable is enough (see qlock.Queue.Observed).
func (s *Session) SurvivorsAll(ctx context.Context, ns []*qlock.Node, qs []*qlock.Queue, which []int, belows []int64) {
	// Bounded: WaitGone does not follow its predecessor's watch while this
	// runs, and a read that landed on a frozen member would hang.
	ctx, cancel := context.WithTimeout(ctx, s.hedgeDelay())
	defer cancel()
	get := func(k int) (string, []clientv3.OpOption) {
		i := which[k]
		ckey, cend := conflictRange(s.Dir(ns[i].Name), qs[i].Me().Kind)
		return ckey, []clientv3.OpOption{clientv3.WithRange(cend), clientv3.WithSerializable(), clientv3.WithKeysOnly(),
			clientv3.WithMaxCreateRev(belows[k] - 1), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend), clientv3.WithLimit(1)}
	}
	// A lock's view reads the foreign ranges too (foreign.go), in the
	// same request: one Txn of Gets.
	per := make([]int, len(which)) // ops per view
	var ops []clientv3.Op
	for k, i := range which {
		key, opts := get(k)
		ops = append(ops, clientv3.OpGet(key, opts...))
		per[k] = 1
		if kind := qs[i].Me().Kind; kind == qlock.Exclusive {
			// Everything under the name conflicts, but the election's
			// and a longer name's keys: one range, newest first, whose
			// first entry is the nearest unless such keys come first.
			ops[len(ops)-1] = wideGet(baseOfDir(s.Dir(ns[i].Name)), belows[k]-1, 0, clientv3.WithSerializable())
		} else if foreignsApply(kind) {
			ops = append(ops, foreignGets(baseOfDir(s.Dir(ns[i].Name)), belows[k]-1, clientv3.WithSerializable())...)
			per[k] = 3
		}
	}
	var (
		rev int64
		rrs []*pb.RangeResponse
	)
	if len(ops) == 1 {
		resp, err := s.client.Do(ctx, ops[0])
		if err != nil {
			return
		}
		rev, rrs = resp.Get().Header.Revision, []*pb.RangeResponse{(*pb.RangeResponse)(resp.Get())}
	} else {
		resp, err := s.client.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			return
		}
		rev = resp.Header.Revision
		for _, r := range resp.Responses {
			rrs = append(rrs, r.GetResponseRange())
		}
	}
	at := 0
	for k, i := range which {
		n, dir := ns[i], s.Dir(ns[i].Name)
		mine := rrs[at : at+per[k]]
		at += per[k]
		var nearest qlock.Entry
		if rev < n.Seq {
			// A member behind the enqueue (a lagging one, where the
			// client spreads its requests): its view is no news.
			continue
		}
		if qs[i].Me().Kind == qlock.Exclusive {
			e, ok, err := s.nearestWide(ctx, dir, mine[0], rev)
			if err != nil {
				continue // no news: the view reads again when it must
			}
			if !ok {
				cleared(n, rev)
			}
			qs[i].Observed(belows[k], e, ok)
			continue
		}
		found := len(mine[0].Kvs) > 0
		if found {
			kv := mine[0].Kvs[0]
			nearest = qlock.Entry{Key: string(kv.Key), Seq: kv.CreateRevision, Kind: queueKind(dir, string(kv.Key))}
		}
		if len(mine) == 3 {
			// The nearest foreign entry, if newer than the own one.
			base := baseOfDir(dir)
			fe, ok, err := s.nearestForeign(ctx, base, foreignReadRanges(base, qlock.Shared), qs[i].Me().Kind, mine[1:], belows[k], rev)
			if err != nil {
				continue // no news: the view reads again when it must
			}
			if ok && (!found || fe.Seq > nearest.Seq) {
				nearest, found = fe, true
			}
		}
		if !found {
			cleared(n, rev)
		}
		qs[i].Observed(belows[k], nearest, found)
	}
}

// ConfirmAll is the last look before ns are reported held (qlock.Driver):
// for an entry that waited, that it still existed once those ahead of it
// were gone.
//
// Its own entry's deletion and its predecessor's reach a waiter on
// different watches: the follower's starts from history and is served by
// etcd's catch-up loop (every 100 ms), the predecessor's is current, and
// etcd orders events within one watch only. So a waiter whose entry (or
// lease) went just before its predecessor's hears of the predecessor
// first. One read decides: a serializable read served by a member that
// has applied the revision at which the waiter saw its last predecessor
// go (WaitGone, SurvivorsAll), or, from a member that has not, a
// linearizable one. The entry present then was present at that revision
// (keys are never re-created), so the waiter held; absent, it did not, or
// has already lost, and the acquisition fails either way. A read is the
// cheapest correct check: a progress notification costs a request too
// and is only answered once every watch on the stream is caught up, and
// the follower's watch cannot be made to come first.
//
// An entry that did not wait needs no read: its enqueue Txn saw it at the
// front. Nor does a semaphore's line head: its Claim deletes the line
// entry in the Txn that takes the slot, only while it is still there.
//
// A multi-lock's entries are confirmed together: one Txn of Gets
// (read-only, served like the Gets), whatever the number of names.
func (s *Session) ConfirmAll(ctx context.Context, ns []*qlock.Node) []error {
	var look []int
	for i, n := range ns {
		if n.Waited && n.Kind != qlock.Counted {
			look = append(look, i)
		}
	}
	errs := make([]error, len(ns))
	switch len(look) {
	case 0:
	case 1:
		errs[look[0]] = s.confirm(ctx, ns[look[0]])
	default:
		s.confirmAll(ctx, ns, look, errs)
	}
	failed := false
	for i, n := range ns {
		if errs[i] == nil && n.Alive().Err() != nil {
			errs[i] = context.Cause(n.Alive())
		}
		failed = failed || errs[i] != nil
	}
	if !failed {
		return nil
	}
	return errs
}

// clearedAt returns the revision at which n's view of its queue was last
// seen true (see waiting); MaxInt64 if not known, for a linearizable read.
func clearedAt(n *qlock.Node) int64 {
	if w, ok := n.Store.(*waiting); ok {
		return w.cleared
	}
	return math.MaxInt64
}

// confirm is ConfirmAll's read for one entry that waited.
func (s *Session) confirm(ctx context.Context, n *qlock.Node) error {
	rev := clearedAt(n)
	at, err := hedged(ctx, s.hedgeDelay(), func(ctx context.Context) (int64, error) {
		return s.existsSince(ctx, n.Key, n.Seq, rev)
	})
	if err != nil {
		return s.confirmErr(ctx, n, err)
	}
	if at == 0 && n.Alive().Err() == nil {
		return s.entryGone(n.Key)
	}
	if at > 0 {
		s.followSince(n, at+1)
	}
	return nil
}

// confirmErr is why a confirm's read failed for n: its own end, ctx's,
// or the store's error.
func (s *Session) confirmErr(ctx context.Context, n *qlock.Node, err error) error {
	if n.Alive().Err() != nil {
		return context.Cause(n.Alive())
	}
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	return fmt.Errorf("confirm entry %s: %w", n.Key, s.storeErr(err))
}

// confirmAll is confirm of the entries ns[look], in one Txn of Gets:
// serializable where the member has applied every entry's cleared
// revision, linearizable otherwise. It sets errs[i] for those that fail.
func (s *Session) confirmAll(ctx context.Context, ns []*qlock.Node, look []int, errs []error) {
	var rev int64
	for _, i := range look {
		rev = max(rev, clearedAt(ns[i]))
	}
	gets := func(opts ...clientv3.OpOption) []clientv3.Op {
		ops := make([]clientv3.Op, len(look))
		for k, i := range look {
			ops[k] = clientv3.OpGet(ns[i].Key, append(opts, clientv3.WithKeysOnly())...)
		}
		return ops
	}
	resp, err := hedged(ctx, s.hedgeDelay(), func(ctx context.Context) (*clientv3.TxnResponse, error) {
		resp, err := s.client.Txn(ctx).Then(gets(clientv3.WithSerializable())...).Commit()
		if err == nil && resp.Header.Revision < rev {
			resp, err = s.client.Txn(ctx).Then(gets()...).Commit()
		}
		return resp, err
	})
	for k, i := range look {
		n := ns[i]
		if err != nil {
			errs[i] = s.confirmErr(ctx, n, err)
			continue
		}
		kvs := resp.Responses[k].GetResponseRange().Kvs
		if len(kvs) == 1 && kvs[0].CreateRevision == n.Seq {
			s.followSince(n, resp.Header.Revision+1)
		} else if n.Alive().Err() == nil {
			errs[i] = s.entryGone(n.Key)
		}
	}
}

// existsSince reports whether the key created at createRev still existed
// at revision rev or later: it returns the revision of a read that found
// it, 0 if the read did not. The read is serializable where the member has
// applied rev, linearizable otherwise.
func (s *Session) existsSince(ctx context.Context, key string, createRev, rev int64) (int64, error) {
	resp, err := s.client.Get(ctx, key, clientv3.WithKeysOnly(), clientv3.WithSerializable())
	if err == nil && resp.Header.Revision < rev {
		resp, err = s.client.Get(ctx, key, clientv3.WithKeysOnly())
	}
	if err != nil {
		return 0, err
	}
	if len(resp.Kvs) == 1 && resp.Kvs[0].CreateRevision == createRev {
		return resp.Header.Revision, nil
	}
	return 0, nil
}

// DelayDir returns the key prefix under which lock name's waiters record
// the lock-delays they serve (qlock.DelayRecord), each at DelayDir +
// qlock.DelayRecordName, bound to the waiter's lease. '@' starts no lock
// name, so the records are in no lock's queue.
func DelayDir(prefix, name string) string { return prefix + "@delay/" + name + "/" }

// MarkDelay records n's lock-delay (qlock.DelayMarker): one put bound to
// the session's lease, in the background, and its delete once the delay
// is over. A put cut off by its context may still apply after the
// delete; the key then stays, its until in the past, until the lease
// ends (distlock status skips such records).
func (s *Session) MarkDelay(n *qlock.Node, gone string, until time.Time) (clear func()) {
	key := DelayDir(s.prefix, n.Name) + qlock.DelayRecordName(n)
	data := string(s.DelayRecordData(n, gone, until))
	put := make(chan struct{})
	s.Finally(func() {
		defer close(put)
		ctx, cancel := context.WithDeadline(s.Context(), until)
		defer cancel()
		if _, err := s.client.Put(ctx, key, data, clientv3.WithLease(s.id)); err != nil {
			s.Log().Debug("etcdlock: lock-delay: record not written", "key", key, "err", err)
		}
	})
	return func() {
		s.Finally(func() {
			<-put
			// Bound by the session: once it ended, the lease (revoked or
			// expiring) takes the key.
			ctx, cancel := context.WithTimeout(s.Context(), qlock.AbandonTimeout)
			defer cancel()
			if _, err := s.client.Delete(ctx, key); err != nil {
				s.Log().Debug("etcdlock: lock-delay: record not deleted (it goes with the lease)", "key", key, "err", err)
			}
		})
	}
}
