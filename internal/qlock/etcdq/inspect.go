package etcdq

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/internal/qlock"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// ReadQueue reads the queue of lock name (qlock.ClientStore), by one
// linearizable Txn of range reads sorted by create revision: a
// consistent snapshot of its own directory and of the foreign keys
// beside it (foreign.go). Keys under the queue that are not entries are
// ignored; a longer lock name's keys are skipped.
//
// A recognised foreign entry takes its place in the lock's queue by its
// create revision; etcd's own key (one per lease) is also a candidate,
// listed in the election's queue when the election has candidates of
// the library's, and leading there when it is older than all of them
// and the other foreign ones. Keys of no known client are listed last,
// ClientUnknown, holding nothing.
func (r ClientStore) ReadQueue(ctx context.Context, name string) ([]distlock.QueueEntry, error) {
	dir := QueueDir(r.Prefix, name)
	base := baseOfDir(dir)
	sorted := clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend)
	fr := foreignRanges(base)
	resp, err := r.Client.Txn(ctx).Then(
		clientv3.OpGet(dir, clientv3.WithPrefix(), sorted),
		clientv3.OpGet(fr[0][0], clientv3.WithRange(fr[0][1]), sorted),
		clientv3.OpGet(fr[1][0], clientv3.WithRange(fr[1][1]), sorted)).Commit()
	if err != nil {
		return nil, err
	}
	var (
		kinds                    []qlock.Kind
		permits, line, out, cand []distlock.QueueEntry
	)
	for _, kv := range resp.Responses[0].GetResponseRange().Kvs {
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
		case kind == qlock.Candidate:
			e.Priority = candidatePriority(dir, key)
			cand = append(cand, e)
		default:
			kinds, out = append(kinds, kind), append(out, e)
		}
	}
	fkvs := slices.Concat(resp.Responses[1].GetResponseRange().Kvs, resp.Responses[2].GetResponseRange().Kvs)
	flock, fcand, fkinds, unknown := foreignQueueEntries(name, base, fkvs)
	if len(flock) > 0 {
		kinds, out = mergeBySeq(kinds, out, fkinds, flock)
	}
	for i, h := range qlock.Holding(kinds) {
		out[i].Holding = h
	}
	if len(cand) > 0 && len(fcand) > 0 {
		// The oldest foreign candidate leads (by its client's rule) if
		// no candidate of the library's is older.
		bySeq := func(a, b distlock.QueueEntry) int { return cmp.Compare(a.Token.Seq, b.Token.Seq) }
		slices.SortFunc(fcand, bySeq)
		fcand[0].Holding = fcand[0].Token.Seq < slices.MinFunc(cand, bySeq).Token.Seq
		cand = slices.Concat(cand, fcand)
		slices.SortStableFunc(cand, bySeq)
	}
	// A semaphore's holders first, then its line, oldest first.
	return slices.Concat(permits, line, out, cand, unknown), nil
}

// mergeBySeq merges the lock entries b (with kinds bk) into a (with
// kinds ak), both oldest first, by create revision.
func mergeBySeq(ak []qlock.Kind, a []distlock.QueueEntry, bk []qlock.Kind, b []distlock.QueueEntry) ([]qlock.Kind, []distlock.QueueEntry) {
	type kv struct {
		k qlock.Kind
		e distlock.QueueEntry
	}
	all := make([]kv, 0, len(a)+len(b))
	for i := range a {
		all = append(all, kv{ak[i], a[i]})
	}
	for i := range b {
		all = append(all, kv{bk[i], b[i]})
	}
	slices.SortStableFunc(all, func(x, y kv) int { return cmp.Compare(x.e.Token.Seq, y.e.Token.Seq) })
	kinds, out := make([]qlock.Kind, len(all)), make([]distlock.QueueEntry, len(all))
	for i, x := range all {
		kinds[i], out[i] = x.k, x.e
	}
	return kinds, out
}

// multiBatch is how many entries one Txn of FindMulti looks up: well
// within etcd's default limit of 128 operations per Txn.
const multiBatch = 64

