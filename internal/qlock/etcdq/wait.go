package etcdq

import (
	"context"
	"fmt"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/qlock"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// WaitGone waits until entry p is gone, with a watch from the current
// revision (qlock.Driver). Meanwhile, while entries older than p may still
// be in the queue, it follows the nearest of them as well: when that one
// goes, one read finds what is left older than p, so that by the time p
// goes — the handoff — q usually knows that nothing older is left and the
// new holder needs no request at all. In a FIFO queue the entry before p
// goes when p acquires, long before p releases.
func (s *Session) WaitGone(ctx context.Context, n *qlock.Node, q *qlock.Queue, p qlock.Entry) error {
	pctx, pcancel := context.WithCancel(ctx)
	defer pcancel()
	pdone := s.goWaitDeleted(pctx, p, n.Seq)
	for {
		if q == nil {
			return <-pdone
		}
		older, ok := q.After(p)
		if !ok {
			return <-pdone
		}
		octx, ocancel := context.WithCancel(ctx)
		odone := s.goWaitDeleted(octx, older, n.Seq)
		select {
		case err := <-pdone:
			ocancel()
			<-odone
			return err
		case err := <-odone:
			ocancel()
			if err != nil { // ctx ended
				pcancel()
				<-pdone
				return err
			}
			q.Gone(older.Key)
			s.Survivors(ctx, n, q, p.Seq)
		}
	}
}

// goWaitDeleted runs waitDeleted for entry x in a goroutine and delivers its
// result; the goroutine ends when ctx does.
func (s *Session) goWaitDeleted(ctx context.Context, x qlock.Entry, known int64) <-chan error {
	done := make(chan error, 1)
	go func() { done <- s.waitDeleted(ctx, x.Key, x.Seq, known, false) }()
	return done
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

// Follow watches n's own key for deletion by others (qlock.Driver), from
// history: no read per acquisition, and a few more milliseconds to notice
// a foreign delete do not matter.
func (s *Session) Follow(n *qlock.Node, gone func(error)) {
	if s.waitDeleted(n.Alive(), n.Key, n.Seq, n.Seq, true) != nil {
		return
	}
	// Past the session's deadline, the lease expiring is the likely cause
	// (the process may just have woken from a pause), and the one to
	// report, whichever of the two news came first.
	if !time.Now().Before(s.Deadline()) {
		gone(fmt.Errorf("%w: lease %x past its client-side deadline; key %s deleted", distlock.ErrSessionExpired, int64(s.id), n.Key))
		return
	}
	gone(fmt.Errorf("%w: key %s", distlock.ErrEntryGone, n.Key))
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
