package etcdq

import (
	"context"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/ctxwait"
	"github.com/distlock/distlock/internal/qlock"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Revocation records (see distlock.Revocation) live beside the lock's
// queue, one key per revoked holder, not bound to any lease so that they
// outlive holder and revoker:
//
//	PREFIX@revoke/NAME/@req/TOKEN   TOKEN: qlock.RevokeKey of the holder's create revision
//
// Not under NAME/@…: the queue's range reads would see them. '@' never
// occurs in lock names, so the records of lock "a" and "a/b" never mix.

// RevokeDir returns the key prefix of lock name's revocation records.
func RevokeDir(prefix, name string) string { return prefix + "@revoke/" + name + "/@req/" }

func revokeKey(prefix, name string, seq int64) string {
	return RevokeDir(prefix, name) + qlock.RevokeKey(seq)
}

// FollowRevoke watches the revocation record of n's token, from the
// entry's own revision (the record cannot be older), until n.Alive()
// ends: one watch per held lock, and only for sessions that opted in
// (qlock.RevokeFollower).
func (s *Session) FollowRevoke(n *qlock.Node, name string, revoked func(data []byte)) {
	key := revokeKey(s.prefix, name, n.Token)
	s.Go(func(ctx context.Context) {
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		defer context.AfterFunc(n.Alive(), cancel)()
		rev := n.Token
		for ctx.Err() == nil {
			wch := s.client.Watch(clientv3.WithRequireLeader(ctx), key, clientv3.WithRev(rev), clientv3.WithFilterDelete())
			for resp := range wch {
				if resp.CompactRevision != 0 {
					// History gone: read the record instead.
					g, err := s.client.Get(ctx, key)
					if err != nil {
						break
					}
					if len(g.Kvs) > 0 {
						revoked(g.Kvs[0].Value)
						return
					}
					rev = g.Header.Revision + 1
					break
				}
				if resp.Err() != nil {
					break
				}
				if len(resp.Events) > 0 { // puts only
					revoked(resp.Events[0].Kv.Value)
					return
				}
			}
			if ctxwait.Sleep(ctx, qlock.RetryDelay) != nil {
				return
			}
		}
	})
}

// ClientStore is qlock.ClientStore on an etcd client.
type ClientStore struct {
	Client *clientv3.Client
	Prefix string
}

var _ qlock.ClientStore = ClientStore{}

// Backend is etcd (qlock.ClientStore).
func (ClientStore) Backend() qlock.Backend { return Backend }

// CreateRevocation puts token seq's record if there is none, in one Txn that
// returns the existing one otherwise.
func (r ClientStore) CreateRevocation(ctx context.Context, name string, seq int64, data []byte) ([]byte, error) {
	key := revokeKey(r.Prefix, name, seq)
	resp, err := r.Client.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(data))).
		Else(clientv3.OpGet(key)).Commit()
	if err != nil {
		return nil, err
	}
	if resp.Succeeded {
		return nil, nil
	}
	kvs := resp.Responses[0].GetResponseRange().Kvs
	if len(kvs) == 0 {
		return nil, nil // deleted meanwhile (pruned): nothing to report
	}
	return kvs[0].Value, nil
}

// UpdateRevocation replaces token seq's record.
func (r ClientStore) UpdateRevocation(ctx context.Context, name string, seq int64, data []byte) error {
	_, err := r.Client.Put(ctx, revokeKey(r.Prefix, name, seq), string(data))
	return err
}

// ListRevocations reads lock name's records, oldest holder first.
func (r ClientStore) ListRevocations(ctx context.Context, name string) ([][]byte, error) {
	resp, err := r.Client.Get(ctx, RevokeDir(r.Prefix, name), clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortAscend))
	if err != nil {
		return nil, err
	}
	out := make([][]byte, len(resp.Kvs))
	for i, kv := range resp.Kvs {
		out[i] = kv.Value
	}
	return out, nil
}

// PruneRevocations deletes all but the newest keep records: one read of the newest
// keep+1 keys, then one range delete up to the oldest of them.
func (r ClientStore) PruneRevocations(ctx context.Context, name string, keep int) error {
	dir := RevokeDir(r.Prefix, name)
	resp, err := r.Client.Get(ctx, dir, clientv3.WithPrefix(), clientv3.WithKeysOnly(),
		clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend), clientv3.WithLimit(int64(keep)+1))
	if err != nil || len(resp.Kvs) <= keep {
		return err
	}
	_, err = r.Client.Delete(ctx, dir, clientv3.WithRange(string(resp.Kvs[keep].Key)+"\x00"))
	return err
}

// WaitDeleted returns once e's key is gone or holds another entry: a read,
// then a watch from the read's revision.
func (r ClientStore) WaitDeleted(ctx context.Context, e distlock.QueueEntry) error {
	for {
		g, err := r.Client.Get(ctx, e.Key)
		if err != nil {
			if err := ctxwait.Sleep(ctx, qlock.RetryDelay); err != nil {
				return err
			}
			continue
		}
		if len(g.Kvs) == 0 || g.Kvs[0].CreateRevision != qlock.Position(e) {
			return nil
		}
		wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		wch := r.Client.Watch(wctx, e.Key, clientv3.WithRev(g.Header.Revision+1), clientv3.WithFilterPut())
		for resp := range wch {
			if resp.Err() != nil || resp.CompactRevision != 0 {
				break
			}
			if len(resp.Events) > 0 {
				cancel()
				return nil
			}
		}
		cancel()
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
	}
}

// DeleteEntry deletes e's key only if its create revision is still e's
// position (and, for an election's leader, the term record naming it).
func (r ClientStore) DeleteEntry(ctx context.Context, e distlock.QueueEntry) (gone bool, err error) {
	resp, err := r.Client.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(e.Key), "=", qlock.Position(e))).
		Then(deleteOps(e.Key)...).Commit()
	if err != nil {
		return false, err
	}
	return !resp.Succeeded, nil
}
