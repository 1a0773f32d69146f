package etcdlock

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/distlock/distlock"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Inspect returns the queue of the lock called name under the key prefix
// prefix (DefaultPrefix if empty), without joining it: the holder first,
// then the waiters in the order they will hold (for exclusive entries, the
// first entry holds; see distlock.Holding for shared ones). It is one
// linearizable range read sorted by create revision, so the entries are a
// consistent snapshot. An Election's candidates of the same name ("@e"
// keys, a queue of their own) are listed too, as exclusive entries; other
// keys under the lock's queue are ignored. An empty result means nobody holds or waits.
//
// Each entry's Token is the key's create revision (the fencing token it
// has or will have), Owner the lease ID in hex, Holder the key's value;
// Created is zero, since etcd keeps no creation time (distlock's command
// line puts one in the value).
func Inspect(ctx context.Context, cli *clientv3.Client, prefix, name string) ([]distlock.QueueEntry, error) {
	if cli == nil {
		return nil, fmt.Errorf("etcdlock: inspect %q: %w: *clientv3.Client is nil", name, distlock.ErrNilClient)
	}
	if err := distlock.ValidateName(name); err != nil {
		return nil, fmt.Errorf("etcdlock: inspect: %w", err)
	}
	if prefix == "" {
		prefix = DefaultPrefix
	}
	dir := prefix + name + "/@"
	resp, err := cli.Get(ctx, dir, clientv3.WithPrefix(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil {
		return nil, fmt.Errorf("etcdlock: inspect %q: %w", name, err)
	}
	out := make([]distlock.QueueEntry, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		key := string(kv.Key)
		kind, ok := parseEntryKey(key[len(dir):])
		if !ok {
			continue
		}
		out = append(out, distlock.QueueEntry{
			Key:    key,
			Kind:   kind,
			Token:  distlock.Token{Name: name, Seq: kv.CreateRevision, Owner: uint64(kv.Lease)},
			Owner:  strconv.FormatInt(kv.Lease, 16),
			Holder: string(kv.Value),
		})
	}
	return out, nil
}

// parseEntryKey parses what follows "<name>/@" in an entry key:
// "<kind><lease hex>_<n hex>".
func parseEntryKey(rest string) (distlock.Kind, bool) {
	if rest == "" {
		return 0, false
	}
	var kind distlock.Kind
	switch rest[:1] {
	case exclusiveMark, electionMark:
		kind = distlock.Exclusive
	case sharedMark:
		kind = distlock.Shared
	default:
		return 0, false
	}
	lease, n, ok := strings.Cut(rest[1:], "_")
	if !ok || !isHex(lease) || !isHex(n) {
		return 0, false
	}
	return kind, true
}

func isHex(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
