package etcdq

import (
	"context"
	"errors"
	"strconv"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/qlock"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Queue reads the queue of lock name (etcdlock's Inspect), by one
// linearizable range read sorted by create revision: a consistent
// snapshot. Keys under the queue that are not entries are ignored.
func (s AdminStore) Queue(ctx context.Context, name string) ([]distlock.QueueEntry, error) {
	cli, prefix := s.Client, s.Prefix
	dir := QueueDir(prefix, name)
	resp, err := cli.Get(ctx, dir, clientv3.WithPrefix(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil {
		return nil, err
	}
	out := make([]distlock.QueueEntry, 0, len(resp.Kvs))
	var (
		kinds         []qlock.Kind
		permits, line []distlock.QueueEntry
	)
	for _, kv := range resp.Kvs {
		key := string(kv.Key)
		if i, ok := parseSlot(dir, key); ok {
			// A semaphore's permit: a holder.
			n, h := parseSlotValue(kv.Value)
			permits = append(permits, distlock.QueueEntry{
				Key: key, Kind: qlock.Counted.View(), Holding: true, Permits: n, Slot: i, Holder: h, Owner: strconv.FormatInt(kv.Lease, 16),
				Token: distlock.Token{Name: distlock.SlotName(name, i), Seq: kv.CreateRevision, Owner: uint64(kv.Lease)},
			})
			continue
		}
		kind, ok := entryKind(dir, key)
		if !ok {
			continue
		}
		if kind == qlock.Counted {
			// A semaphore's waiter, in line.
			line = append(line, distlock.QueueEntry{
				Key: key, Kind: qlock.Counted.View(), Holder: string(kv.Value), Owner: strconv.FormatInt(kv.Lease, 16),
				Token: distlock.Token{Name: name, Seq: kv.CreateRevision, Owner: uint64(kv.Lease)},
			})
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
	// A semaphore's holders first, then its line, oldest first.
	return append(append(permits, line...), out...), nil
}

// WatchQueue calls f with lock name's queue (as Queue reads it) now and
// after every change of it, until ctx ends, f fails or the watch does.
// The watch is in place before each read, so no change is missed; changes
// that come while f runs are read once, together.
func (s AdminStore) WatchQueue(ctx context.Context, name string, f func([]distlock.QueueEntry) error) error {
	cli, prefix := s.Client, s.Prefix
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	wch := cli.Watch(wctx, QueueDir(prefix, name), clientv3.WithPrefix(), clientv3.WithCreatedNotify())
	// ended says why a response (or the channel's close) ends the watch.
	ended := func(resp clientv3.WatchResponse, ok bool) error {
		switch {
		case !ok && ctx.Err() != nil:
			return context.Cause(ctx)
		case !ok:
			return errors.New("watch closed (client closed?)")
		}
		return resp.Err()
	}
	next := func() error {
		select {
		case resp, ok := <-wch:
			return ended(resp, ok)
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	if err := next(); err != nil { // the watch's creation
		return err
	}
	for {
		q, err := s.Queue(ctx, name)
		if err != nil {
			return err
		}
		if err := f(q); err != nil {
			return err
		}
		if err := next(); err != nil {
			return err
		}
		// Take the rest of a burst with it; a watch that ended in it
		// ends this too, with its own error.
	drain:
		for {
			select {
			case resp, ok := <-wch:
				if err := ended(resp, ok); err != nil {
					return err
				}
			default:
				break drain
			}
		}
	}
}
