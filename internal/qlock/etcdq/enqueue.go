package etcdq

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/ctxwait"
	"github.com/distlock/distlock/internal/qlock"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// enqueueAttempt bounds one attempt of a Lock's enqueue Txn: a quarter of
// the TTL, at least half a second.
func (s *Session) enqueueAttempt() time.Duration { return max(s.ttl/4, 500*time.Millisecond) }

// Enqueue puts r's entry and reads its queue in one Txn (qlock.Driver).
// A Try request is one Txn that puts the entry only if no conflicting
// entry exists, and otherwise reads the oldest one, writing nothing; an
// attempt whose answer is lost is retried within ctx (enqueueTry).
func (s *Session) Enqueue(ctx context.Context, name string, r qlock.Request) (*qlock.Node, []qlock.Entry, bool, error) {
	es, err := s.EnqueueAll(ctx, []string{name}, r)
	if err != nil {
		return nil, nil, false, err
	}
	return es[0].Node, es[0].Ahead, es[0].More, nil
}

// EnqueueAll is Enqueue of one entry in each of names' queues, all put
// (and their queues read) in one Txn, at one revision (qlock.Multi).
func (s *Session) EnqueueAll(ctx context.Context, names []string, r qlock.Request) ([]qlock.Enqueued, error) {
	dirs, keys := make([]string, len(names)), make([]string, len(names))
	for i, name := range names {
		dirs[i] = s.Dir(name)
		keys[i] = entryKey(dirs[i], r, s.id, s.seq.Add(1))
	}
	// Followed from before their put (follow.go).
	forgets := make([]func(), len(keys))
	for i, key := range keys {
		forgets[i] = s.expect(key)
	}
	es, err := s.enqueue(ctx, dirs, keys, r)
	if err != nil {
		for _, forget := range forgets {
			forget()
		}
	}
	return es, err
}

