package etcdq

import (
	"context"
	"math"
	"time"

	"github.com/distlock/distlock/internal/ctxwait"
	"github.com/distlock/distlock/internal/qlock"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/metadata"
)

// run keeps the follower's watch open until the session ends or the
// follower retires. Each pass opens the watch at rev, the first revision
// not yet seen, so a watch moved to another stream or member misses
// nothing.
func (f *follower) run(ctx context.Context, rev int64) {
	s := f.s
	for {
		gen := s.streamGen.Load()
		stream := streamName(gen)
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		wctx = metadata.AppendToOutgoingContext(wctx, "distlock-watch", stream)
		// Opened in the background: Watch waits for its stream, which may
		// sit on a silent member (see waitDeleted).
		opened := make(chan clientv3.WatchChan, 1)
		opts := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithFilterPut(), clientv3.WithRev(rev)}
		go func() { opened <- s.client.Watch(wctx, f.prefix, opts...) }()
		next, compacted, silent, retired, rewound := f.watch(ctx, wctx, opened, rev)
		cancel()
		rev = next
		switch {
		case retired || ctx.Err() != nil:
			return
		case rewound:
			continue
		case compacted:
			rev = f.resync(ctx, rev)
		case silent:
			if s.streamGen.CompareAndSwap(gen, gen+1) {
				s.Log().Info("etcdlock: watch stream silent; moving the session's watches to a new stream", "prefix", f.prefix, "stream", stream)
			}
		}
		if ctxwait.Sleep(ctx, qlock.RetryDelay) != nil {
			return
		}
	}
}

// watch follows one watch until it ends, is compacted away, or goes
// silent while entries depend on it, or the follower retires, or an entry
// needs it to go back (rewound); it returns the revision to go on from.
func (f *follower) watch(ctx, wctx context.Context, opened <-chan clientv3.WatchChan, rev int64) (next int64, compacted, silent, retired, rewound bool) {
	s := f.s
	next = rev
	check := time.NewTicker(s.watchCheck())
	defer check.Stop()
	idle := time.NewTimer(followIdle)
	defer idle.Stop()
	if !f.idle() {
		idle.Stop()
	}
	heard := time.Now()
	var wch clientv3.WatchChan
	for {
		select {
		case wch = <-opened:
			opened = nil
		case resp, ok := <-wch:
			if !ok {
				return next, false, false, false, false
			}
			heard = time.Now()
			if resp.CompactRevision != 0 {
				return resp.CompactRevision, true, false, false, false
			}
			if err := resp.Err(); err != nil || resp.Canceled {
				s.Log().Debug("etcdlock: follower's watch ended", "prefix", f.prefix, "err", err)
				return next, false, false, false, false
			}
			for _, ev := range resp.Events {
				if ev.Type == clientv3.EventTypeDelete {
					f.deleted(string(ev.Kv.Key), ev.Kv.ModRevision)
				}
				next = max(next, ev.Kv.ModRevision+1)
			}
			if resp.IsProgressNotify() {
				next = max(next, resp.Header.Revision+1)
			}
		case <-f.changed:
			f.mu.Lock()
			back := f.rewind
			f.rewind = 0
			f.mu.Unlock()
			if back != 0 && back < next {
				return back, false, false, false, true
			}
			if f.idle() {
				idle.Reset(followIdle)
			} else {
				idle.Stop()
				heard = time.Now()
			}
		case <-idle.C:
			if f.retire() {
				return next, false, false, true, false
			}
		case <-check.C:
			if f.idle() {
				heard = time.Now()
				continue
			}
			quiet := time.Since(heard)
			if quiet >= 3*s.watchCheck() {
				return next, false, true, false, false
			}
			if quiet >= s.watchCheck() && wch != nil {
				go s.askProgress(wctx, streamOf(wctx))
			}
		case <-ctx.Done():
			return next, false, false, false, false
		}
	}
}

// resync, after the revisions the watch needed were compacted, reads which
// of the follower's entries are left, reports the others deleted, and
// returns the revision to watch from.
func (f *follower) resync(ctx context.Context, rev int64) int64 {
	for {
		resp, err := f.s.client.Get(ctx, f.prefix, clientv3.WithPrefix(), clientv3.WithKeysOnly())
		if err == nil {
			present := map[string]int64{} // key: create revision
			for _, kv := range resp.Kvs {
				present[string(kv.Key)] = kv.CreateRevision
			}
			f.mu.Lock()
			var gone []string
			for k, e := range f.entries {
				switch {
				case e.gone != nil && present[k] == e.seq:
				case e.gone == nil && present[k] != 0:
				case e.gone != nil:
					gone = append(gone, k)
				default:
					// Not followed yet: its put may still be on its way.
					e.unsure = true
				}
			}
			f.mu.Unlock()
			for _, k := range gone {
				f.deleted(k, math.MaxInt64)
			}
			return resp.Header.Revision + 1
		}
		if ctxwait.Sleep(ctx, qlock.RetryDelay) != nil {
			return rev
		}
	}
}
