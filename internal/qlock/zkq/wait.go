package zkq

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/distlock/distlock/internal/qlock"
	"github.com/distlock/distlock/internal/zkctx"
	"github.com/go-zookeeper/zk"
)

// WaitGone waits until entry p is gone, with a data watch on p's node
// (qlock.Driver). A holder releases with one transaction that sets its
// node's data and deletes it (see Release), so a waiter sees a data change
// only when its predecessor released the lock it held (released): for an
// exclusive p nothing older is left, and the wake needs no request; a
// reader's release leaves older readers to check. A plain deletion (p gave
// up waiting, its session ended, someone else deleted it), or a node
// found gone already, is not a release, and leaves older entries to check
// (SurvivorsAll). A foreign entry (p.Client set) marks nothing: a data
// change on it is no release, and its deletion is a plain one, whether
// its holder released or its session ended (lock-delay then applies);
// one this session may not read is followed through its directory's
// children (watchForeign).
func (s *Session) WaitGone(ctx context.Context, n *qlock.Node, q *qlock.Queue, p qlock.Entry) (released bool, err error) {
	for {
		var ch <-chan zk.Event
		if p.Client != "" {
			fch, ok, err := s.watchForeign(ctx, p.Key)
			if err != nil || !ok {
				return false, err
			}
			ch = fch
		} else {
			pw, ok, err := s.getW(ctx, p.Key)
			if err != nil || !ok {
				return released && err == nil, err
			}
			ch = pw.ch
		}
		select {
		case <-ctx.Done():
			return false, context.Cause(ctx)
		case ev := <-ch:
			switch ev.Type {
			case zk.EventNodeDeleted:
				return false, nil
			case zk.EventNodeDataChanged:
				if p.Client != "" {
					// A foreign client marks no release: its entry's data
					// changed, and it is still there. Watch it again.
					continue
				}
				switch p.Kind {
				case qlock.Exclusive, qlock.Counted:
					// A holder's release, or a semaphore line head's
					// claim: either way p was the oldest.
					q.Observed(p.Seq, qlock.Entry{}, false)
					return true, nil
				case qlock.Shared:
					// A reader's release: the node went in the same
					// transaction; older readers may still hold.
					return true, nil
				case qlock.Candidate:
					q.Observed(p.Seq, qlock.Entry{}, false)
					// Election: p's data changes when it releases AND
					// when its leader Proclaims (it stays). Either way p
					// led, so nothing older is left (Observed above); the
					// loop's next read tells whether p is gone (released)
					// or still there (keep waiting on it). Mutex waiters
					// never get here: their path costs no extra request.
					released = true
				}
			case zk.EventNotWatching:
				return false, s.watchErr(ev)
			}
		}
	}
}

// ReleaseMarked is true on ZooKeeper (qlock.Driver): a release marks
// itself with a data change, a waiter's giving up is a plain delete.
func (s *Session) ReleaseMarked() bool { return true }

// walkLimit is how many gone entries survivors checks one by one before
// it lists the directory instead.
const walkLimit = 2

// SurvivorsAll is survivors for each view it is asked about (qlock.Driver),
// the views together: a multi-lock's cost one round trip.
func (s *Session) SurvivorsAll(ctx context.Context, ns []*qlock.Node, qs []*qlock.Queue, which []int, belows []int64) {
	if len(which) == 1 {
		s.survivors(ctx, ns[which[0]], qs[which[0]], belows[0])
		return
	}
	var wg sync.WaitGroup
	for k, i := range which {
		wg.Go(func() { s.survivors(ctx, ns[i], qs[i], belows[k]) })
	}
	wg.Wait()
}

// survivors runs when an entry went while older ones were still in q's
// snapshot without having released the lock (it gave up waiting, or its
// session ended), or may be (q left them out). It checks the nearest
// known older entries one by one, a small request each; past walkLimit
// gone ones, or when q left older entries out, it lists the directory
// once (one request whose size grows with the queue, but independent of
// how many entries left since the enqueue). An error leaves q as it was, which only
// means more watching.
func (s *Session) survivors(ctx context.Context, n *qlock.Node, q *qlock.Queue, below int64) {
	older := q.Older(below)
	for i := len(older) - 1; i >= 0 && i >= len(older)-walkLimit; i-- {
		ok, err := zkctx.Call(ctx, func() (bool, error) {
			ok, _, err := s.conn.Exists(older[i].Key)
			return ok, err
		})
		if err != nil {
			return
		}
		if ok {
			q.Observed(below, older[i], true)
			return
		}
		q.Gone(older[i].Key)
	}
	if _, must := q.MustRead(); len(older) <= walkLimit && !must {
		return
	}
	// More gone ones than walkLimit, or the view left older entries out:
	// one listing tells what is left below.
	s.Log().Debug("zklock: listing", "key", n.Key, "older", len(older))
	dir := s.Dir(n.Name)
	kids, err := zkctx.Call(ctx, func() ([]string, error) {
		k, _, err := s.conn.Children(dir)
		return k, err
	})
	if err != nil {
		return
	}
	var nearest qlock.Entry
	found := false
	for _, e := range entries(dir, q.Me().Kind, kids) {
		if e.Seq < below && qlock.Conflicts(q.Me().Kind, e.Kind) && (!found || e.Seq > nearest.Seq) {
			nearest, found = e, true
		}
	}
	q.Observed(below, nearest, found)
}

// DelayDir returns the znode under which lock name's waiters record the
// lock-delays they serve (qlock.DelayRecord), each an ephemeral child
// named qlock.DelayRecordName (starting with '@', so never a lock name's
// directory). '@' starts no lock name, so PREFIX/@delay is no lock's.
func DelayDir(prefix, name string) string { return prefix + "/@delay/" + name }

// MarkDelay records n's lock-delay (qlock.DelayMarker): an ephemeral node
// of the session (its directory made first when it is missing), in the
// background, deleted once the delay is over (Close waits for that). Never a set-data on the
// queue entry: the waiter behind it would read that as a release.
func (s *Session) MarkDelay(n *qlock.Node, gone string, until time.Time) (clear func()) {
	dir := DelayDir(s.prefix, n.Name)
	p := dir + "/" + qlock.DelayRecordName(n)
	data := s.DelayRecordData(n, gone, until)
	made := make(chan struct{})
	s.Finally(func() {
		defer close(made)
		ctx, cancel := context.WithDeadline(s.Context(), until)
		defer cancel()
		// Not cut off by ctx: the delete must follow the create's answer,
		// or a create still on its way would outlive it.
		create := func() error {
			if ctx.Err() != nil || !s.ours() {
				return context.Cause(ctx)
			}
			_, err := s.conn.Create(p, data, zk.FlagEphemeral, s.acl)
			return err
		}
		err := create()
		if errors.Is(err, zk.ErrNoNode) {
			if err = s.ensureDir(ctx, dir); err == nil {
				err = create()
			}
		}
		if err != nil {
			s.Log().Debug("zklock: lock-delay: record not written", "path", p, "err", err)
		}
	})
	return func() {
		s.Finally(func() {
			<-made
			// Even after the Session ended: the ZooKeeper session is the
			// connection's and may outlive it, and the node with it.
			ctx, cancel := context.WithTimeout(context.Background(), qlock.AbandonTimeout)
			defer cancel()
			_, err := zkctx.Call(ctx, func() (struct{}, error) { return struct{}{}, s.conn.Delete(p, -1) })
			if err != nil && !errors.Is(err, zk.ErrNoNode) {
				s.Log().Debug("zklock: lock-delay: record not deleted (it goes with the session)", "path", p, "err", err)
			}
		})
	}
}
