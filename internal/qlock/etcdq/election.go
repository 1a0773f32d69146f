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
	kv := resp.Kvs[0]
	return distlock.LeaderInfo{Value: string(kv.Value), Token: distlock.Token{Name: name, Seq: kv.CreateRevision, Owner: uint64(kv.Lease)}}, nil
}

// Observe follows the election's candidates (qlock.Elections). It reads them
// once, then follows them with one watch from the revision after that
// read, so nothing is missed between the two. When the watch fails —
// compaction of the revisions it needs, a member failing or losing its
// leader, a reconnect — it reads the candidates again and resumes from
// there; a change that came and went entirely within such a gap is not
// reported, but the state reported after it is the current one.
func (s *Session) Observe(ctx context.Context, name string, ch chan<- distlock.LeaderInfo) {
	o := observer{s: s, name: name}
	o.observe(ctx, ch)
}

// observer is one Observe call.
type observer struct {
	s    *Session
	name string
}

// candidate is one entry as Observe follows it.
type candidate struct {
	key   string
	rev   int64
	lease clientv3.LeaseID
	value string
}

func (e *observer) observe(ctx context.Context, ch chan<- distlock.LeaderInfo) {
	defer close(ch)
	cli := e.s.client
	dir := e.s.Dir(e.name) + electionMark
	var (
		last  distlock.LeaderInfo
		first = true
	)
	// emit sends the leader of cands if it differs from the last one sent.
	emit := func(cands []candidate) bool {
		var now distlock.LeaderInfo
		if len(cands) > 0 {
			c := slices.MinFunc(cands, func(a, b candidate) int { return cmp.Compare(a.rev, b.rev) })
			now = distlock.LeaderInfo{Value: c.value, Token: distlock.Token{Name: e.name, Seq: c.rev, Owner: uint64(c.lease)}}
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
			e.s.Log().Debug("etcdlock: observe: read failed", "election", e.name, "err", err)
			if ctxwait.Sleep(ctx, qlock.RetryDelay) != nil {
				return
			}
			continue
		}
		cands := make([]candidate, 0, len(resp.Kvs))
		for _, kv := range resp.Kvs {
			cands = append(cands, candidate{key: string(kv.Key), rev: kv.CreateRevision, lease: clientv3.LeaseID(kv.Lease), value: string(kv.Value)})
		}
		if !emit(cands) {
			return
		}
		if !e.follow(ctx, dir, resp.Header.Revision, cands, emit) {
			return
		}
		if ctxwait.Sleep(ctx, qlock.RetryDelay) != nil {
			return
		}
	}
}

// follow applies the watch's events from revision rev+1 to cands, emitting
// after each revision; it returns false when Observe must end, true when
// the watch failed and the candidates must be read again.
func (e *observer) follow(ctx context.Context, dir string, rev int64, cands []candidate, emit func([]candidate) bool) bool {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	for resp := range e.s.client.Watch(wctx, dir, clientv3.WithPrefix(), clientv3.WithRev(rev+1)) {
		if err := resp.Err(); err != nil || resp.Canceled {
			if errors.Is(err, rpctypes.ErrCompacted) {
				e.s.Log().Debug("etcdlock: observe: compacted; reading again", "election", e.name, "rev", rev)
			} else {
				e.s.Log().Debug("etcdlock: observe: watch ended; reading again", "election", e.name, "err", err)
			}
			return true
		}
		for i, ev := range resp.Events {
			key := string(ev.Kv.Key)
			idx := slices.IndexFunc(cands, func(c candidate) bool { return c.key == key })
			switch ev.Type {
			case mvccpb.DELETE:
				if idx >= 0 {
					cands = slices.Delete(cands, idx, idx+1)
				}
			case mvccpb.PUT:
				c := candidate{key: key, rev: ev.Kv.CreateRevision, lease: clientv3.LeaseID(ev.Kv.Lease), value: string(ev.Kv.Value)}
				if idx >= 0 {
					cands[idx] = c
				} else {
					cands = append(cands, c)
				}
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
