package backend

import (
	"context"
	"slices"
	"strings"

	"github.com/distlock/distlock"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// multiBatch is how many entries one Txn of MultiLocks looks up: well
// within etcd's default limit of 128 operations per Txn.
const multiBatch = 64

// MultiLocks tells which of entries (lock queues as Inspect reads them)
// are a multi-lock's (MultiMutex), and what it takes: for each such
// entry's Key, the names of all the locks of its acquisition, its own
// included, sorted. Entries of one lock only are not in the map.
//
// A multi-lock's entries are made in one write, so on etcd they share
// one create revision, which no other write has, and one lease: the
// lookup is one keys-only range read of the lock prefix per entry,
// filtered by the server to the keys created at the entry's revision
// (batched, multiBatch to a Txn), so only the acquisition's own keys come
// back; the server scans the prefix's keys for each. Only exclusive lock
// entries are looked up: a multi-lock makes no others.
//
// ZooKeeper has no such lookup (a znode cannot be found by its czxid
// without listing every lock's directory): ok is false there, and the
// caller can only compare the queues it read (SharedEntries).
func (c *Client) MultiLocks(ctx context.Context, entries []distlock.QueueEntry) (multi map[string][]string, ok bool, err error) {
	if c.etcd == nil {
		return nil, false, nil
	}
	type acq struct {
		rev   int64
		lease int64
	}
	var (
		todo []acq
		seen = map[acq]bool{}
	)
	for _, e := range entries {
		if e.Kind != distlock.Exclusive || e.Permits > 0 || e.Token.Seq <= 0 || e.Token.Owner == 0 {
			continue
		}
		a := acq{e.Token.Seq, int64(e.Token.Owner)}
		if !seen[a] {
			seen[a] = true
			todo = append(todo, a)
		}
	}
	names := map[acq][]string{}
	for len(todo) > 0 {
		batch := todo[:min(len(todo), multiBatch)]
		todo = todo[len(batch):]
		ops := make([]clientv3.Op, len(batch))
		for i, a := range batch {
			// Not keys-only: that leaves out the lease. The values
			// are the entries' holders, a line each.
			ops[i] = clientv3.OpGet(c.prefix, clientv3.WithPrefix(),
				clientv3.WithMinCreateRev(a.rev), clientv3.WithMaxCreateRev(a.rev))
		}
		resp, err := c.etcd.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			return nil, true, err
		}
		for i, a := range batch {
			for _, kv := range resp.Responses[i].GetResponseRange().Kvs {
				if kv.CreateRevision != a.rev || kv.Lease != a.lease {
					continue
				}
				if name, ok := entryLock(c.prefix, string(kv.Key)); ok {
					names[a] = append(names[a], name)
				}
			}
		}
	}
	multi = map[string][]string{}
	for _, e := range entries {
		ns := names[acq{e.Token.Seq, int64(e.Token.Owner)}]
		if len(ns) > 1 && e.Kind == distlock.Exclusive && e.Permits == 0 {
			ns = slices.Clone(ns)
			slices.Sort(ns)
			multi[e.Key] = slices.Compact(ns)
		}
	}
	return multi, true, nil
}

// entryLock returns the lock whose exclusive entry key is (prefix + NAME
// + "/@w" + lease + "_" + counter, both in hex: etcdlock's keys); ok is
// false for any other key under prefix (other kinds of entries, a
// session's guard, revocation records, done-markers, foreign keys).
func entryLock(prefix, key string) (string, bool) {
	rel, ok := strings.CutPrefix(key, prefix)
	if !ok {
		return "", false
	}
	i := strings.LastIndex(rel, "/@")
	if i < 0 {
		return "", false
	}
	name, rest := rel[:i], rel[i+2:]
	if distlock.ValidateName(name) != nil {
		return "", false
	}
	rest, ok = strings.CutPrefix(rest, "w")
	if !ok {
		return "", false
	}
	lease, n, ok := strings.Cut(rest, "_")
	if !ok || !isHex(lease) || !isHex(n) {
		return "", false
	}
	return name, true
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

// SharedEntries compares the queues of several locks (queues[i] is
// names[i]'s, as Inspect reads it) and returns, for each exclusive entry
// whose token's sequence number and owner it shares with an entry of
// another of these queues, the names of the locks it was found in, its
// own included, sorted. Entries that share both were made by one write
// of one session (one etcd create revision, one ZooKeeper czxid): one
// multi-lock acquisition, which may take more locks than these.
func SharedEntries(names []string, queues [][]distlock.QueueEntry) map[string][]string {
	type acq struct {
		seq   int64
		owner uint64
	}
	in := map[acq][]string{}
	for i, q := range queues {
		for _, e := range q {
			if e.Kind == distlock.Exclusive && e.Permits == 0 {
				a := acq{e.Token.Seq, e.Token.Owner}
				if !slices.Contains(in[a], names[i]) {
					in[a] = append(in[a], names[i])
				}
			}
		}
	}
	out := map[string][]string{}
	for _, q := range queues {
		for _, e := range q {
			if ns := in[acq{e.Token.Seq, e.Token.Owner}]; len(ns) > 1 && e.Kind == distlock.Exclusive && e.Permits == 0 {
				ns = slices.Clone(ns)
				slices.Sort(ns)
				out[e.Key] = ns
			}
		}
	}
	return out
}
