package etcdq

import (
	"context"
	"fmt"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/fencing/etcdfence"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// AdminStore is qlock.AdminStore on an etcd client and key prefix: a
// lock's queue, its revocation records (ClientStore) and its
// done-markers, keys bound to no lease (recipe.Admin says where).
type AdminStore struct{ ClientStore }

// markDir holds the markers, PREFIX@once/NAME/@slot/SLOT; the fence they
// are written through is PREFIX@once/NAME/@fence.
func markDir(prefix, name string) string { return prefix + "@once/" + name + "/@slot/" }

// Marker reads slot's marker: one linearizable read.
func (s AdminStore) Marker(ctx context.Context, name, slot string) ([]byte, bool, error) {
	resp, err := s.Client.Get(ctx, markDir(s.Prefix, name)+slot)
	if err != nil || len(resp.Kvs) == 0 {
		return nil, false, err
	}
	return resp.Kvs[0].Value, true, nil
}

// Mark puts slot's marker in one Txn that also requires tok's lock key,
// with its create revision and lease, and no marker for slot. A token of
// lock name goes through name's fence (etcdfence.WriteHeld); a token of
// the slot's own lock (distlock.SlotLockName) is checked by its key alone,
// as qlock.MarkStore says why.
func (s AdminStore) Mark(ctx context.Context, name, slot string, tok distlock.Token, value []byte) ([]byte, error) {
	lockKey, err := etcdfence.HolderKey(ctx, s.Client, s.Prefix, tok)
	if err != nil {
		return nil, err
	}
	key := markDir(s.Prefix, name) + slot
	if tok.Name != name {
		return s.markHeld(ctx, tok, lockKey, key, value)
	}
	f, err := etcdfence.New(s.Client, s.Prefix+"@once/"+name+"/@fence", name)
	if err != nil {
		return nil, err
	}
	resp, err := f.WriteHeld(ctx, tok, lockKey, clientv3.OpTxn(
		[]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(key), "=", 0)},
		[]clientv3.Op{clientv3.OpPut(key, string(value))},
		[]clientv3.Op{clientv3.OpGet(key)}))
	if err != nil || resp.Responses[0].GetResponseTxn().Succeeded {
		return nil, err
	}
	var prev []byte // nil: deleted since
	if kvs := resp.Responses[0].GetResponseTxn().Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
		prev = append([]byte{}, kvs[0].Value...) // not nil when empty
	}
	return prev, distlock.ErrSlotDone
}

// markHeld puts the marker key if tok's lock key still exists with tok's
// create revision and lease and key does not exist, in one Txn; else it
// reads key back to tell which check failed.
func (s AdminStore) markHeld(ctx context.Context, tok distlock.Token, lockKey, key string, value []byte) ([]byte, error) {
	resp, err := s.Client.Txn(ctx).If(
		clientv3.Compare(clientv3.CreateRevision(lockKey), "=", tok.Seq),
		clientv3.Compare(clientv3.LeaseValue(lockKey), "=", clientv3.LeaseID(tok.Owner)),
		clientv3.Compare(clientv3.CreateRevision(key), "=", 0),
	).Then(clientv3.OpPut(key, string(value))).Else(clientv3.OpGet(key)).Commit()
	switch {
	case err != nil:
		return nil, err
	case resp.Succeeded:
		return nil, nil
	}
	if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
		return append([]byte{}, kvs[0].Value...), distlock.ErrSlotDone // not nil when empty
	}
	return nil, fmt.Errorf("%w: token %v: lock key %s gone", etcdfence.ErrNotHeld, tok, lockKey)
}

// Markers counts the markers and reads the newest n in one linearizable
// Txn of two range reads.
func (s AdminStore) Markers(ctx context.Context, name string, n int) (int, [][]byte, error) {
	dir := markDir(s.Prefix, name)
	resp, err := s.Client.Txn(ctx).Then(
		clientv3.OpGet(dir, clientv3.WithPrefix(), clientv3.WithCountOnly()),
		clientv3.OpGet(dir, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend), clientv3.WithLimit(int64(max(n, 1))))).Commit()
	if err != nil {
		return 0, nil, err
	}
	kvs := resp.Responses[1].GetResponseRange().Kvs
	newest := make([][]byte, min(max(n, 0), len(kvs)))
	for i := range newest {
		newest[i] = kvs[i].Value
	}
	return int(resp.Responses[0].GetResponseRange().Count), newest, nil
}

// PruneMarkers deletes the markers before before in one range delete.
func (s AdminStore) PruneMarkers(ctx context.Context, name, before string) (int, error) {
	dir := markDir(s.Prefix, name)
	resp, err := s.Client.Delete(ctx, dir, clientv3.WithRange(dir+before))
	if err != nil {
		return 0, err
	}
	return int(resp.Deleted), nil
}
