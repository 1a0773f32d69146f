package etcdlock

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/ctxwait"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Election is leader election on etcd, built on the same queue mechanism
// as Mutex: each Campaign puts one entry "P" + name + "/@e" + lease + "_" +
// counter, bound to the session's lease, whose value is the candidate's
// value, and the candidate whose entry is the oldest leads. Its term's
// fencing token is that entry's create revision, so tokens of successive
// leaders only grow.
//
// Candidates have a marker of their own ("@e", where a Mutex's entries are
// "@w" and an RWMutex's readers "@r"): an Election and a Mutex or RWMutex
// of the same name on the same prefix are separate queues that do not wait
// for each other, as on ZooKeeper. Inspect lists both kinds of entries
// together (give an election and a lock different names to tell them
// apart there).
//
// Compared with etcd's concurrency.Election:
//   - an uncontended Campaign is one write round trip (the enqueue Txn puts
//     the entry and reads the queue at once), where etcd's needs two;
//   - a waiting candidate watches only its predecessor, from the current
//     revision (no 100 ms catch-up delay at handover), and before Campaign
//     returns it knows its own entry still exists (a candidate that waited
//     confirms it by one linearizable read once those ahead are gone): a
//     candidate whose entry or session went while it waited fails instead
//     of returning a phantom leadership;
//   - a Campaign that fails or is cancelled deletes its entry before
//     returning (or, if etcd cannot be reached, keeps trying in the
//     background while the session lives), so it never later blocks the
//     election;
//   - Observe reports "no leader" too, and survives compaction.
//
// An Election is a handle, safe for concurrent use: every Campaign call is
// a candidate of its own, even on one session.
type Election struct {
	s    *Session
	name string
}

var _ distlock.Elector = (*Election)(nil)

// NewElection returns the election called name (see distlock.ValidateName)
// on the session's client.
func NewElection(s *Session, name string) (*Election, error) {
	if s == nil {
		return nil, fmt.Errorf("etcdlock: new election %q: %w: *Session is nil", name, distlock.ErrNilClient)
	}
	if err := distlock.ValidateName(name); err != nil {
		return nil, err
	}
	return &Election{s: s, name: name}, nil
}

// Name returns the election's name.
func (e *Election) Name() string { return e.name }

// Session returns the session the candidates' entries are bound to.
func (e *Election) Session() *Session { return e.s }

// Campaign enqueues a candidate with value as its value and waits until
// it leads. It fails, leaving no entry behind, when ctx ends (the error
// wraps ctx's cause), when the session ends (distlock.ErrSessionExpired or
// ErrSessionClosed) or when its entry is deleted by someone else
// (distlock.ErrEntryGone). Once the session has ended every Campaign
// fails: campaign again on a new Session.
//
// The returned Leadership ends (Done, Context) when the entry goes, the
// session ends, or Resign is called.
func (e *Election) Campaign(ctx context.Context, value string) (distlock.Leadership, error) {
	en, err := e.s.acquireEntry(ctx, e.name, distlock.Exclusive, true, false, "campaign", value)
	if err != nil {
		return nil, err
	}
	if en.waited {
		if err := en.confirm(ctx); err != nil {
			en.abandon(err)
			return nil, &distlock.LockError{Name: e.name, Op: "campaign", Err: err}
		}
	}
	return &leadership{Lease: en.hold(), e: en}, nil
}

// confirm makes sure, by one linearizable read, that a candidate that
// waited still has its entry now that those ahead of it are gone. The
// watch on its own entry runs from history and may lag behind the one on
// its predecessor: without the read, a candidate whose entry (or session)
// went just before its predecessor's would return a phantom leadership
// and only report the loss a moment later. An uncontended Campaign needs
// no read: its enqueue Txn itself saw its entry at the front.
func (en *entry) confirm(ctx context.Context) error {
	resp, err := en.s.client.Get(ctx, en.key, clientv3.WithKeysOnly())
	if err != nil {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		return fmt.Errorf("confirm entry %s: %w", en.key, en.s.storeErr(err))
	}
	if en.alive.Err() != nil {
		return context.Cause(en.alive)
	}
	if len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != en.rev {
		return fmt.Errorf("%w: key %s", distlock.ErrEntryGone, en.key)
	}
	return nil
}

// leadership is a won campaign: the held entry's Lease, and the entry for
// Proclaim.
type leadership struct {
	*distlock.Lease
	e *entry
}

