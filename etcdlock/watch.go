package etcdlock

import (
	"context"
	"time"

	"github.com/distlock/distlock/internal/ctxwait"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/metadata"
)

// retryDelay spaces out attempts to reopen a watch or repeat a cleanup after
// an error, so a member that keeps failing is not hammered.
const retryDelay = 100 * time.Millisecond

// waitDeleted blocks until the key created at createRev no longer exists,
// and returns nil then; or returns ctx's cause.
//
// known is a revision at which the key was known to exist. With fromHistory,
// the first watch starts at known+1, so every deletion since is delivered
// without a read — but etcd may serve it from its 100 ms catch-up loop. That
// is right for a lock watching its own entry, where a few more milliseconds
// do not matter and a read on every acquisition would.
//
// Without fromHistory (and after any compaction or reconnect) the watch
// starts at the current revision, which etcd serves as soon as the delete is
// committed; if the revision moved past known before the watch started, one
// read at the watch's start revision tells whether the key was deleted in
// between. That is the path of a waiter watching its predecessor.
func (s *Session) waitDeleted(ctx context.Context, key string, createRev, known int64, fromHistory bool) error {
	for {
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		opts := []clientv3.OpOption{clientv3.WithCreatedNotify(), clientv3.WithFilterPut()}
		if fromHistory {
			opts = append(opts, clientv3.WithRev(known+1))
			// A stream of its own: clientv3 sends one watch create at a
			// time per stream, and a waiter's predecessor watch must not
			// queue behind its own entry's.
			wctx = metadata.AppendToOutgoingContext(wctx, "distlock-watch", "own")
		}
		gone, seen, err := s.watchOnce(ctx, s.client.Watch(wctx, key, opts...), key, createRev, known, !fromHistory)
		cancel()
		if gone || err != nil {
			return err
		}
		known, fromHistory = seen, false
		if err := ctxwait.Sleep(ctx, retryDelay); err != nil {
			return err
		}
	}
}

// watchOnce follows one watch until the key is deleted (gone), the watch
// ends (retry from the returned revision), or ctx ends (err).
func (s *Session) watchOnce(ctx context.Context, wch clientv3.WatchChan, key string, createRev, known int64, checkGap bool) (gone bool, seen int64, err error) {
	seen = known
	for resp := range wch {
		if checkGap && resp.Created && resp.Header.Revision > seen {
			// Opened at the current revision, later than the last one
			// known: look whether the key went in the gap.
			at := resp.Header.Revision
			exists, err := s.existsAt(ctx, key, createRev, at)
			if err != nil {
				if ctx.Err() != nil {
					return false, seen, context.Cause(ctx)
				}
				s.log.Debug("etcdlock: gap check failed", "key", key, "err", err)
				return false, seen, nil
			}
			if !exists {
				return true, at, nil
			}
			seen = at
		}
		if err := resp.Err(); err != nil || resp.Canceled {
			s.log.Debug("etcdlock: watch ended", "key", key, "err", err)
			return false, seen, nil
		}
		for _, ev := range resp.Events {
			if ev.Type == clientv3.EventTypeDelete {
				return true, ev.Kv.ModRevision, nil
			}
		}
		if resp.Header.Revision > seen && len(resp.Events) > 0 {
			seen = resp.Header.Revision
		}
	}
	if ctx.Err() != nil {
		return false, seen, context.Cause(ctx)
	}
	return false, seen, nil
}

// existsAt reports whether the key created at createRev existed at revision
// rev. It first asks any member without going through the leader (exact,
// since every member that has applied rev holds the same state for it);
// a member that has not applied rev yet, or has compacted it, is answered
// by a linearizable read of the current state instead, which is as good:
// an entry present now was present at rev, since entries are never
// re-created.
func (s *Session) existsAt(ctx context.Context, key string, createRev, rev int64) (bool, error) {
	resp, err := s.client.Get(ctx, key, clientv3.WithRev(rev), clientv3.WithSerializable(), clientv3.WithKeysOnly())
	if err != nil {
		resp, err = s.client.Get(ctx, key, clientv3.WithKeysOnly())
		if err != nil {
			return false, err
		}
	}
	return len(resp.Kvs) == 1 && resp.Kvs[0].CreateRevision == createRev, nil
}
