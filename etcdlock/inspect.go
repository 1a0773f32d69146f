package etcdlock

import (
	"context"
	"fmt"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/qlock/etcdq"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Inspect returns the queue of the lock called name under the key prefix
// prefix (DefaultPrefix if empty), without joining it: the holder first,
// then the waiters in the order they will hold (QueueEntry.Holding says
// which hold). It is one linearizable range read sorted by create
// revision, so the entries are a consistent snapshot. An Election's
// candidates of the same name ("@e" keys, a queue of their own) are listed
// too, as exclusive entries; other keys under the lock's queue are
// ignored. An empty result means nobody holds or waits.
//
// Each entry's Token is the key's create revision (the fencing token it
// has or will have), Owner the lease ID in hex, Holder the key's value;
// Created is zero, since etcd keeps no creation time (distlock's command
// line puts one in the value).
func Inspect(ctx context.Context, cli *clientv3.Client, prefix, name string) ([]distlock.QueueEntry, error) {
	if cli == nil {
		return nil, fmt.Errorf("etcdlock: inspect %q: %w: *clientv3.Client is nil", name, distlock.ErrNilClient)
	}
	if err := etcdq.Backend.ValidateName(name); err != nil {
		return nil, err
	}
	if prefix == "" {
		prefix = DefaultPrefix
	}
	q, err := etcdq.Inspect(ctx, cli, prefix, name)
	if err != nil {
		return nil, fmt.Errorf("etcdlock: inspect %q: %w", name, err)
	}
	return q, nil
}

// WatchQueue calls f with the queue of the lock called name (as Inspect
// reads it) now and again after every change, until ctx ends (it returns
// ctx's cause), f returns an error (it returns that) or the watch fails.
// It is driven by one etcd watch on the lock's queue, set before each
// read, so no change is missed; changes that come while f runs are read
// once, together. The watch requires a leader: a member cut off from the
// others ends it with an error rather than going silent.
func WatchQueue(ctx context.Context, cli *clientv3.Client, prefix, name string, f func([]distlock.QueueEntry) error) error {
	if cli == nil {
		return fmt.Errorf("etcdlock: watch queue %q: %w: *clientv3.Client is nil", name, distlock.ErrNilClient)
	}
	if err := etcdq.Backend.ValidateName(name); err != nil {
		return err
	}
	if prefix == "" {
		prefix = DefaultPrefix
	}
	if err := etcdq.WatchQueue(ctx, cli, prefix, name, f); err != nil {
		return fmt.Errorf("etcdlock: watch queue %q: %w", name, err)
	}
	return nil
}
