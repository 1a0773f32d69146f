package etcdq

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/ctxwait"
	"github.com/distlock/distlock/internal/qlock"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Proclaim replaces the leader's value, in one Txn guarded by the entry's
// create revision: it writes only if this term's entry still exists, and
// fails with an error wrapping distlock.ErrNotLeader otherwise
// (qlock.Elections).
func (s *Session) Proclaim(ctx context.Context, n *qlock.Node, value string) error {
	resp, err := s.client.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(n.Key), "=", n.Seq)).
		Then(clientv3.OpPut(n.Key, value, clientv3.WithLease(s.id))).
		Commit()
	if err != nil {
		err = s.storeErr(err)
		if errors.Is(err, distlock.ErrSessionExpired) {
			return fmt.Errorf("%w: %w", distlock.ErrNotLeader, err)
		}
		return err
	}
	if !resp.Succeeded {
		return fmt.Errorf("%w: %w: key %s", distlock.ErrNotLeader, distlock.ErrEntryGone, n.Key)
	}
	return nil
}

// Leader reads the oldest candidate, by one linearizable read
// (qlock.Elections).
func (s *Session) Leader(ctx context.Context, name string) (distlock.LeaderInfo, error) {
	resp, err := s.client.Get(ctx, s.Dir(name)+electionMark, clientv3.WithFirstCreate()...)
	if err != nil {
		return distlock.LeaderInfo{}, err
	}
	if len(resp.Kvs) == 0 {
		return distlock.LeaderInfo{}, distlock.ErrNoLeader
	}
	return leaderOf(name, resp.Kvs[0]), nil
}

// leaderOf is the leader whose entry is kv.
func leaderOf(name string, kv *mvccpb.KeyValue) distlock.LeaderInfo {
	return distlock.LeaderInfo{Value: string(kv.Value), Token: distlock.Token{Name: name, Seq: kv.CreateRevision, Owner: uint64(kv.Lease)}}
}

// Observe follows the election's candidates (qlock.Elections). It reads them
// once, then follows them with one watch from the revision after that
// read, so nothing is missed between the two. When the watch fails —
// compaction of the revisions it needs, a member failing or losing its
// leader, a reconnect — it reads the candidates again and resumes from
// there; a change that came and went entirely within such a gap is not
// reported, but the state reported after it is the current one.
func (s *Session) Observe(ctx context.Context, name string, ch chan<- distlock.LeaderInfo) {
	defer close(ch)
	cli := s.client
	dir := s.Dir(name) + electionMark
	var (
		last  distlock.LeaderInfo
		first = true
	)
	// emit sends the leader of cands if it differs from the last one sent.
	emit := func(cands []*mvccpb.KeyValue) bool {
		var now distlock.LeaderInfo
		if len(cands) > 0 {
			now = leaderOf(name, slices.MinFunc(cands, func(a, b *mvccpb.KeyValue) int { return cmp.Compare(a.CreateRevision, b.CreateRevision) }))
		}
		if !first && now == last {
			return true
		}
		first, last = false, now
		select {
		case ch <- now:
			return true
		case <-ctx.Done():
			return false
		}
	}
	for {
		if ctx.Err() != nil || cli.Ctx().Err() != nil {
			return
		}
		resp, err := cli.Get(ctx, dir, clientv3.WithPrefix())
		if err != nil {
			s.Log().Debug("etcdlock: observe: read failed", "election", name, "err", err)
		} else if !emit(resp.Kvs) || !s.followCandidates(ctx, name, dir, resp.Header.Revision, resp.Kvs, emit) {
			return
		}
		if ctxwait.Sleep(ctx, qlock.RetryDelay) != nil {
			return
		}
	}
}

// followCandidates applies the watch's events from revision rev+1 to
// cands, emitting after each revision; it returns false when Observe must
// end, true when the watch failed and the candidates must be read again.
func (s *Session) followCandidates(ctx context.Context, name, dir string, rev int64, cands []*mvccpb.KeyValue, emit func([]*mvccpb.KeyValue) bool) bool {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	for resp := range s.client.Watch(wctx, dir, clientv3.WithPrefix(), clientv3.WithRev(rev+1)) {
		if err := resp.Err(); err != nil || resp.Canceled {
			if errors.Is(err, rpctypes.ErrCompacted) {
				s.Log().Debug("etcdlock: observe: compacted; reading again", "election", name, "rev", rev)
			} else {
				s.Log().Debug("etcdlock: observe: watch ended; reading again", "election", name, "err", err)
			}
			return true
		}
		for i, ev := range resp.Events {
			idx := slices.IndexFunc(cands, func(c *mvccpb.KeyValue) bool { return string(c.Key) == string(ev.Kv.Key) })
			switch {
			case ev.Type == mvccpb.DELETE && idx >= 0:
				cands = slices.Delete(cands, idx, idx+1)
			case ev.Type == mvccpb.PUT && idx >= 0:
				cands[idx] = ev.Kv
			case ev.Type == mvccpb.PUT:
				cands = append(cands, ev.Kv)
			}
			// One Txn's events share a revision: report the state after
			// all of them.
			if i+1 < len(resp.Events) && resp.Events[i+1].Kv.ModRevision == ev.Kv.ModRevision {
				continue
			}
			if !emit(cands) {
				return false
			}
		}
	}
	return ctx.Err() == nil
}
