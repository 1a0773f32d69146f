package etcdq

import (
	"context"
	"strconv"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/qlock"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Inspect reads the queue of lock name under key prefix prefix, by one
// linearizable range read sorted by create revision: a consistent
// snapshot. Keys under the queue that are not entries are ignored.
func Inspect(ctx context.Context, cli *clientv3.Client, prefix, name string) ([]distlock.QueueEntry, error) {
	dir := QueueDir(prefix, name)
	resp, err := cli.Get(ctx, dir, clientv3.WithPrefix(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil {
		return nil, err
	}
	out := make([]distlock.QueueEntry, 0, len(resp.Kvs))
	var kinds []qlock.Kind
	for _, kv := range resp.Kvs {
		key := string(kv.Key)
		kind, ok := entryKind(dir, key)
		if !ok {
			continue
		}
		kinds = append(kinds, kind)
		out = append(out, distlock.QueueEntry{
			Key:    key,
			Kind:   kind.View(),
			Token:  distlock.Token{Name: name, Seq: kv.CreateRevision, Owner: uint64(kv.Lease)},
			Owner:  strconv.FormatInt(kv.Lease, 16),
			Holder: string(kv.Value),
		})
	}
	for i, h := range qlock.Holding(kinds) {
		out[i].Holding = h
	}
	return out, nil
}
