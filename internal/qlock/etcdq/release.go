package etcdq

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/qlock"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// ReleaseAll deletes ns's keys, each with a compare on its create
// revision, so only if it is still this acquisition's (qlock.Driver): one
// Txn whatever the number of keys (a multi-lock's), each key's delete in
// a Txn of its own inside it, so that one key found gone leaves the
// others' deletes to go through.
func (s *Session) ReleaseAll(ctx context.Context, ns []*qlock.Node, known []bool) []error {
	// Hedged: the deletes are conditioned on the entries' create
	// revisions, so a repeat is harmless, and one attempt must not hang on
	// a frozen member while the others could answer. An attempt that finds
	// a key gone while an earlier one is still out cannot tell "deleted
	// by that attempt" from "deleted by someone else": it waits (a few
	// hedge delays at most) for the others' answers, so that a slow
	// member's success is not reported as a lost lock.
	var (
		mu                sync.Mutex
		started, finished int
		deleted           = make([]bool, len(ns)) // by any attempt
		changed           = make(chan struct{})
	)
	all := func() bool {
		for _, d := range deleted {
			if !d {
				return false
			}
		}
		return true
	}
	var attempts atomic.Int32
	_, err := hedged(ctx, s.hedgeDelay(), func(ctx context.Context) (struct{}, error) {
		attempts.Add(1)
		mu.Lock()
		started++
		mu.Unlock()
		ok, err := s.releaseTxn(ctx, ns)
		mu.Lock()
		finished++
		for i := range ok {
			deleted[i] = deleted[i] || ok[i]
		}
		close(changed)
		changed = make(chan struct{})
		done := all()
		mu.Unlock()
		if err != nil || done {
			return struct{}{}, err
		}
		wait := time.NewTimer(3 * s.hedgeDelay())
		defer wait.Stop()
		for {
			mu.Lock()
			done, over, ch := all(), finished == started, changed
			mu.Unlock()
			if done || over {
				return struct{}{}, nil
			}
			select {
			case <-ch:
			case <-wait.C:
				return struct{}{}, nil
			case <-ctx.Done():
				return struct{}{}, nil
			}
		}
	})
	errs := make([]error, len(ns))
	failed := false
	mu.Lock()
	defer mu.Unlock()
	for i, n := range ns {
		switch {
		case deleted[i]:
			continue
		case err != nil:
			s.removeLater(n.Key, n.Seq)
			errs[i] = fmt.Errorf("delete key %s: %w (retrying in the background while the session lives)", n.Key, s.storeErr(err))
		case known[i]:
			continue
		case attempts.Load() > 1:
			// Another attempt may have deleted it and lost its answer.
			// Reported as a loss all the same: the safe side of the doubt.
			errs[i] = qlock.Lost(fmt.Errorf("%w: key %s was gone at unlock (deleted by someone else, or by one of this unlock's %d attempts whose answer did not come)", distlock.ErrEntryGone, n.Key, attempts.Load()))
		default:
			errs[i] = qlock.Lost(fmt.Errorf("%w: key %s was already gone at unlock", distlock.ErrEntryGone, n.Key))
		}
		failed = true
	}
	if !failed {
		return nil
	}
	return errs
}

// releaseTxn is one attempt of ReleaseAll: it says which of ns's keys it
// deleted. One key's Txn is the compare and its deletes (with the release
// mark, see releaseMark); several keys' is one Txn of such Txns, with the
// release mark once.
func (s *Session) releaseTxn(ctx context.Context, ns []*qlock.Node) ([]bool, error) {
	if len(ns) == 1 {
		n := ns[0]
		resp, err := s.client.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(n.Key), "=", n.Seq)).
			Then(append(deleteOps(n.Key), s.releaseMark(n)...)...).
			Commit()
		if err != nil {
			return nil, err
		}
		return []bool{resp.Succeeded}, nil
	}
	ops := make([]clientv3.Op, 0, len(ns)+1)
	for _, n := range ns {
		ops = append(ops, clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(n.Key), "=", n.Seq)}, deleteOps(n.Key), nil))
	}
	ops = append(ops, s.releaseMark(ns[0])...)
	resp, err := s.client.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		return nil, err
	}
	ok := make([]bool, len(ns))
	for i := range ns {
		ok[i] = resp.Responses[i].GetResponseTxn().GetSucceeded()
	}
	return ok, nil
}

// Abandon is the failure path of a Lock that had enqueued (qlock.Driver):
// its put is known to have been applied (and any earlier attempt of it can
// no longer be, see Enqueue), so a delete undoes it for good. The delete
// is conditioned on the key's create revision, as a release's is: a
// semaphore's slot key may be another holder's by now. A delete that does
// not go through within qlock.AbandonTimeout is retried in the background
// while the session lives.
func (s *Session) Abandon(n *qlock.Node) {
	ctx, cancel := context.WithTimeout(context.Background(), qlock.AbandonTimeout)
	defer cancel()
	if err := s.deleteAt(ctx, n.Key, n.Seq); err != nil {
		s.Log().Warn("etcdlock: cleanup failed; retrying in the background", "key", n.Key, "err", err)
		s.removeLater(n.Key, n.Seq)
	}
}

// deleteAt deletes key if its create revision is still rev.
func (s *Session) deleteAt(ctx context.Context, key string, rev int64) error {
	ops := deleteOps(key)
	_, err := s.client.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", rev)).Then(ops...).Else(ops[1:]...).Commit()
	return err
}

// deleteOps deletes entry key and, if it is a candidate that the term
// record names, the record (which would otherwise name a gone entry until
// the session ends): the record's part is all but the first op.
func deleteOps(key string) []clientv3.Op {
	ops := []clientv3.Op{clientv3.OpDelete(key)}
	if i := strings.LastIndex(key, "/@"); i >= 0 && strings.HasPrefix(key[i+2:], electionMark) {
		term := key[:i+2] + termMark
		ops = append(ops, clientv3.OpTxn(
			[]clientv3.Cmp{clientv3.Compare(clientv3.Value(term), "=", key)},
			[]clientv3.Op{clientv3.OpDelete(term)}, nil))
	}
	return ops
}

// removeLater deletes key, created at revision rev, in the background,
// retrying until it succeeds or the session ends (which takes the key
// away with the lease).
func (s *Session) removeLater(key string, rev int64) {
	s.Go(func(ctx context.Context) {
		qlock.Retry(ctx, s.ttl/3, s.ttl/3, nil, func(ctx context.Context) bool {
			return s.deleteAt(ctx, key, rev) == nil
		})
	})
}

// storeErr ends the session if err says the lease is gone, and returns err
// in terms of the distlock sentinels where one fits.
func (s *Session) storeErr(err error) error {
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		cause := fmt.Errorf("%w: lease %x not found on the server", distlock.ErrSessionExpired, int64(s.id))
		s.End(cause)
		return cause
	}
	return err
}
