package etcdq

import (
	"context"
	"errors"
	"strconv"
	"sync"

	"github.com/distlock/distlock/internal/qlock"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The enqueue guard: why a Lock that fails can never leave its key behind.
//
// An enqueue is a Txn that puts the caller's key. When the caller gives up
// on it (context ended, member unreachable, answer lost), the outcome of
// that Txn is unknown: the request may not have left the client, may have
// been applied already, or — the hard case — may still be on its way and
// be applied later, after the caller's cleanup has deleted the key. etcd
// does not order two requests of one client on different gRPC streams,
// nor tell when a request it received can no longer be applied: a proposal
// can sit in a follower's forwarding queue, in the leader's log through a
// leader change, or in a proxy's buffer. A plain delete followed by nothing
// therefore leaves, in a fraction of cancelled Locks, the key re-created
// after its cleanup, bound to the caller's live lease: an entry nobody
// will Unlock, blocking the lock for as long as the session lives. (etcd's
// own concurrency.Mutex has the same hole, worse.) Waiting for the outcome
// instead — watching the key after the delete until the Txn provably
// cannot apply — needs that proof, which etcd cannot give.
//
// So the put is made conditional on something the cleanup writes first.
// Every session has one guard key, "<prefix>@guard/<lease hex>" (no lock
// name starts with '@', so it is in no lock's queue), bound to the
// session's lease. Every enqueue Txn (Lock, TryLock, Campaign) compares
// the guard's mod revision with the one the session last saw (0: no guard
// yet), and the cleanup of an enqueue with an unknown outcome is one Txn
// that puts the guard and deletes the key together. Whatever the order in
// which the server applies them, the late put cannot outlive the cleanup:
// applied before it, its key is deleted by it; applied after it, its
// compare fails (a key's mod revision only grows while it exists, and a
// guard deleted and re-created gets a newer one), and it writes nothing.
//
// Costs: the uncontended Lock is still one round trip (the compare reads
// one key inside the Txn); a session that never had to clean up after an
// unknown outcome has no guard key at all, and one that did has exactly
// one, whatever the number of failures, gone with its lease (Close revokes
// it). A cleanup costs one Txn, as the delete it replaces did. Moving the
// guard makes other enqueues of the same session that are in flight at
// that moment fail their compare; they learn the new revision from the
// Txn's Else branch and go again at once, one more round trip in that
// rare case only. An enqueue Txn whose outcome is known (applied) needs no
// guard to be undone: its key is deleted by a plain delete, as a release
// is.
//
// What it does not cover: someone deleting a live session's guard key by
// hand while an enqueue of that session made before the guard existed is
// still in flight.
type guard struct {
	mu  sync.Mutex
	mod int64 // the guard's mod revision, 0 while it does not exist
	at  int64 // the store revision at which mod was seen
}

// guardKey returns the session's guard key.
func (s *Session) guardKey() string {
	return s.prefix + "@guard/" + strconv.FormatInt(int64(s.id), 16)
}

// guardRev returns the guard's mod revision as last seen.
func (s *Session) guardRev() int64 {
	s.guard.mu.Lock()
	defer s.guard.mu.Unlock()
	return s.guard.mod
}

// sawGuard records the guard's mod revision mod as seen at store revision
// at; answers arrive out of order, the newest observation wins.
func (s *Session) sawGuard(mod, at int64) {
	s.guard.mu.Lock()
	defer s.guard.mu.Unlock()
	if at >= s.guard.at {
		s.guard.mod, s.guard.at = mod, at
	}
}

// guardIs is the compare every enqueue Txn carries: the guard is as seen
// (mod revision mod; 0 matches a guard that does not exist).
func (s *Session) guardIs(mod int64) clientv3.Cmp {
	return clientv3.Compare(clientv3.ModRevision(s.guardKey()), "=", mod)
}

// guardPut moves the guard on, bound to the session's lease.
func (s *Session) guardPut() clientv3.Op {
	return clientv3.OpPut(s.guardKey(), s.Holder(), clientv3.WithLease(s.id))
}

// guardGet reads the guard, in an enqueue Txn's Else branch.
func (s *Session) guardGet() clientv3.Op {
	return clientv3.OpGet(s.guardKey(), clientv3.WithKeysOnly())
}

// sawGuardIn records the guard read by guardGet, answered in r at revision
// at.
func (s *Session) sawGuardIn(r *pb.RangeResponse, at int64) {
	var mod int64
	if r != nil && len(r.Kvs) > 0 {
		mod = r.Kvs[0].ModRevision
	}
	s.sawGuard(mod, at)
}

// bury deletes keys, which an enqueue Txn of unknown outcome may have put
// or may still put, and moves the guard in the same Txn so that it never
// can afterwards. A lease already gone took the keys with it and makes
// any late put fail: that is success too. A key is deleted only while it
// is bound to this session's lease: an entry's key is this session's
// alone anyway, but a semaphore's slot key is taken by one session after
// another.
func (s *Session) bury(ctx context.Context, keys ...string) error {
	ops := []clientv3.Op{s.guardPut()}
	for _, key := range keys {
		ops = append(ops, clientv3.OpTxn([]clientv3.Cmp{clientv3.Compare(clientv3.LeaseValue(key), "=", s.id)}, []clientv3.Op{clientv3.OpDelete(key)}, nil))
	}
	resp, err := s.client.Txn(ctx).Then(ops...).Commit()
	if err != nil {
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			s.storeErr(err)
			return nil
		}
		return err
	}
	s.sawGuard(resp.Header.Revision, resp.Header.Revision)
	return nil
}

// abandon cleans up after an enqueue Txn of unknown outcome (it failed,
// or its context ended while it was in flight), before the failed Lock
// returns: bury, within qlock.AbandonTimeout; if the store cannot be reached by
// then, the same in the background until it succeeds or the session ends
// (the lease, expiring on the server at the latest TTL later, then takes
// the key with it and makes a late put fail).
func (s *Session) abandon(key string) { s.abandonThen(key, func() {}) }

// abandonAll is abandon of the keys of one enqueue Txn, buried together.
func (s *Session) abandonAll(keys []string) { s.abandonKeys(keys, func() {}) }

// abandonThen is abandon, calling done once the cleanup is over (or the
// session, and with it the key, is).
func (s *Session) abandonThen(key string, done func()) { s.abandonKeys([]string{key}, done) }

func (s *Session) abandonKeys(keys []string, done func()) {
	ctx, cancel := context.WithTimeout(context.Background(), qlock.AbandonTimeout)
	defer cancel()
	if err := s.bury(ctx, keys...); err != nil {
		s.Log().Warn("etcdlock: cleanup failed; retrying in the background", "keys", keys, "err", err)
		s.Go(func(ctx context.Context) {
			defer done()
			qlock.Retry(ctx, s.ttl/3, s.ttl/3, nil, func(ctx context.Context) bool { return s.bury(ctx, keys...) == nil })
		})
		return
	}
	done()
}
