package zkq

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/fencing/zkfence"
	"github.com/go-zookeeper/zk"
)

// AdminStore is qlock.AdminStore on a ZooKeeper connection and prefix: a
// lock's queue (Inspect, WatchQueue), its revocation records
// (RevokeStore) and its done-markers, persistent znodes with the store's
// ACL beside the lock's directory ('@' never occurs in lock names or
// slots, so they never collide with a lock's entries or another lock's
// markers):
//
//	PREFIX/@once/NAME/@slot/SLOT   a slot's marker (JSON data, see distlock.SlotMarker)
//	PREFIX/@once/NAME/@fence       the fence the markers are written through
type AdminStore struct{ RevokeStore }

// Queue reads lock name's queue (Inspect).
func (s AdminStore) Queue(ctx context.Context, name string) ([]distlock.QueueEntry, error) {
	return Inspect(ctx, s.Conn, s.Prefix, name)
}

// WatchQueue follows lock name's queue (the package's WatchQueue).
func (s AdminStore) WatchQueue(ctx context.Context, name string, f func([]distlock.QueueEntry) error) error {
	return WatchQueue(ctx, s.Conn, s.Prefix, name, f)
}

// get reads path, after a sync when sync is set (the server answering has
// then seen every write before); ok is false if there is no such node.
func (s AdminStore) get(ctx context.Context, path string, sync bool) ([]byte, bool, error) {
	if sync {
		if _, err := retry(ctx, func() (string, error) { return s.Conn.Sync(path) }); err != nil && !errors.Is(err, zk.ErrNoNode) {
			return nil, false, err
		}
	}
	data, err := retry(ctx, func() ([]byte, error) {
		d, _, err := s.Conn.Get(path)
		return d, err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return nil, false, nil
	}
	return data, err == nil, err
}

func markDir(prefix, name string) string { return prefix + "/@once/" + name + "/@slot" }

// Marker reads slot's marker after a sync.
func (s AdminStore) Marker(ctx context.Context, name, slot string) ([]byte, bool, error) {
	return s.get(ctx, markDir(s.Prefix, name)+"/"+slot, true)
}

// Mark creates slot's marker through the fence, in one multi that also
// checks that tok's lock node exists (found by its czxid in the lock's
// queue) and creates the marker, failing if it exists.
func (s AdminStore) Mark(ctx context.Context, name, slot string, tok distlock.Token, value []byte) ([]byte, error) {
	f, err := zkfence.New(s.Conn, s.Prefix+"/@once/"+name+"/@fence", name, zkfence.WithACL(s.acl()...))
	if err != nil {
		return nil, err
	}
	q, err := Inspect(ctx, s.Conn, s.Prefix, name)
	if err != nil {
		return nil, err
	}
	at := slices.IndexFunc(q, func(e distlock.QueueEntry) bool { return e.Token == tok })
	if at < 0 {
		return nil, fmt.Errorf("%w: no entry with token %v in the lock's queue", distlock.ErrLost, tok)
	}
	// The marker's parents, persistent (the fence creates its own, which
	// are the same up to @once/NAME).
	dir := markDir(s.Prefix, name)
	for i := 1; i <= len(dir); i++ {
		if i == len(dir) || dir[i] == '/' {
			if _, err := retry(ctx, func() (string, error) { return s.Conn.Create(dir[:i], nil, 0, s.acl()) }); err != nil && !errors.Is(err, zk.ErrNodeExists) {
				return nil, fmt.Errorf("create %s: %w", dir[:i], err)
			}
		}
	}
	_, err = f.Write(ctx, tok,
		&zk.CheckVersionRequest{Path: q[at].Key, Version: -1}, // the lock entry still exists
		&zk.CreateRequest{Path: dir + "/" + slot, Data: value, Acl: s.acl()})
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return nil, fmt.Errorf("%w: %w", distlock.ErrLost, err)
	case errors.Is(err, zk.ErrNodeExists):
		prev, ok, rerr := s.get(ctx, dir+"/"+slot, true)
		if rerr != nil || !ok {
			return nil, distlock.ErrSlotDone
		}
		return append([]byte{}, prev...), distlock.ErrSlotDone // not nil when empty
	}
	return nil, err
}

// slots lists lock name's marked slots, after a sync when sync is set.
func (s AdminStore) slots(ctx context.Context, name string, sync bool) ([]string, error) {
	dir := markDir(s.Prefix, name)
	if sync {
		if _, err := retry(ctx, func() (string, error) { return s.Conn.Sync(dir) }); err != nil && !errors.Is(err, zk.ErrNoNode) {
			return nil, err
		}
	}
	kids, err := retry(ctx, func() ([]string, error) {
		k, _, err := s.Conn.Children(dir)
		return k, err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil
	}
	return kids, err
}

// Markers syncs, lists the markers and reads the newest n.
func (s AdminStore) Markers(ctx context.Context, name string, n int) (int, [][]byte, error) {
	kids, err := s.slots(ctx, name, true)
	if err != nil {
		return 0, nil, err
	}
	slices.Sort(kids)
	slices.Reverse(kids)
	var newest [][]byte
	for _, k := range kids[:min(max(n, 0), len(kids))] {
		data, ok, err := s.get(ctx, markDir(s.Prefix, name)+"/"+k, false)
		if err != nil {
			return 0, nil, err
		}
		if ok { // else pruned since
			newest = append(newest, data)
		}
	}
	return len(kids), newest, nil
}

// PruneMarkers deletes the markers before before, a hundred per multi.
func (s AdminStore) PruneMarkers(ctx context.Context, name, before string) (int, error) {
	kids, err := s.slots(ctx, name, false)
	if err != nil {
		return 0, err
	}
	var old []any
	for _, k := range kids {
		if k < before {
			old = append(old, &zk.DeleteRequest{Path: markDir(s.Prefix, name) + "/" + k, Version: -1})
		}
	}
	deleted := 0
	for len(old) > 0 {
		batch := old[:min(100, len(old))]
		old = old[len(batch):]
		_, err := retry(ctx, func() ([]zk.MultiResponse, error) { return s.Conn.Multi(batch...) })
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			return 0, err
		}
		if err == nil {
			deleted += len(batch)
		}
	}
	return deleted, nil
}
