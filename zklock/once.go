package zklock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/fencing"
	"github.com/distlock/distlock/fencing/zkfence"
	"github.com/distlock/distlock/internal/qlock"
	"github.com/distlock/distlock/internal/qlock/zkq"
	"github.com/distlock/distlock/internal/zkctx"
	"github.com/go-zookeeper/zk"
)

// Marks keeps the done-markers of one lock's slots for distlock.Once, in
// ZooKeeper beside the lock's directory ('@' never occurs in lock names
// or slots, so these znodes never collide with a lock's entries or
// another lock's markers; they are those the distlock once command has
// always used):
//
//	PREFIX/@once/NAME/@slot/SLOT   a slot's marker (JSON data, see distlock.SlotMarker)
//	PREFIX/@once/NAME/@fence       the fence the markers are written through
//
// A Marks is safe for concurrent use.
type Marks struct {
	conn   *zk.Conn
	prefix string
	name   string
	holder string
	acl    []zk.ACL
	base   string // PREFIX/@once/NAME
}

var _ distlock.SlotMarks = (*Marks)(nil)

// NewMarks returns the done-markers of lock name, on s's connection under
// s's prefix and with s's ACL: those of the locks s takes. Markers are
// persistent znodes: they outlive s.
func NewMarks(s *Session, name string) (*Marks, error) {
	if s == nil {
		return nil, fmt.Errorf("zklock: new marks %q: %w: *Session is nil", name, distlock.ErrNilClient)
	}
	if err := zkq.Backend.ValidateName(name); err != nil {
		return nil, err
	}
	return &Marks{conn: s.Conn(), prefix: s.Prefix(), name: name, holder: s.Holder(), acl: s.acl, base: s.Prefix() + "/@once/" + name}, nil
}

// Name returns the lock's name.
func (m *Marks) Name() string { return m.name }

func (m *Marks) path(slot string) string { return m.base + "/@slot/" + slot }

func (m *Marks) fencePath() string { return m.base + "/@fence" }

// Marker returns slot's marker, or nil if it has none. The read follows a
// sync, so it sees every marker written before it started.
func (m *Marks) Marker(ctx context.Context, slot string) (*distlock.SlotMarker, error) {
	if err := distlock.ValidateSlot(slot); err != nil {
		return nil, fmt.Errorf("zklock: marker of lock %q: %w", m.name, err)
	}
	p := m.path(slot)
	if _, err := zkctx.Call(ctx, func() (string, error) { return m.conn.Sync(p) }); err != nil && !errors.Is(err, zk.ErrNoNode) {
		return nil, fmt.Errorf("zklock: lock %q: read the marker of slot %q: %w", m.name, slot, err)
	}
	data, err := zkctx.Call(ctx, func() ([]byte, error) {
		d, _, err := m.conn.Get(p)
		return d, err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("zklock: lock %q: read the marker of slot %q: %w", m.name, slot, err)
	}
	mk := distlock.ParseSlotMarker(data)
	return &mk, nil
}

// Mark writes mk as the marker of slot mk.Slot, as distlock.SlotMarks
// says: through the fence with lease's token, in one multi that also
// checks that lease's lock node exists and creates the marker (failing
// if it exists). An empty mk.Holder is filled in with the session's
// holder value, or else the host name and process ID.
func (m *Marks) Mark(ctx context.Context, lease *distlock.Lease, mk distlock.SlotMarker) error {
	if err := qlock.CheckMark(m.name, lease, &mk, m.holder); err != nil {
		return fmt.Errorf("zklock: %w", err)
	}
	slot, tok := mk.Slot, lease.Token()
	fail := func(err error) error {
		return fmt.Errorf("zklock: lock %q: mark slot %q: %w", m.name, slot, err)
	}
	lost := func(err error) error { return fail(fmt.Errorf("%w: %w", distlock.ErrLost, err)) }
	if err := lease.Err(); err != nil {
		return lost(err)
	}
	value, err := json.Marshal(mk)
	if err != nil {
		return err
	}
	f, err := zkfence.New(m.conn, m.fencePath(), m.name, zkfence.WithACL(m.acl...))
	if err != nil {
		return err
	}
	// The holder's node: the entry whose czxid is the token. The multi
	// checks it again.
	q, err := Inspect(ctx, m.conn, m.prefix, m.name)
	if err != nil {
		return fail(err)
	}
	node := ""
	for _, e := range q {
		if e.Token == tok {
			node = e.Key
		}
	}
	if node == "" {
		return lost(fmt.Errorf("no entry with token %v in the lock's queue", tok))
	}
	// The marker's parents (the fence creates its own, which are the same
	// up to base).
	dir := m.base + "/@slot"
	for i := 1; i <= len(dir); i++ {
		if i < len(dir) && dir[i] != '/' {
			continue
		}
		p := dir[:i]
		if _, err := zkctx.Call(ctx, func() (string, error) { return m.conn.Create(p, nil, 0, m.acl) }); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return fail(fmt.Errorf("create %s: %w", p, err))
		}
	}
	_, err = f.Write(ctx, tok,
		&zk.CheckVersionRequest{Path: node, Version: -1}, // the lock entry still exists
		&zk.CreateRequest{Path: m.path(slot), Data: value, Acl: m.acl})
	switch {
	case err == nil:
		return nil
	case errors.Is(err, fencing.ErrStale), errors.Is(err, fencing.ErrFork), errors.Is(err, zk.ErrNoNode):
		return lost(err)
	case errors.Is(err, zk.ErrNodeExists):
		prev, rerr := m.Marker(ctx, slot)
		if rerr != nil || prev == nil {
			prev = &distlock.SlotMarker{Holder: "another run", Token: "unknown", Mode: "unknown mode"}
		}
		return &distlock.SlotDoneError{Name: m.name, Slot: slot, Marker: *prev}
	}
	return fail(err)
}

