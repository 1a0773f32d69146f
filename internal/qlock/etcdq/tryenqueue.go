package etcdq

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/ctxwait"
	"github.com/distlock/distlock/internal/qlock"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// enqueueTry is enqueue of a Try request (TryLock, TryRLock, a
// multi-lock's TryLock): one Txn that puts keys, entries of dirs, only if
// no entry they conflict with exists, and otherwise reads the oldest such
// entry of each dir, writing nothing.
//
// TryLock does not wait for a holder, but a lost answer is no holder: an
// attempt whose answer does not come (a connection reset under it, a
// member that cannot commit in time) is retried within ctx, as Lock's
// enqueue is. Its put may have been applied, or be still on its way. So
// every attempt after one with an unknown outcome moves the guard, in its
// Then and its Else branch alike, which makes the earlier attempts fail
// their compare wherever they are (see guard), and reads the keys
// themselves: keys that exist were put by an earlier attempt, which wrote
// only while nothing they conflict with existed, so they hold (whatever
// came after them is behind them). Refused with distlock.ErrLocked means
// a conflicting entry was seen, never a network error.
func (s *Session) enqueueTry(ctx context.Context, dirs, keys []string, r qlock.Request, puts []clientv3.Op, floor int64, ctxErr func(error) error) ([]qlock.Enqueued, error) {
	empty := []clientv3.Cmp{{}} // [0]: the guard, set per attempt
	var first []clientv3.Op
	for _, dir := range dirs {
		ckey, cend := conflictRange(dir, r.Kind)
		empty = append(empty, clientv3.Compare(clientv3.CreateRevision(ckey), "=", 0).WithRange(cend))
		first = append(first, clientv3.OpGet(ckey, append(clientv3.WithFirstCreate(), clientv3.WithRange(cend))...))
	}
	// The foreign keys (foreign.go): the compare asks that the ranges
	// holding those this entry conflicts with be empty, and the Else
	// branch reads them. A longer lock name's keys there make the compare
	// fail with no holder: the Try goes again without the foreign compare
	// (noisy), reads the foreign ranges in its Then branch, at its put's
	// revision, and takes back what it put if an older conflicting
	// foreign entry is there.
	foreign := foreignsApply(r.Kind)
	own := len(empty)
	var freads []clientv3.Op
	fper := 0 // foreign reads per dir
	if foreign {
		for _, dir := range dirs {
			base := baseOfDir(dir)
			empty = append(empty, foreignCmps(base, r.Kind)...)
			ops := foreignOps(base, r.Kind)
			freads, fper = append(freads, ops...), len(ops)
		}
	}
	noisy := false
	// foreignHeld returns the error of a Try refused for the newest
	// conflicting foreign entry its reads rrs (fper per dir) showed that
	// is older than revs[i] (any, if revs is nil); with page, a page cut
	// short without one is followed at rev.
	foreignHeld := func(ctx context.Context, rrs []*pb.ResponseOp, revs []int64, page bool, rev int64) error {
		for i, dir := range dirs {
			base := baseOfDir(dir)
			var pages []*pb.RangeResponse
			for _, rr := range rrs[fper*i : fper*(i+1)] {
				pages = append(pages, rr.GetResponseRange())
			}
			below := int64(math.MaxInt64)
			if revs != nil {
				below = revs[i]
			}
			var e qlock.Entry
			var found bool
			if page {
				var err error
				if e, found, err = s.nearestForeign(ctx, base, foreignReadRanges(base, r.Kind), r.Kind, pages, below, rev); err != nil {
					// No answer is no holder: the Try fails, not refused.
					return fmt.Errorf("read the foreign keys beside %s: %w", dir, s.storeErr(err))
				}
			} else {
				for _, rr := range pages {
					for _, fe := range s.lockPage(base, rr).entries {
						if fe.Seq < below && qlock.Conflicts(r.Kind, fe.Kind) && (!found || fe.Seq > e.Seq) {
							e, found = fe, true
						}
					}
				}
			}
			if found && e.Client == "" {
				return fmt.Errorf("%w (entry %s, token %d)", distlock.ErrLocked, e.Key, e.Seq)
			}
			if found {
				return fmt.Errorf("%w (entry %s of client %s, token %d)", distlock.ErrLocked, e.Key, e.Client, e.Seq)
			}
		}
		return nil
	}
	ownKeys := make([]clientv3.Op, len(keys))
	for i, key := range keys {
		ownKeys[i] = clientv3.OpGet(key, clientv3.WithKeysOnly())
	}
	// held is the Try's success, with resp its Txn's answer; a noisy
	// Try's Then branch ends with its foreign reads.
	held := func(revs []int64, resp *clientv3.TxnResponse) ([]qlock.Enqueued, error) {
		if err := s.checkRev(keys[0], revs[0], floor); err != nil {
			return nil, err
		}
		if noisy {
			rrs := resp.Responses[len(resp.Responses)-len(freads):]
			if err := foreignHeld(ctx, rrs, revs, true, resp.Header.Revision); err != nil {
				s.abandonAll(keys)
				return nil, err
			}
		}
		out := make([]qlock.Enqueued, len(keys))
		for i, key := range keys {
			out[i] = qlock.Enqueued{Node: &qlock.Node{Entry: qlock.Entry{Key: key, Seq: revs[i], Kind: r.Kind}, Token: revs[i]}}
		}
		return out, nil
	}
	uncertain := false
	for {
		// Certain: Then puts; Else reads the oldest conflicting entries
		// and the guard. Uncertain: Then puts, reads the keys and moves
		// the guard; Else reads the oldest conflicting entries and the
		// keys, and moves the guard.
		empty[0] = s.guardIs(s.guardRev())
		then := puts
		els := append(slices.Clone(first), s.guardGet())
		if uncertain {
			then = slices.Concat(puts, ownKeys, []clientv3.Op{s.guardPut()})
			els = slices.Concat(first, ownKeys, []clientv3.Op{s.guardPut()})
		}
		// The foreign reads come last in each branch.
		els = append(els, freads...)
		cmps := empty
		if noisy {
			then, cmps = slices.Concat(then, freads), empty[:own]
		}
		// Each attempt has its own bound, as a Lock's enqueue: one that
		// landed on a frozen or cut-off member must not use up ctx.
		actx, acancel := context.WithTimeout(ctx, s.enqueueAttempt())
		resp, err := s.client.Txn(actx).If(cmps...).Then(then...).Else(els...).Commit()
		attemptTimedOut := err != nil && actx.Err() != nil && ctx.Err() == nil
		acancel()
		if err != nil {
			// The put may or may not have been applied, or be still on
			// its way: the next attempt settles it.
			uncertain = true
			if attemptTimedOut {
				s.Log().Debug("etcdlock: try enqueue unanswered; retrying on the next member", "key", keys[0], "after", s.enqueueAttempt())
				continue
			}
			if !retryable(err) || ctx.Err() != nil || ctxwait.Sleep(ctx, qlock.RetryDelay) != nil {
				s.abandonAll(keys)
				return nil, ctxErr(err)
			}
			s.Log().Debug("etcdlock: try enqueue failed; retrying", "key", keys[0], "err", err)
			continue
		}
		rev := resp.Header.Revision
		if !uncertain {
			if resp.Succeeded {
				return held(slices.Repeat([]int64{rev}, len(keys)), resp)
			}
			if err := heldBy(resp.Responses[:len(dirs)]); err != nil {
				return nil, err
			}
			if foreign {
				if err := foreignHeld(ctx, resp.Responses[len(resp.Responses)-len(freads):], nil, false, rev); err != nil {
					return nil, err
				}
				// Only noise (or the guard) failed the compare.
				noisy = true
			}
			// Free, but the guard moved: go again.
			s.sawGuardIn(resp.Responses[len(dirs)].GetResponseRange(), rev)
			continue
		}
		s.sawGuard(rev, rev)
		var mine []*pb.ResponseOp
		if resp.Succeeded {
			mine = resp.Responses[len(keys) : 2*len(keys)]
		} else {
			mine = resp.Responses[len(dirs) : len(dirs)+len(keys)]
		}
		revs := make([]int64, len(keys))
		found := 0
		for i, m := range mine {
			revs[i] = rev
			if kvs := m.GetResponseRange().Kvs; len(kvs) > 0 {
				revs[i] = kvs[0].CreateRevision
				found++
			}
		}
		switch {
		case resp.Succeeded || found == len(keys):
			// Put now, or by an attempt whose answer was lost (the Then
			// reads a key put again with its first create revision).
			return held(revs, resp)
		case found > 0:
			// One Txn put them all: someone deleted the others since.
			s.abandonAll(keys)
			return nil, fmt.Errorf("%w: an entry of key %s was deleted before its put was confirmed", distlock.ErrEntryGone, keys[0])
		}
		if err := heldBy(resp.Responses[:len(dirs)]); err != nil {
			return nil, err
		}
		if foreign {
			if err := foreignHeld(ctx, resp.Responses[len(resp.Responses)-len(freads):], nil, false, rev); err != nil {
				return nil, err
			}
			noisy = true
		}
		// Free, nothing of this Try's: the guard had moved. It is known
		// now (this Txn moved it); go again.
	}
}