// FindMulti sets the Multi of q's entries that are a multi-lock's
// (qlock.AdminStore). A multi-lock's entries are made in one Txn, so they
// share one create revision, which no other write has, and one lease:
// the lookup is one range read of the key prefix per exclusive entry,
// filtered by the server to the keys created at the entry's revision
// (batched, multiBatch to a Txn), so only the acquisition's own keys come
// back (the server scans the prefix's keys for each). Only exclusive lock
// entries are looked up: a multi-lock makes no others.
func (s AdminStore) FindMulti(ctx context.Context, name string, q []distlock.QueueEntry) error {
	type acq struct {
		rev   int64
		lease int64
	}
	var (
		todo []acq
		seen = map[acq]bool{}
	)
	for _, e := range q {
		if e.Kind != distlock.Exclusive || e.Client != "" || e.Token.Seq <= 0 || e.Token.Owner == 0 {
			continue
		}
		if a := (acq{e.Token.Seq, int64(e.Token.Owner)}); !seen[a] {
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
			// Not keys-only: that leaves out the lease. The values are
			// the entries' holders, a line each.
			ops[i] = clientv3.OpGet(s.Prefix, clientv3.WithPrefix(),
				clientv3.WithMinCreateRev(a.rev), clientv3.WithMaxCreateRev(a.rev))
		}
		resp, err := s.Client.Txn(ctx).Then(ops...).Commit()
		if err != nil {
			return err
		}
		for i, a := range batch {
			for _, kv := range resp.Responses[i].GetResponseRange().Kvs {
				if kv.CreateRevision != a.rev || kv.Lease != a.lease {
					continue
				}
				if lock, ok := exclusiveEntryLock(s.Prefix, string(kv.Key)); ok {
					names[a] = append(names[a], lock)
				}
			}
		}
	}
	for i, e := range q {
		if e.Kind != distlock.Exclusive {
			continue
		}
		if ns := names[acq{e.Token.Seq, int64(e.Token.Owner)}]; len(ns) > 1 {
			ns = slices.Clone(ns)
			slices.Sort(ns)
			q[i].Multi = slices.Compact(ns)
		}
	}
	return nil
}

// ReadDelays returns the lock-delay records (qlock.DelayRecord, as
// stored) that lock name's waiters keep under prefix, one key per waiter
// bound to its lease, each directly under DelayDir: a longer lock name's
// records, a level deeper, are not name's.
func ReadDelays(ctx context.Context, cli *clientv3.Client, prefix, name string) ([][]byte, error) {
	dir := DelayDir(prefix, name)
	resp, err := cli.Get(ctx, dir, clientv3.WithPrefix())
	if err != nil {
		return nil, err
	}
	var out [][]byte
	for _, kv := range resp.Kvs {
		if !strings.Contains(strings.TrimPrefix(string(kv.Key), dir), "/") {
			out = append(out, kv.Value)
		}
	}
	return out, nil
}

// WatchQueue calls f with lock name's queue (as ReadQueue reads it) now and
// after every change of it, until ctx ends, f fails or the watch does.
// The watch is in place before each read, so no change is missed; changes
// that come while f runs are read once, together. It watches the lock's
// name + "/", for the foreign keys beside the queue too; a longer lock
// name's changes there are skipped.
func (s AdminStore) WatchQueue(ctx context.Context, name string, f func([]distlock.QueueEntry) error) error {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	dir := QueueDir(s.Prefix, name)
	base := baseOfDir(dir)
	wch := s.Client.Watch(wctx, base, clientv3.WithPrefix(), clientv3.WithCreatedNotify())
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
	// relevant says whether resp changed the queue's keys.
	relevant := func(resp clientv3.WatchResponse) bool {
		for _, ev := range resp.Events {
			k := string(ev.Kv.Key)
			if _, c := classifyForeign(base, k); strings.HasPrefix(k, dir) || c != notForeign {
				return true
			}
		}
		return false
	}
	next := func() (bool, error) {
		select {
		case resp, ok := <-wch:
			if err := ended(resp, ok); err != nil {
				return false, err
			}
			return relevant(resp), nil
		case <-ctx.Done():
			return false, context.Cause(ctx)
		}
	}
	if _, err := next(); err != nil { // the watch's creation
		return err
	}
	for {
		q, err := s.ReadQueue(ctx, name)
		if err != nil {
			return err
		}
		if err := f(q); err != nil {
			return err
		}
		for changed := false; !changed; {
			if changed, err = next(); err != nil {
				return err
			}
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