// enqueue is EnqueueAll of keys, entries of dirs (one each).
func (s *Session) enqueue(ctx context.Context, dirs, keys []string, r qlock.Request) ([]qlock.Enqueued, error) {
	puts := make([]clientv3.Op, len(keys))
	for i, key := range keys {
		puts[i] = clientv3.OpPut(key, string(r.Value), clientv3.WithLease(s.id))
	}
	floor := s.maxRev.Load() // before the put is sent, see checkRev

	// ctxErr prefers ctx's cause to the store's error once ctx has ended:
	// a request bounded by ctx's deadline can come back with the server's
	// own timeout ("etcdserver: request timed out", the deadline having
	// travelled with the request) a moment before the client sees ctx end.
	ctxErr := func(err error) error {
		err = s.storeErr(err)
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		return err
	}
	enqueued := func(rev int64, i int) qlock.Enqueued {
		return qlock.Enqueued{Node: &qlock.Node{Entry: qlock.Entry{Key: keys[i], Seq: rev, Kind: r.Kind}, Token: rev}}
	}

	// Every enqueue Txn below is guarded (see guard): it writes only if
	// the session's guard is as last seen, and tells the guard's revision
	// in its Else branch when it is not.
	if r.Try {
		return s.enqueueTry(ctx, dirs, keys, r, puts, floor, ctxErr)
	}

	// The enqueue is safe to repeat: a second put of the same key keeps its
	// create revision, and the read in the same Txn says what it is. So a
	// member failing under the request (its answer lost, the put maybe
	// applied) costs a retry, not the caller's Lock. The attempt that went
	// unanswered may still be applied later, though, after this key has
	// been released: so every attempt after one with an unknown outcome
	// moves the guard too, in its own Txn, which makes the earlier ones
	// fail their compare whenever they arrive.
	//
	// The Txn reads, at the revision of its own put, the newest entries
	// that conflict with this one (qlock.ViewKeep of them, and this one
	// itself where it is in the range): a waiter needs no more (see
	// qlock.Queue), so an enqueue costs the same whether ten or ten
	// thousand entries are queued. And it reads this entry's own key, whose create revision
	// is the first put's if a retry repeated it. A multi-lock's Txn does
	// both for each of its keys.
	limit := int64(qlock.ViewKeep)
	if r.Kind != qlock.Shared {
		limit++ // the newest in the range is this entry
	}
	//
	// A lock's entry reads the foreign keys beside its queue too (see
	// foreign.go), the newest few of each of the two ranges, in the same
	// Txn: a queue without them costs no request more.
	// A writer reads them with its own entries, in one range of all of
	// the name's keys (wideGet), a few more than it needs, for the keys
	// there that are no lock entry (an election's of the same name, a
	// longer name's); a reader reads them in two ranges more.
	foreign := foreignsApply(r.Kind)
	wide := r.Kind == qlock.Exclusive
	per := 2
	if foreign && !wide {
		per = 4
	}
	var reads []clientv3.Op
	for i, dir := range dirs {
		ckey, cend := conflictRange(dir, r.Kind)
		own := clientv3.OpGet(ckey, clientv3.WithRange(cend), clientv3.WithKeysOnly(),
			clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend), clientv3.WithLimit(limit))
		if wide {
			own = wideGet(baseOfDir(dir), math.MaxInt64, 0, clientv3.WithLimit(limit+2))
		}
		reads = append(reads, own, clientv3.OpGet(keys[i], clientv3.WithKeysOnly()))
		if foreign && !wide {
			reads = append(reads, foreignGets(baseOfDir(dir), 0)...)
		}
	}
	var (
		resp      *clientv3.TxnResponse
		uncertain bool
	)
	for {
		var err error
		// Each attempt gets its own bound: one that landed on a frozen or
		// cut-off member would otherwise hang until ctx ends, while the
		// client's balancer sends the next attempt to the next member.
		// Giving up on an attempt is safe for the reason above (the next
		// one moves the guard); it costs a guard move when a healthy
		// cluster was only slow.
		actx, acancel := context.WithTimeout(ctx, s.enqueueAttempt())
		resp, err = s.enqueueTxn(actx, puts, reads, uncertain).Commit()
		attemptTimedOut := err != nil && actx.Err() != nil && ctx.Err() == nil
		acancel()
		if err == nil {
			if resp.Succeeded {
				if uncertain {
					s.sawGuard(resp.Header.Revision, resp.Header.Revision)
				}
				break
			}
			// Another Lock of this session cleaned up meanwhile: the
			// guard moved, nothing was written; go again.
			s.sawGuardIn(resp.Responses[0].GetResponseRange(), resp.Header.Revision)
			continue
		}
		uncertain = true
		if attemptTimedOut {
			s.Log().Debug("etcdlock: enqueue unanswered; retrying on the next member", "key", keys[0], "after", s.enqueueAttempt())
			continue
		}
		// A member that could not get the Txn committed in time (the
		// leader changed under it, or it has none) says so with a server
		// error of class Unavailable: the next attempt may go through.
		if !retryable(err) || ctx.Err() != nil || ctxwait.Sleep(ctx, qlock.RetryDelay) != nil {
			s.abandonAll(keys)
			return nil, ctxErr(err)
		}
		s.Log().Debug("etcdlock: enqueue failed; retrying", "key", keys[0], "err", err)
	}
	out := make([]qlock.Enqueued, len(keys))
	for i, dir := range dirs {
		rev := resp.Header.Revision
		at := len(keys) + per*i
		if own := resp.Responses[at+1].GetResponseRange().Kvs; len(own) > 0 {
			rev = own[0].CreateRevision
		}
		rr := resp.Responses[at].GetResponseRange()
		var (
			all    []qlock.Entry
			oldest int64
			more   = rr.More
		)
		if wide {
			all = s.widePage(dir, rr).entries
		} else {
			for _, kv := range rr.Kvs {
				k := string(kv.Key)
				all = append(all, qlock.Entry{Key: k, Seq: kv.CreateRevision, Kind: queueKind(dir, k)})
				oldest = kv.CreateRevision
			}
		}
		if foreign && !wide {
			base := baseOfDir(dir)
			pages := []foreignPage{
				s.lockPage(base, resp.Responses[at+2].GetResponseRange()),
				s.lockPage(base, resp.Responses[at+3].GetResponseRange()),
			}
			all, more = mergeForeign(all, more, oldest, pages)
		}
		out[i] = enqueued(rev, i)
		out[i].Ahead, out[i].More = all, more
	}
	if err := s.checkRev(keys[0], out[0].Node.Token, floor); err != nil {
		return nil, err
	}
	return out, nil
}

// enqueueTxn returns the enqueue Txn, not yet committed: if the session's
// guard is as last seen, make the puts (the entries) and the reads
// (Responses[len(puts):]), and with uncertain move the guard too;
// otherwise read the guard (Responses[0]).
func (s *Session) enqueueTxn(ctx context.Context, puts, reads []clientv3.Op, uncertain bool) clientv3.Txn {
	ops := append(slices.Clone(puts), reads...)
	if uncertain {
		ops = append(ops, s.guardPut())
	}
	return s.client.Txn(ctx).If(s.guardIs(s.guardRev())).Then(ops...).Else(s.guardGet())
}

// heldBy describes the holder a losing TryLock saw, the first entry in
// rs (its reads of each lock's oldest conflicting entry); nil if none.
func heldBy(rs []*pb.ResponseOp) error {
	var kv *mvccpb.KeyValue
	for _, r := range rs {
		if kvs := r.GetResponseRange().Kvs; len(kvs) > 0 {
			kv = kvs[0]
			break
		}
	}
	if kv == nil {
		return nil
	}
	who := ""
	if len(kv.Value) > 0 {
		who = fmt.Sprintf(", holder %q", kv.Value)
	}
	return fmt.Errorf("%w (entry %s, token %d%s)", distlock.ErrLocked, kv.Key, kv.CreateRevision, who)
}
