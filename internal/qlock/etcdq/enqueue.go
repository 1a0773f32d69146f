package etcdq

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/ctxwait"
	"github.com/distlock/distlock/internal/qlock"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// enqueueAttempt bounds one attempt of a Lock's enqueue Txn: a quarter of
// the TTL, at least half a second.
func (s *Session) enqueueAttempt() time.Duration { return max(s.ttl/4, 500*time.Millisecond) }

// Enqueue puts r's entry and reads its queue in one Txn (qlock.Driver).
// A Try request is one Txn that puts the entry only if no conflicting
// entry exists, and otherwise reads the oldest one, writing nothing.
func (s *Session) Enqueue(ctx context.Context, name string, r qlock.Request) (*qlock.Node, []qlock.Entry, bool, error) {
	dir := s.Dir(name)
	key := dir + string(r.Kind.Mark()) + strconv.FormatInt(int64(s.id), 16) + "_" + strconv.FormatUint(s.seq.Add(1), 16)
	// Followed from before its put (follow.go).
	forget := s.expect(key)
	n, ahead, more, err := s.enqueue(ctx, dir, key, r)
	if err != nil {
		forget()
	}
	return n, ahead, more, err
}

// enqueue is Enqueue of key, an entry of dir.
func (s *Session) enqueue(ctx context.Context, dir, key string, r qlock.Request) (*qlock.Node, []qlock.Entry, bool, error) {
	put := clientv3.OpPut(key, string(r.Value), clientv3.WithLease(s.id))
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
	node := func(rev int64) *qlock.Node {
		return &qlock.Node{Entry: qlock.Entry{Key: key, Seq: rev, Kind: r.Kind}, Token: rev}
	}

	// Every enqueue Txn below is guarded (see guard): it writes only if
	// the session's guard is as last seen, and tells the guard's revision
	// in its Else branch when it is not.
	if r.Try {
		ckey, cend := conflictRange(dir, r.Kind)
		for {
			resp, err := s.client.Txn(ctx).
				If(clientv3.Compare(clientv3.CreateRevision(ckey), "=", 0).WithRange(cend), s.guardIs(s.guardRev())).
				Then(put).
				Else(clientv3.OpGet(ckey, append(clientv3.WithFirstCreate(), clientv3.WithRange(cend))...), s.guardGet()).
				Commit()
			if err != nil {
				// The put may or may not have been applied, or be still
				// on its way.
				s.abandon(key)
				return nil, nil, false, ctxErr(err)
			}
			if !resp.Succeeded {
				if len(resp.Responses[0].GetResponseRange().Kvs) > 0 {
					return nil, nil, false, heldBy(resp)
				}
				// Free, but the guard moved: go again.
				s.sawGuardIn(resp.Responses[1].GetResponseRange(), resp.Header.Revision)
				continue
			}
			if err := s.checkRev(key, resp.Header.Revision, floor); err != nil {
				return nil, nil, false, err
			}
			return node(resp.Header.Revision), nil, false, nil
		}
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
	// is the first put's if a retry repeated it.
	ckey, cend := conflictRange(dir, r.Kind)
	limit := int64(qlock.ViewKeep)
	if r.Kind != qlock.Shared {
		limit++ // the newest in the range is this entry
	}
	reads := []clientv3.Op{
		clientv3.OpGet(ckey, clientv3.WithRange(cend), clientv3.WithKeysOnly(),
			clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend), clientv3.WithLimit(limit)),
		clientv3.OpGet(key, clientv3.WithKeysOnly()),
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
		resp, err = s.enqueueTxn(actx, put, reads, uncertain).Commit()
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
			s.Log().Debug("etcdlock: enqueue unanswered; retrying on the next member", "key", key, "after", s.enqueueAttempt())
			continue
		}
		// A member that could not get the Txn committed in time (the
		// leader changed under it, or it has none) says so with a server
		// error of class Unavailable: the next attempt may go through.
		if !retryable(err) || ctx.Err() != nil || ctxwait.Sleep(ctx, qlock.RetryDelay) != nil {
			s.abandon(key)
			return nil, nil, false, ctxErr(err)
		}
		s.Log().Debug("etcdlock: enqueue failed; retrying", "key", key, "err", err)
	}
	rev := resp.Header.Revision
	if own := resp.Responses[2].GetResponseRange().Kvs; len(own) > 0 {
		rev = own[0].CreateRevision
	}
	rr := resp.Responses[1].GetResponseRange()
	all := make([]qlock.Entry, 0, len(rr.Kvs))
	for _, kv := range rr.Kvs {
		k := string(kv.Key)
		all = append(all, qlock.Entry{Key: k, Seq: kv.CreateRevision, Kind: queueKind(dir, k)})
	}
	if err := s.checkRev(key, rev, floor); err != nil {
		return nil, nil, false, err
	}
	return node(rev), all, rr.More, nil
}

// enqueueTxn returns the enqueue Txn, not yet committed: if the session's
// guard is as last seen, put (the entry) and make the reads (Responses[1:]),
// and with uncertain move the guard too; otherwise read the guard
// (Responses[0]).
func (s *Session) enqueueTxn(ctx context.Context, put clientv3.Op, reads []clientv3.Op, uncertain bool) clientv3.Txn {
	ops := append([]clientv3.Op{put}, reads...)
	if uncertain {
		ops = append(ops, s.guardPut())
	}
	return s.client.Txn(ctx).If(s.guardIs(s.guardRev())).Then(ops...).Else(s.guardGet())
}

// heldBy describes the holder a losing TryLock saw.
func heldBy(resp *clientv3.TxnResponse) error {
	kvs := resp.Responses[0].GetResponseRange().Kvs
	if len(kvs) == 0 {
		return distlock.ErrLocked
	}
	kv := kvs[0]
	who := ""
	if len(kv.Value) > 0 {
		who = fmt.Sprintf(", holder %q", kv.Value)
	}
	return fmt.Errorf("%w (entry %s, token %d%s)", distlock.ErrLocked, kv.Key, kv.CreateRevision, who)
}
