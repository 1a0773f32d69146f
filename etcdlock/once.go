package etcdlock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/fencing"
	"github.com/distlock/distlock/fencing/etcdfence"
	"github.com/distlock/distlock/internal/qlock"
	"github.com/distlock/distlock/internal/qlock/etcdq"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Marks keeps the done-markers of one lock's slots for distlock.Once, in
// etcd beside the lock's queue ('@' never occurs in lock names or slots,
// so these keys never collide with a lock's entries or another lock's
// markers; they are those the distlock once command has always used):
//
//	PREFIX@once/NAME/@slot/SLOT   a slot's marker (JSON, see distlock.SlotMarker)
//	PREFIX@once/NAME/@fence       the fence the markers are written through
//
// A Marks is safe for concurrent use.
type Marks struct {
	cli    *clientv3.Client
	prefix string
	name   string
	holder string
	base   string // PREFIX@once/NAME
}

var _ distlock.SlotMarks = (*Marks)(nil)

// NewMarks returns the done-markers of lock name, on s's client under s's
// key prefix: those of the locks s takes. Markers outlive s (they are not
// bound to its lease).
func NewMarks(s *Session, name string) (*Marks, error) {
	if s == nil {
		return nil, fmt.Errorf("etcdlock: new marks %q: %w: *Session is nil", name, distlock.ErrNilClient)
	}
	if err := etcdq.Backend.ValidateName(name); err != nil {
		return nil, err
	}
	return &Marks{cli: s.Client(), prefix: s.Prefix(), name: name, holder: s.Holder(), base: s.Prefix() + "@once/" + name}, nil
}

// Name returns the lock's name.
func (m *Marks) Name() string { return m.name }

func (m *Marks) key(slot string) string { return m.base + "/@slot/" + slot }

func (m *Marks) fenceKey() string { return m.base + "/@fence" }

// Marker returns slot's marker, or nil if it has none. The read is
// linearizable.
func (m *Marks) Marker(ctx context.Context, slot string) (*distlock.SlotMarker, error) {
	if err := distlock.ValidateSlot(slot); err != nil {
		return nil, fmt.Errorf("etcdlock: marker of lock %q: %w", m.name, err)
	}
	resp, err := m.cli.Get(ctx, m.key(slot))
	if err != nil {
		return nil, fmt.Errorf("etcdlock: lock %q: read the marker of slot %q: %w", m.name, slot, err)
	}
	if len(resp.Kvs) == 0 {
		return nil, nil
	}
	mk := distlock.ParseSlotMarker(resp.Kvs[0].Value)
	return &mk, nil
}

// Mark writes mk as the marker of slot mk.Slot, as distlock.SlotMarks
// says: through the fence with lease's token, in one Txn that also
// requires lease's lock entry (its key, create revision and lease) and
// no marker for the slot. An empty mk.Holder is filled in with the
// session's holder value, or else the host name and process ID.
func (m *Marks) Mark(ctx context.Context, lease *distlock.Lease, mk distlock.SlotMarker) error {
	if err := qlock.CheckMark(m.name, lease, &mk, m.holder); err != nil {
		return fmt.Errorf("etcdlock: %w", err)
	}
	slot, tok := mk.Slot, lease.Token()
	lost := func(err error) error {
		return fmt.Errorf("etcdlock: lock %q: mark slot %q: %w: %w", m.name, slot, distlock.ErrLost, err)
	}
	if err := lease.Err(); err != nil {
		return lost(err)
	}
	value, err := json.Marshal(mk)
	if err != nil {
		return err
	}
	f, err := etcdfence.New(m.cli, m.fenceKey(), m.name)
	if err != nil {
		return err
	}
	lockKey, err := etcdfence.HolderKey(ctx, m.cli, m.prefix, tok)
	if errors.Is(err, etcdfence.ErrNotHeld) {
		return lost(err)
	}
	if err != nil {
		return fmt.Errorf("etcdlock: lock %q: mark slot %q: %w", m.name, slot, err)
	}
	key := m.key(slot)
	put := clientv3.OpTxn(
		[]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(key), "=", 0)},
		[]clientv3.Op{clientv3.OpPut(key, string(value))},
		[]clientv3.Op{clientv3.OpGet(key)})
	resp, err := f.WriteHeld(ctx, tok, lockKey, put)
	if errors.Is(err, etcdfence.ErrNotHeld) || errors.Is(err, fencing.ErrStale) || errors.Is(err, fencing.ErrFork) {
		return lost(err)
	}
	if err != nil {
		return fmt.Errorf("etcdlock: lock %q: mark slot %q: %w", m.name, slot, err)
	}
	in := resp.Responses[0].GetResponseTxn()
	if !in.Succeeded {
		var v []byte
		if kvs := in.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
			v = kvs[0].Value
		}
		return &distlock.SlotDoneError{Name: m.name, Slot: slot, Marker: distlock.ParseSlotMarker(v)}
	}
	return nil
}

// SlotMarkers returns how many done-markers lock name has under key prefix
// prefix (DefaultPrefix if empty), and the newest n of them by slot name,
// newest first (slots named by time sort by time): what `distlock status`
// shows. It reads, with one linearizable range request, the markers'
// keys and at most n values.
func SlotMarkers(ctx context.Context, cli *clientv3.Client, prefix, name string, n int) (total int, newest []distlock.SlotMarker, err error) {
	if cli == nil {
		return 0, nil, fmt.Errorf("etcdlock: markers of %q: %w: *clientv3.Client is nil", name, distlock.ErrNilClient)
	}
	if err := etcdq.Backend.ValidateName(name); err != nil {
		return 0, nil, err
	}
	if prefix == "" {
		prefix = DefaultPrefix
	}
	dir := prefix + "@once/" + name + "/@slot/"
	resp, err := cli.Txn(ctx).Then(
		clientv3.OpGet(dir, clientv3.WithPrefix(), clientv3.WithCountOnly()),
		clientv3.OpGet(dir, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend), clientv3.WithLimit(int64(max(n, 1))))).Commit()
	if err != nil {
		return 0, nil, fmt.Errorf("etcdlock: markers of %q: %w", name, err)
	}
	total = int(resp.Responses[0].GetResponseRange().Count)
	for _, kv := range resp.Responses[1].GetResponseRange().Kvs {
		if len(newest) < n {
			newest = append(newest, distlock.ParseSlotMarker(kv.Value))
		}
	}
	return total, newest, nil
}

// Prune deletes the markers of the slots that sort before slot before
// (for slots named by time: the older ones), in one request, and returns
// how many it deleted. Markers are never deleted otherwise; a job that
// runs every second leaves 86,400 a day (gocronlock prunes them).
func (m *Marks) Prune(ctx context.Context, before string) (int, error) {
	dir := m.base + "/@slot/"
	resp, err := m.cli.Delete(ctx, dir, clientv3.WithRange(dir+before))
	if err != nil {
		return 0, fmt.Errorf("etcdlock: lock %q: prune markers before %q: %w", m.name, before, err)
	}
	return int(resp.Deleted), nil
}
