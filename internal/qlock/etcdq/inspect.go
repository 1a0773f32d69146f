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
	dir := QueueDir(s.Prefix, name)
	resp, err := s.Client.Get(ctx, dir, clientv3.WithPrefix(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil {
		return nil, err
	}
	var (
		kinds              []qlock.Kind
		permits, line, out []distlock.QueueEntry
	)
	for _, kv := range resp.Kvs {
		key := string(kv.Key)
		e := distlock.QueueEntry{Key: key, Holder: string(kv.Value), Owner: strconv.FormatInt(kv.Lease, 16),
			Token: distlock.Token{Name: name, Seq: kv.CreateRevision, Owner: uint64(kv.Lease)}}
		if i, ok := parseSlot(dir, key); ok { // a semaphore's permit: a holder
			e.Kind, e.Holding, e.Slot, e.Token.Name = qlock.Counted.View(), true, i, distlock.SlotName(name, i)
			e.Permits, e.Holder = parseSlotValue(kv.Value)
			permits = append(permits, e)
			continue
		}
		kind, ok := entryKind(dir, key)
		e.Kind = kind.View()
		switch {
		case !ok:
		case kind == qlock.Counted: // a semaphore's waiter, in line
			line = append(line, e)
		default:
			kinds, out = append(kinds, kind), append(out, e)
		}
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
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	wch := s.Client.Watch(wctx, QueueDir(s.Prefix, name), clientv3.WithPrefix(), clientv3.WithCreatedNotify())
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