// Proclaim replaces the leader's value, in one Txn guarded by the entry's
// create revision: it writes only if this term's entry still exists, and
// fails with an error wrapping distlock.ErrNotLeader otherwise (also,
// without writing, when this Leadership has already ended).
func (l *leadership) Proclaim(ctx context.Context, value string) error {
	fail := func(err error) error {
		return &distlock.LockError{Name: l.e.name, Op: "proclaim", Err: err}
	}
	if err := l.Err(); err != nil {
		return fail(fmt.Errorf("%w: %w", distlock.ErrNotLeader, err))
	}
	s := l.e.s
	resp, err := s.client.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(l.e.key), "=", l.e.rev)).
		Then(clientv3.OpPut(l.e.key, value, clientv3.WithLease(s.id))).
		Commit()
	if err != nil {
		err = s.storeErr(err)
		if errors.Is(err, distlock.ErrSessionExpired) {
			return fail(fmt.Errorf("%w: %w", distlock.ErrNotLeader, err))
		}
		return fail(err)
	}
	if !resp.Succeeded {
		return fail(fmt.Errorf("%w: %w: key %s", distlock.ErrNotLeader, distlock.ErrEntryGone, l.e.key))
	}
	return nil
}

// Resign ends leadership: it deletes the entry only if it is still this
// term's (the Lease's Unlock), which hands leadership to the next
// candidate at once. If leadership had already been lost, the error wraps
// distlock.ErrNotLeader and distlock.ErrLost; if Resign was called before,
// it wraps distlock.ErrNotLeader and distlock.ErrReleased (as on
// ZooKeeper); if the delete could not be
// made, the error says so (the entry is retried in the background and goes
// with the session at the latest) — Resign never pretends.
func (l *leadership) Resign(ctx context.Context) error {
	err := l.Unlock(ctx)
	if errors.Is(err, distlock.ErrLost) || errors.Is(err, distlock.ErrReleased) {
		return &distlock.LockError{Name: l.e.name, Op: "resign", Err: fmt.Errorf("%w: %w", distlock.ErrNotLeader, err)}
	}
	return err
}

// Leader returns the current leader's value and token: those of the oldest
// entry, by one linearizable read. That candidate leads from the moment its
// predecessor's entry went, possibly a little before its Campaign returns.
// With no candidate at all the error wraps distlock.ErrNoLeader.
func (e *Election) Leader(ctx context.Context) (distlock.LeaderInfo, error) {
	dir := e.s.queueDir(e.name) + electionMark
	resp, err := e.s.client.Get(ctx, dir, clientv3.WithFirstCreate()...)
	if err != nil {
		return distlock.LeaderInfo{}, &distlock.LockError{Name: e.name, Op: "leader", Err: err}
	}
	if len(resp.Kvs) == 0 {
		return distlock.LeaderInfo{}, &distlock.LockError{Name: e.name, Op: "leader", Err: distlock.ErrNoLeader}
	}
	kv := resp.Kvs[0]
	return distlock.LeaderInfo{Value: string(kv.Value), Token: distlock.Token{Name: e.name, Seq: kv.CreateRevision, Owner: uint64(kv.Lease)}}, nil
}

// Observe streams the election's leader: first the leader when it starts
// (the zero LeaderInfo if none), then every change, in the order they
// happened: a new leader (new token), a Proclaim (same token, new value),
// and "no leader" (the zero LeaderInfo, see LeaderInfo.NoLeader) when the
// last candidate goes. The channel is closed when ctx ends or the
// session's client is closed.
//
// It reads the candidates once, then follows them with one watch from the
// revision after that read, so nothing is missed between the two. When the
// watch fails — compaction of the revisions it needs, a member failing or
// losing its leader, a reconnect — it reads the candidates again and
// resumes from there; a change that came and went entirely within such a
// gap is not reported, but the state reported after it is the current one.
// Receivers must keep up: Observe waits for each value to be taken.
func (e *Election) Observe(ctx context.Context) <-chan distlock.LeaderInfo {
	ch := make(chan distlock.LeaderInfo)
	go e.observe(ctx, ch)
	return ch
}

// candidate is one entry as Observe follows it.
type candidate struct {
	key   string
	rev   int64
	lease clientv3.LeaseID
	value string
}

func (e *Election) observe(ctx context.Context, ch chan<- distlock.LeaderInfo) {
	defer close(ch)
	cli := e.s.client
	dir := e.s.queueDir(e.name) + electionMark
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
			e.s.log.Debug("etcdlock: observe: read failed", "election", e.name, "err", err)
			if ctxwait.Sleep(ctx, retryDelay) != nil {
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
		if ctxwait.Sleep(ctx, retryDelay) != nil {
			return
		}
	}
}

// follow applies the watch's events from revision rev+1 to cands, emitting
// after each revision; it returns false when Observe must end, true when
// the watch failed and the candidates must be read again.
func (e *Election) follow(ctx context.Context, dir string, rev int64, cands []candidate, emit func([]candidate) bool) bool {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	for resp := range e.s.client.Watch(wctx, dir, clientv3.WithPrefix(), clientv3.WithRev(rev+1)) {
		if err := resp.Err(); err != nil || resp.Canceled {
			if errors.Is(err, rpctypes.ErrCompacted) {
				e.s.log.Debug("etcdlock: observe: compacted; reading again", "election", e.name, "rev", rev)
			} else {
				e.s.log.Debug("etcdlock: observe: watch ended; reading again", "election", e.name, "err", err)
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
