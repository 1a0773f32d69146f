package etcdq

import (
	"context"
	"fmt"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/qlock"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// WaitGone waits until entry p is gone, with a watch from the current
// revision (qlock.Driver). It watches p alone: when p goes while older
// entries may be left (the view still holds some, or left some out), the
// engine reads which are (Survivors) — one read, where following the next
// older entry too would cost a watch create, a cancel and an event more
// for every handoff of a drained queue.
func (s *Session) WaitGone(ctx context.Context, n *qlock.Node, _ *qlock.Queue, p qlock.Entry) error {
	return s.waitDeleted(ctx, p.Key, p.Seq, n.Seq)
}

// Survivors reads the nearest entry older than below that still conflicts
// with q's owner and records it in q (qlock.Driver). Serializable is
// enough (see qlock.Queue.Observed).
func (s *Session) Survivors(ctx context.Context, n *qlock.Node, q *qlock.Queue, below int64) {
	dir := s.Dir(n.Name)
	ckey, cend := conflictRange(dir, q.Me().Kind)
	// Bounded: WaitGone does not follow its predecessor's watch while this
	// runs, and a read that landed on a frozen member would hang.
	ctx, cancel := context.WithTimeout(ctx, s.hedgeDelay())
	defer cancel()
	resp, err := s.client.Get(ctx, ckey, clientv3.WithRange(cend), clientv3.WithSerializable(), clientv3.WithKeysOnly(),
		clientv3.WithMaxCreateRev(below-1), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortDescend), clientv3.WithLimit(1))
	if err != nil {
		return
	}
	var nearest qlock.Entry
	found := len(resp.Kvs) > 0
	if found {
		kv := resp.Kvs[0]
		nearest = qlock.Entry{Key: string(kv.Key), Seq: kv.CreateRevision, Kind: queueKind(dir, string(kv.Key))}
	}
	q.Observed(below, nearest, found)
}

// Confirm makes sure, by one linearizable read, that a candidate that
// waited still has its entry now that those ahead of it are gone
// (qlock.Driver). The watch on its own entry runs from history and may lag
// behind the one on its predecessor: without the read, a candidate whose
// entry (or session) went just before its predecessor's would return a
// phantom leadership and only report the loss a moment later. An
// uncontended Campaign needs no read: its enqueue Txn itself saw its entry
// at the front. Locks skip the read: their Lease reports such a loss.
func (s *Session) Confirm(ctx context.Context, n *qlock.Node) error {
	if n.Kind == qlock.Candidate && n.Waited {
		resp, err := s.client.Get(ctx, n.Key, clientv3.WithKeysOnly())
		if err != nil {
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			return fmt.Errorf("confirm entry %s: %w", n.Key, s.storeErr(err))
		}
		if n.Alive().Err() == nil && (len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != n.Seq) {
			return fmt.Errorf("%w: key %s", distlock.ErrEntryGone, n.Key)
		}
	}
	if err := n.Alive().Err(); err != nil {
		return context.Cause(n.Alive())
	}
	return nil
}