// SlotMarkers returns how many done-markers lock name has under znode
// prefix prefix (DefaultPrefix if empty), and the newest n of them by slot
// name, newest first (slots named by time sort by time): what `distlock
// status` shows. It syncs, lists the markers and reads n of them.
func SlotMarkers(ctx context.Context, conn *zk.Conn, prefix, name string, n int) (total int, newest []distlock.SlotMarker, err error) {
	if conn == nil {
		return 0, nil, fmt.Errorf("zklock: markers of %q: %w: *zk.Conn is nil", name, distlock.ErrNilClient)
	}
	if err := zkq.Backend.ValidateName(name); err != nil {
		return 0, nil, err
	}
	if prefix == "" {
		prefix = DefaultPrefix
	}
	dir := prefix + "/@once/" + name + "/@slot"
	fail := func(err error) error { return fmt.Errorf("zklock: markers of %q: %w", name, err) }
	if _, err := zkctx.Call(ctx, func() (string, error) { return conn.Sync(dir) }); err != nil && !errors.Is(err, zk.ErrNoNode) {
		return 0, nil, fail(err)
	}
	kids, err := zkctx.Call(ctx, func() ([]string, error) {
		k, _, err := conn.Children(dir)
		return k, err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return 0, nil, nil
	}
	if err != nil {
		return 0, nil, fail(err)
	}
	slices.Sort(kids)
	slices.Reverse(kids)
	for _, k := range kids[:min(n, len(kids))] {
		data, err := zkctx.Call(ctx, func() ([]byte, error) {
			d, _, err := conn.Get(dir + "/" + k)
			return d, err
		})
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return 0, nil, fail(err)
		}
		newest = append(newest, distlock.ParseSlotMarker(data))
	}
	return len(kids), newest, nil
}

// Prune deletes the markers of the slots that sort before slot before
// (for slots named by time: the older ones), a hundred per multi, and
// returns how many it deleted. Markers are never deleted otherwise; a job
// that runs every second leaves 86,400 a day (gocronlock prunes them).
func (m *Marks) Prune(ctx context.Context, before string) (int, error) {
	dir := m.base + "/@slot"
	fail := func(err error) (int, error) {
		return 0, fmt.Errorf("zklock: lock %q: prune markers before %q: %w", m.name, before, err)
	}
	kids, err := zkctx.Call(ctx, func() ([]string, error) {
		k, _, err := m.conn.Children(dir)
		return k, err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return 0, nil
	}
	if err != nil {
		return fail(err)
	}
	var old []any
	for _, k := range kids {
		if k < before {
			old = append(old, &zk.DeleteRequest{Path: dir + "/" + k, Version: -1})
		}
	}
	deleted := 0
	for len(old) > 0 {
		batch := old[:min(100, len(old))]
		old = old[len(batch):]
		_, err := zkctx.Call(ctx, func() ([]zk.MultiResponse, error) { return m.conn.Multi(batch...) })
		if err != nil && !errors.Is(err, zk.ErrNoNode) {
			return fail(err)
		}
		if err == nil {
			deleted += len(batch)
		}
	}
	return deleted, nil
}
