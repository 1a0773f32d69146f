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
// lock's queue, its revocation records (ClientStore) and its
// done-markers, persistent znodes with the store's ACL (recipe.Admin says
// where).
type AdminStore struct{ ClientStore }

// markDir holds the markers, PREFIX/@once/NAME/@slot/SLOT; the fence they
// are written through is PREFIX/@once/NAME/@fence.
func markDir(prefix, name string) string { return prefix + "/@once/" + name + "/@slot" }

// Marker reads slot's marker after a sync.
func (s AdminStore) Marker(ctx context.Context, name, slot string) ([]byte, bool, error) {
	p := markDir(s.Prefix, name) + "/" + slot
	if err := synced(ctx, s.Conn, p); err != nil {
		return nil, false, err
	}
	return get(ctx, s.Conn, p)
}

// Mark creates slot's marker in one multi that also checks that tok's
// lock node exists (found by its czxid in the queue of tok's lock) and
// creates the marker, failing if it exists. A token of lock name goes
// through name's fence; a token of the slot's own lock
// (distlock.SlotLockName) is checked by its node alone, as
// qlock.MarkStore says why.
func (s AdminStore) Mark(ctx context.Context, name, slot string, tok distlock.Token, value []byte) ([]byte, error) {
	var f *zkfence.Fence
	if tok.Name == name {
		var err error
		if f, err = zkfence.New(s.Conn, s.Prefix+"/@once/"+name+"/@fence", name, zkfence.WithACL(s.acl()...)); err != nil {
			return nil, err
		}
	}
	q, err := s.ReadQueue(ctx, tok.Name)
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
	ops := []any{
		&zk.CheckVersionRequest{Path: q[at].Key, Version: -1}, // the lock entry still exists
		&zk.CreateRequest{Path: dir + "/" + slot, Data: value, Acl: s.acl()},
	}
	if f != nil {
		_, err = f.Write(ctx, tok, ops...)
	} else {
		var rs []zk.MultiResponse
		rs, err = retry(ctx, func() ([]zk.MultiResponse, error) { return s.Conn.Multi(ops...) })
		for _, r := range rs {
			if r.Error != nil {
				err = r.Error // the op that failed, not the multi's own error
				break
			}
		}
	}
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return nil, fmt.Errorf("%w: %w", distlock.ErrLost, err)
	case errors.Is(err, zk.ErrNodeExists):
		prev, ok, rerr := s.Marker(ctx, name, slot)
		if rerr != nil || !ok {
			return nil, distlock.ErrSlotDone
		}
		return append([]byte{}, prev...), distlock.ErrSlotDone // not nil when empty
	}
	return nil, err
}

// Markers syncs, lists the markers and reads the newest n.
func (s AdminStore) Markers(ctx context.Context, name string, n int) (int, [][]byte, error) {
	kids, err := syncedChildren(ctx, s.Conn, markDir(s.Prefix, name))
	if err != nil {
		return 0, nil, err
	}
	slices.Sort(kids)
	slices.Reverse(kids)
	var newest [][]byte
	for _, k := range kids[:min(max(n, 0), len(kids))] {
		data, ok, err := get(ctx, s.Conn, markDir(s.Prefix, name)+"/"+k)
		if err != nil {
			return 0, nil, err
		}
		if ok { // else pruned since
			newest = append(newest, data)
		}
	}
	return len(kids), newest, nil
}

// PruneMarkers lists the markers after a sync, and deletes those before
// before a hundred per multi.
func (s AdminStore) PruneMarkers(ctx context.Context, name, before string) (int, error) {
	kids, err := syncedChildren(ctx, s.Conn, markDir(s.Prefix, name))
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
	for batch := range slices.Chunk(old, 100) {
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
