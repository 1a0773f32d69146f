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

// Release deletes n's key with a Txn conditioned on its create revision,
// so only if it is still this acquisition's (qlock.Driver).
func (s *Session) Release(ctx context.Context, n *qlock.Node, known bool) error {
	// Hedged: the delete is conditioned on the entry's create revision, so
	// a repeat is harmless, and one attempt must not hang on a frozen
	// member while the others could answer. An attempt that finds the key
	// gone while an earlier one is still out cannot tell "deleted by that
	// attempt" from "deleted by someone else": it waits (a few hedge
	// delays at most) for the others' answers, so that a slow member's
	// success is not reported as a lost lock.
	var (
		mu                sync.Mutex
		started, finished int
		won               *clientv3.TxnResponse
		changed           = make(chan struct{})
	)
	var attempts atomic.Int32
	resp, err := hedged(ctx, s.hedgeDelay(), func(ctx context.Context) (*clientv3.TxnResponse, error) {
		attempts.Add(1)
		mu.Lock()
		started++
		mu.Unlock()
		resp, err := s.client.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(n.Key), "=", n.Seq)).
			Then(append(deleteOps(n.Key), s.releaseMark(n)...)...).
			Commit()
		mu.Lock()
		finished++
		if err == nil && resp.Succeeded {
			won = resp
		}
		close(changed)
		changed = make(chan struct{})
		mu.Unlock()
		if err != nil || resp.Succeeded {
			return resp, err
		}
		wait := time.NewTimer(3 * s.hedgeDelay())
		defer wait.Stop()
		for {
			mu.Lock()
			w, all, ch := won, finished == started, changed
			mu.Unlock()
			if w != nil {
				return w, nil
			}
			if all {
				return resp, nil
			}
			select {
			case <-ch:
			case <-wait.C:
				return resp, nil
			case <-ctx.Done():
				return resp, nil
			}
		}
	})
	if err != nil {
		s.removeLater(n.Key, n.Seq)
		return fmt.Errorf("delete key %s: %w (retrying in the background while the session lives)", n.Key, s.storeErr(err))
	}
	if !resp.Succeeded && !known {
		if tries := attempts.Load(); tries > 1 {
			// Another attempt may have deleted it and lost its answer.
			// Reported as a loss all the same: the safe side of the doubt.
			return qlock.Lost(fmt.Errorf("%w: key %s was gone at unlock (deleted by someone else, or by one of this unlock's %d attempts whose answer did not come)", distlock.ErrEntryGone, n.Key, tries))
		}
		return qlock.Lost(fmt.Errorf("%w: key %s was already gone at unlock", distlock.ErrEntryGone, n.Key))
	}
	return nil
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
